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
        _shape(lambda d: _source(d)["fields"].update(local_name=5)),
        "cannot rebuild LocalSource: LocalSource needs a str name, got 5"),
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


# ---- opening a store that cannot be opened -----------------------------------------------


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Any:
    """A 256 KiB tmpfs of its own (root only, else the test skips), unmounted afterwards."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs",
                           str(mnt)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


def _fill(mnt: Path) -> None:
    """Write to ``mnt`` until it has no space left."""
    fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)


def assert_in_memory(data: dict[str, Any], *needles: str) -> str:
    """The store was not used: the right results, every call compiled (nothing loaded),
    one StoreWarning holding each needle; that warning."""
    assert data["results"] == [3, 4.5] and data["again"] == [3] and data["other"] == [3]
    assert data["persist"] is False and data["compiles"] == 4
    warned = store_warnings(data)
    assert len(warned) == 1, data["warnings"]
    for needle in needles:
        assert needle in warned[0], warned[0]
    assert "the cache runs in memory only" in warned[0]
    return warned[0]


@pytest.mark.parametrize("how", ["store=", "JITGUARD_STORE"])
def test_no_space_for_the_key_is_one_warning(tiny_fs: Path, tmp_path: Path,
                                             how: str) -> None:
    """A full disk when the store is first opened (no key yet): one warning naming the
    error and the fix; the program runs, in memory."""
    _fill(tiny_fs)
    store = tiny_fs / "store"
    env = {"JITGUARD_CACHE_KEY": ""}  # the key file is needed
    if how == "store=":
        data = child(tmp_path, "call", store_dir=store, env=env)
    else:
        data = child(tmp_path, "call", env={**env, "JITGUARD_STORE": str(store)})
    assert_in_memory(data, "No space left on device", "free space on that disk")


def test_no_space_for_the_database_is_one_warning(tiny_fs: Path, tmp_path: Path) -> None:
    """The directory and key exist, but there is no space to make the database."""
    store = tiny_fs / "store"
    child(tmp_path, "call", store_dir=store)
    for name in os.listdir(store):
        os.unlink(store / name)
    _fill(tiny_fs)
    assert_in_memory(child(tmp_path, "call", store_dir=store), "full",
                     "free space on that disk")


@pytest.mark.parametrize("existing", [False, True])
def test_a_read_only_directory_is_one_warning(tiny_fs: Path, tmp_path: Path,
                                              existing: bool) -> None:
    """A store on a read-only filesystem (empty, or holding a database and a key): one
    warning naming the fix, in memory."""
    store = tiny_fs / "store"
    store.mkdir(mode=0o700)
    if existing:
        child(tmp_path, "call", store_dir=store, env={"JITGUARD_CACHE_KEY": ""})
    subprocess.run(["mount", "-o", "remount,ro", str(tiny_fs)], check=True)
    data = child(tmp_path, "call", store_dir=store, env={"JITGUARD_CACHE_KEY": ""})
    assert_in_memory(data, "make the directory writable")


def test_a_key_file_others_can_read_is_one_warning(tmp_path: Path) -> None:
    """A key file of mode 0644 (or owned by another user): one warning naming the fix."""
    store = tmp_path / "store"
    store.mkdir(mode=0o700)
    (store / "key").write_bytes(os.urandom(32))
    os.chmod(store / "key", 0o644)
    env = {"JITGUARD_CACHE_KEY": ""}
    assert_in_memory(child(tmp_path, "call", store_dir=store, env=env), "chmod 600")
    os.chmod(store / "key", 0o600)
    os.chown(store / "key", 12345, -1)
    if os.stat(store / "key").st_uid == os.getuid():
        pytest.skip("cannot give a file to another user here (not root)")
    assert_in_memory(child(tmp_path, "call", store_dir=store, env=env),
                     "belongs to another user (uid 12345)")


def test_a_missing_parent_is_one_warning(tmp_path: Path) -> None:
    """A store directory whose parent does not exist (store= or JITGUARD_STORE) is not
    made: one warning naming the parent."""
    store = tmp_path / "nope" / "deeper" / "store"
    assert_in_memory(child(tmp_path, "call", store_dir=store),
                     f"its parent {store.parent} does not exist")
    # Through the environment, the variable's check (env) refuses the value first: one
    # warning in all, an EnvironmentVariableWarning, and no store.
    data = child(tmp_path, "call", env={"JITGUARD_STORE": str(store)})
    assert data["results"] == [3, 4.5] and data["persist"] is False
    assert store_warnings(data) == []
    assert len(data["warnings"]) == 1, data["warnings"]
    assert "EnvironmentVariableWarning" in data["warnings"][0]
    assert "does not exist" in data["warnings"][0]
    assert not (tmp_path / "nope").exists()


def test_strict_raises(tmp_path: Path) -> None:
    """Store(..., strict=True) raises StoreError where the default warns."""
    import warnings

    from jitguard import Store, StoreError, StoreWarning

    where = tmp_path / "nope" / "store"
    with pytest.raises(StoreError, match="does not exist"):
        Store(where, strict=True)
    with pytest.warns(StoreWarning, match="does not exist"):
        store = Store(where)
    assert not store.usable and "does not exist" in str(store.problem)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert store.fetch("k") == []
    with pytest.raises(StoreError, match="not usable"):
        store.rows()


# ---- unsafe paths ------------------------------------------------------------------------


def test_a_symlinked_database_is_refused(tmp_path: Path) -> None:
    """store.sqlite3 that is a symbolic link is never opened or written through."""
    store = tmp_path / "store"
    store.mkdir(mode=0o700)
    target = tmp_path / "elsewhere.db"
    (store / "store.sqlite3").symlink_to(target)
    assert_in_memory(child(tmp_path, "call", store_dir=store), "symbolic link")
    assert not target.exists()


def test_a_directory_others_may_write_is_refused(tmp_path: Path) -> None:
    """A store directory of mode 0777 is refused, naming chmod; one of another user too."""
    store = tmp_path / "store"
    child(tmp_path, "call", store_dir=store)
    os.chmod(store, 0o777)
    assert_in_memory(child(tmp_path, "call", store_dir=store), "mode 0777", "chmod 700")
    os.chmod(store, 0o700)
    os.chown(store, 12345, -1)
    if os.stat(store).st_uid == os.getuid():
        pytest.skip("cannot give a directory to another user here (not root)")
    assert_in_memory(child(tmp_path, "call", store_dir=store), "another user (uid 12345)")


# ---- a corrupt database ------------------------------------------------------------------


def _grow(store: Path, rows: int = 80) -> int:
    """Add ``rows`` filler entries (1.5 KB each) to the database, close it so the WAL is
    checkpointed; the database's size."""
    from jitguard._src.store.sqlite import SqliteTier

    tier = SqliteTier(store / "store.sqlite3", max_bytes=1 << 30)
    for i in range(rows):
        tier.put(f"filler{i % 9}", f"e{i}", "filler:f", os.urandom(1500))
    tier.close()
    assert not (store / "store.sqlite3-wal").exists()
    return (store / "store.sqlite3").stat().st_size


