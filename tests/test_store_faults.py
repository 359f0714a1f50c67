"""Faults of the store met in real processes ([Note: Store faults]): malformed signed values,
a store that cannot be opened, a corrupt database repaired, unsafe paths refused."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")
KEY = "a key for the store fault tests"

# One process: specialize ``add`` with the store in $STORE_DIR (or JITGUARD_STORE), then
# ``write`` a signed value of the guard set in argv[2] under the function's key, or ``call``
# it: calls, a clear() and calls again, a second function object of the same code.
CHILD = '''
import json, os, sys, warnings
caught = []
warnings.simplefilter("always")
warnings.showwarning = lambda m, c, *a, **k: caught.append(f"{c.__name__}: {m}")
import jitguard
from jitguard._src.store.codec import StoredRecord
from jitguard._src.store.keys import entry_id

COMPILES = []


class Plain:
    def __call__(self, request):
        COMPILES.append(1)
        return request.fn

    def serialize(self, artifact):
        return b"plain"

    def deserialize(self, data, fn):
        return fn


def add(x, n):
    return x + n


where = os.environ.get("STORE_DIR")
spec = None if where is None else (where if where else True)
f = jitguard.specialize(add, compiler=Plain(), store=spec, global_state=False)
cache = jitguard.cache_of(f)
out = {}
if sys.argv[1] == "write":
    doc = json.loads(sys.argv[2])
    p = cache._persist
    p.store.save(StoredRecord(
        key=cache.store_key, entry=entry_id(doc), name=p.identity["name"], env=p._env,
        identity={}, guards=doc, dynamic=[], artifact=b"plain", created=0.0))
else:
    out["results"] = [f(1, 2), f(2.5, 2)]
    cache.clear()
    out["again"] = [f(1, 2)]
    g = jitguard.specialize(add, compiler=Plain(), store=spec, global_state=False)
    out["other"] = [g(1, 2)]
    out["events"] = [[e.outcome, e.reason] for e in cache.store_events()]
    out["other_events"] = [[e.outcome, e.reason] for e in jitguard.cache_of(g).store_events()]
out["compiles"] = len(COMPILES)
out["warnings"] = caught
out["persist"] = cache._persist is not None
print(json.dumps(out))
'''


def child(tmp_path: Path, *args: str, store_dir: Any = None, env: Any = None,
          ok: bool = True) -> dict[str, Any]:
    """Run CHILD in a fresh interpreter (the store in ``store_dir``); what it printed."""
    script = tmp_path / "faultchild.py"
    script.write_text(CHILD)
    full = {k: v for k, v in os.environ.items() if not k.startswith("JITGUARD_")}
    full.update(PYTHONPATH=SRC, JITGUARD_CACHE_KEY=KEY)
    if store_dir is not None:
        full["STORE_DIR"] = str(store_dir)
    full.update(env or {})
    proc = subprocess.run([sys.executable, str(script), *args], env=full,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return data


def store_warnings(data: dict[str, Any]) -> list[str]:
    return [w for w in data["warnings"] if w.startswith("StoreWarning")]


# ---- a malformed value, signed right -----------------------------------------------------

_LOCAL_X = {"type": "LocalSource", "name": "L['x']",
            "fields": {"local_name": "x", "is_input": True}}
GOOD = {
    "schema_version": 1, "kind": "jitguard.guard_set", "arg_names": ["x", "n"],
    "guards": [{"kind": "TYPE_MATCH", "sources": [_LOCAL_X], "code": "type(L['x']) is int",
                "expect": {"$": "object", "class": "builtins:int"}, "portable": True}],
}


def _shape(change: Any) -> dict[str, Any]:
    doc = copy.deepcopy(GOOD)
    change(doc)
    return doc


def _guard(doc: dict[str, Any]) -> dict[str, Any]:
    guard: dict[str, Any] = doc["guards"][0]
    return guard


def _source(doc: dict[str, Any]) -> dict[str, Any]:
    source: dict[str, Any] = _guard(doc)["sources"][0]
    return source


def _dotted(doc: dict[str, Any]) -> None:
    _guard(doc)["sources"] = [{"type": "AttrSource", "name": "L['x'].a.b", "fields": {
        "base": {"$": "source", "source": _LOCAL_X}, "member": "a.b"}}]


BAD_SHAPES = {
    # (the guard set, what the warning names)
    "local not a parameter": (
        _shape(lambda d: _source(d)["fields"].update(local_name="zz")), "GuardCompileError"),
    "dotted attribute member": (_shape(_dotted), "SourceError"),
    "local name not a str": (
        _shape(lambda d: _source(d)["fields"].update(local_name=5)), "SourceError"),
    "fields a list": (_shape(lambda d: _source(d).update(fields=[1])), "AttributeError"),
    "class not a str": (
        _shape(lambda d: _guard(d).update(expect={"$": "object", "class": 5})),
        "AttributeError"),
    "unknown kind": (_shape(lambda d: _guard(d).update(kind="NOPE")), "NOPE"),
    "unknown source type": (_shape(lambda d: _source(d).update(type="Nope")), "Nope"),
    "guards not a list": (_shape(lambda d: d.update(guards=5)), "not a jitguard guard set"),
    "guard not a dict": (_shape(lambda d: d.update(guards=[3])), "3 is not a guard"),
    "sources None": (_shape(lambda d: _guard(d).update(sources=None)), "guard 0"),
    "schema version a str": (
        _shape(lambda d: d.update(schema_version="x")), "schema_version"),
    "arg names None": (_shape(lambda d: d.update(arg_names=None)), "its guards take None"),
}


def test_the_good_shape_loads(tmp_path: Path) -> None:
    """The unbroken guard set the bad shapes start from loads and serves the call (so each
    bad shape below is refused for its one change)."""
    store = tmp_path / "store"
    child(tmp_path, "write", json.dumps(GOOD), store_dir=store)
    data = child(tmp_path, "call", store_dir=store)
    assert data["results"] == [3, 4.5]
    assert data["events"][0][0] == "loaded"
    assert data["compiles"] == 1  # 2.5 is not an int: that call compiles
    assert store_warnings(data) == []


@pytest.mark.parametrize("shape", sorted(BAD_SHAPES))
def test_a_malformed_signed_value_is_a_warning_then_a_compile(tmp_path: Path,
                                                              shape: str) -> None:
    """A signed value whose guards cannot be read or re-bound never raises: one
    StoreWarning names the entry and the cause, the call compiles, and the entry is not
    tried again in the process (not after clear(), not by another function object)."""
    doc, cause = BAD_SHAPES[shape]
    store = tmp_path / "store"
    child(tmp_path, "write", json.dumps(doc), store_dir=store)
    data = child(tmp_path, "call", store_dir=store)
    assert data["results"] == [3, 4.5] and data["again"] == [3] and data["other"] == [3]
    warned = store_warnings(data)
    assert len(warned) == 1, data["warnings"]
    from jitguard._src.store.keys import entry_id

    assert f":{entry_id(doc)} [sqlite]" in warned[0] and cause in warned[0], warned
    assert "rejected" in warned[0] and "compiling instead" in warned[0]
    assert [e[0] for e in data["events"]].count("rejected") == 1
    assert "rejected" not in [e[0] for e in data["other_events"]]
    # 1 and 2.5 compile and are saved; after clear(), and in the other function object,
    # those two entries are loaded and the malformed one is skipped
    assert data["compiles"] == 2
    assert [e[0] for e in data["other_events"]] == ["loaded", "loaded"]