def _truncate(path: Path, cut: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size - cut)


def _flip_bits(path: Path, offsets: list[int]) -> None:
    data = bytearray(path.read_bytes())
    for at in offsets:
        data[at % len(data)] ^= 0xA5
    path.write_bytes(bytes(data))


CORRUPTIONS = {
    "4 KiB short": lambda p: _truncate(p, 4096),
    "half cut": lambda p: _truncate(p, p.stat().st_size // 2),
    "to 50 bytes": lambda p: _truncate(p, p.stat().st_size - 50),
    "header overwritten": lambda p: _flip_bits(p, list(range(0, 16))),
    "b-tree pages flipped": lambda p: _flip_bits(p, [4096 + 8 * i for i in range(64)]
                                                 + [8192 + 8 * i for i in range(64)]),
}


def _asides(store: Path) -> list[str]:
    return sorted(n for n in os.listdir(store) if ".corrupt-" in n and "-wal" not in n
                  and "-shm" not in n)


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
def test_a_corrupt_database_is_moved_aside_and_replaced(tmp_path: Path, how: str) -> None:
    """A database SQLite calls corrupt or not a database: the first process that meets it
    warns once, moves it aside to store.sqlite3.corrupt-<time> and writes a new one; the
    next process loads from the new one, without a warning."""
    store = tmp_path / "store"
    child(tmp_path, "call", store_dir=store)
    _grow(store)
    CORRUPTIONS[how](store / "store.sqlite3")
    data = child(tmp_path, "call", store_dir=store)
    assert data["results"] == [3, 4.5] and data["again"] == [3] and data["other"] == [3]
    warned = store_warnings(data)
    assert len(warned) == 1, data["warnings"]
    assert "is corrupt" in warned[0] and "moved aside to store.sqlite3.corrupt-" in warned[0]
    assert len(_asides(store)) == 1
    assert _asides(store)[0] in warned[0]
    warm = child(tmp_path, "call", store_dir=store)
    assert store_warnings(warm) == [], warm["warnings"]
    assert warm["compiles"] == 0, warm  # what the repairing process saved, loaded
    assert [e[0] for e in warm["events"]][:2] == ["loaded", "loaded"]
    assert len(_asides(store)) == 1


RACER = '''
import json, os, sys, time, warnings
caught = []
warnings.simplefilter("always")
warnings.showwarning = lambda m, c, *a, **k: caught.append(f"{c.__name__}: {m}")
import jitguard

def h(x):
    return x + 1

start = float(sys.argv[2])
while time.time() < start:
    time.sleep(0.001)
h2 = jitguard.specialize(h, store=sys.argv[1], recompile_limit=None, automatic_dynamic=False,
                         global_state=False)
first = int(sys.argv[3])
ok = all(h2(i) == i + 1 for i in range(first, first + 25))
cache = jitguard.cache_of(h2)
print(json.dumps({"ok": ok, "compiles": cache.stats().compiles, "warnings": caught,
                  "saved": sum(e.outcome == "saved" for e in cache.store_events())}))
'''


def test_processes_meeting_a_corrupt_database_at_once(tmp_path: Path) -> None:
    """Four processes meet one corrupt database at once: exactly one moves it aside, each
    warns at most once, and every entry they save after is in the new database (a fifth
    process loads all 100 and compiles none)."""
    store = tmp_path / "store"
    store.mkdir(mode=0o700)
    _grow(store, 120)
    _truncate(store / "store.sqlite3", 4096)
    (tmp_path / "racer.py").write_text(RACER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JITGUARD_")}
    env.update(PYTHONPATH=SRC, JITGUARD_CACHE_KEY=KEY)
    import time

    start = time.time() + 4.0  # every process has imported jitguard by then
    procs = [subprocess.Popen([sys.executable, str(tmp_path / "racer.py"), str(store),
                               str(start), str(25 * w)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for w in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [o[1] for o in outs]
    results = [json.loads(o[0]) for o in outs]
    assert all(r["ok"] and r["compiles"] == 25 and r["saved"] == 25 for r in results), results
    warned = [[w for w in r["warnings"] if w.startswith("StoreWarning")] for r in results]
    assert all(len(w) <= 1 for w in warned), warned
    movers = [w for ws in warned for w in ws if "moved aside to" in w and "is corrupt" in w]
    assert len(movers) == 1, warned
    assert len(_asides(store)) == 1
    fifth = subprocess.run([sys.executable, str(tmp_path / "racer.py"), str(store), "0", "0"],
                           env=env, capture_output=True, text=True, timeout=300)
    # 25 values from 0: all loaded (the other 75 entries load too, unused)
    assert json.loads(fifth.stdout)["compiles"] == 0, fifth.stderr
    from jitguard._src.store.sqlite import SqliteTier

    tier = SqliteTier(store / "store.sqlite3", max_bytes=1 << 30)
    assert len(tier.rows()) == 100
    tier.close()


@pytest.mark.parametrize("cut", [50, 512, 1000, 2048, 3000, 4095])
def test_a_database_cut_short_never_stays_broken(tmp_path: Path, cut: int) -> None:
    """A database cut ``cut`` bytes short of its end: the process either uses it (SQLite
    reads what is left) or repairs it with one warning; either way the results are right
    and the next process meets no fault."""
    store = tmp_path / "store"
    child(tmp_path, "call", store_dir=store)
    _grow(store)
    _truncate(store / "store.sqlite3", cut)
    data = child(tmp_path, "call", store_dir=store)
    assert data["results"] == [3, 4.5] and data["again"] == [3] and data["other"] == [3]
    warned = store_warnings(data)
    assert len(warned) <= 1 and all("moved aside to" in w for w in warned), warned
    assert len(_asides(store)) == len(warned)
    warm = child(tmp_path, "call", store_dir=store)
    assert store_warnings(warm) == [] and warm["compiles"] == 0, warm
