"""Persistent entries of specialized functions (cache.persist): warm starts in real new
processes, guards re-checked on load, refused and stale values, faults of both tiers."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

import jitguard
from _helpers import closed_port
from jitguard import GlobalSource, Store, StoreWarning
from jitguard import GuardBuilder as GB
from jitguard._src.store.codec import MAGIC, StoredRecord
from jitguard._src.store.keys import STORE_FORMAT
from jitguard._src.store.signing import MAC_BYTES

SRC = str(Path(__file__).resolve().parents[1] / "src")


def specialize_(fn: Any, **options: Any) -> Any:
    """``jitguard.specialize`` without the GLOBAL_STATE guard: in-process tests must not
    depend on which integrations earlier tests loaded (torch's states are portable only with
    the torch integration's codecs)."""
    return jitguard.specialize(fn, global_state=False, **options)

MODULE = '''
import os, time
import jitguard
from jitguard import GlobalSource, GuardBuilder as GB

_cfg = os.environ.get("CFG", "1")
CFG = int(_cfg) if _cfg.isdigit() else _cfg
COMPILES = []


class Compiler:
    def __call__(self, request):
        COMPILES.append(str(request.compile_id))
        time.sleep(float(os.environ.get("COMPILE_SLEEP", "0")))
        request.add_guard(GlobalSource("CFG"), GB.EQUALS_MATCH)
        return request.fn

    def serialize(self, artifact):
        return b"fn:" + artifact.__name__.encode()

    def deserialize(self, data, fn):
        if os.environ.get("BREAK_DESERIALIZE"):
            raise RuntimeError("cannot rebuild the artifact")
        assert data == b"fn:" + fn.__name__.encode(), data
        return fn

    def store_environment(self):
        return {"flavour": os.environ.get("FLAVOUR", "plain")}


def f(x, n):
    return [x * n, CFG]


g = jitguard.specialize(f, compiler=Compiler(), store=True, recompile_limit=None)
'''

RUNNER = '''
import json, sys, warnings
caught = []
warnings.simplefilter("always")
warnings.showwarning = lambda m, c, *a, **k: caught.append(f"{c.__name__}: {m}")
import jitguard, storemod
calls = json.loads(sys.argv[1])
results = [storemod.g(*c) for c in calls]
again = [storemod.g(*c) for c in calls]
assert again == results
cache = jitguard.cache_of(storemod.g)
print(json.dumps({
    "results": results, "compiles": len(storemod.COMPILES),
    "events": [e._asdict() for e in cache.store_events()], "reasons": cache.reasons(),
    "warnings": caught, "explain": str(jitguard.explain(storemod.g)),
    "key": cache.store_key,
}))
'''


@pytest.fixture
def project(tmp_path: Path, store_dir: Path) -> Path:
    """A folder with the module ``storemod`` and the runner script."""
    (tmp_path / "storemod.py").write_text(MODULE)
    (tmp_path / "runner.py").write_text(RUNNER)
    return tmp_path


def run(project: Path, calls: list[list[Any]], **env: str) -> dict[str, Any]:
    """Run the calls in a fresh interpreter; what it saw."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("JITGUARD_")}
    full["PYTHONPATH"] = f"{project}{os.pathsep}{SRC}"
    full["JITGUARD_CACHE_DIR"] = os.environ["JITGUARD_CACHE_DIR"]
    full.update(env)
    out = subprocess.run(
        [sys.executable, str(project / "runner.py"), json.dumps(calls)], env=full,
        capture_output=True, text=True, timeout=180,
    )
    assert out.returncode == 0, out.stderr
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def outcomes(data: dict[str, Any]) -> list[str]:
    return [e["outcome"] for e in data["events"]]


CALLS = [[2, 3], [2.0, 3], ["ab", 2]]


def test_warm_start_in_a_new_process(project: Path) -> None:
    """A second process loads the entries the first compiled: no compile, same results,
    and explain says where each entry came from."""
    cold = run(project, CALLS)
    assert cold["compiles"] == 3
    assert outcomes(cold) == ["saved"] * 3
    assert cold["warnings"] == []
    warm = run(project, CALLS)
    assert warm["results"] == cold["results"] == [[6, 1], [6.0, 1], ["abab", 1]]
    assert warm["compiles"] == 0
    assert outcomes(warm) == ["loaded"] * 3
    assert warm["key"] == cold["key"]
    assert "loaded from sqlite" in warm["explain"]
    assert warm["warnings"] == []


def test_entry_whose_global_guard_fails_is_never_used(project: Path) -> None:
    """A stored entry guarding G['CFG'] == 1 is loaded in a process where CFG is 2 (or a
    str) but never used: the call compiles, the result is the new one, and the reason names
    the guard."""
    run(project, [[2, 3]])
    warm = run(project, [[2, 3]], CFG="2")
    assert warm["results"] == [[6, 2]]
    assert warm["compiles"] == 1
    assert outcomes(warm) == ["loaded", "guard failed", "saved"]
    assert warm["events"][1]["reason"].startswith("G['CFG'] == 1 failed: got 2")
    assert any("G['CFG'] == 1" in r and "got 2" in r for r in warm["reasons"]), warm["reasons"]
    assert "guard failed" in warm["explain"]
    other = run(project, [[2, 3]], CFG="one")
    assert other["compiles"] == 1
    assert any("G['CFG']" in r and "str" in r for r in other["reasons"]), other["reasons"]


def _db(store_dir: Path) -> sqlite3.Connection:
    return sqlite3.connect(store_dir / "store.sqlite3", isolation_level=None)


def _rewrite(store_dir: Path, change: Any) -> int:
    """Apply ``change(value) -> value`` to every stored value; how many there were."""
    db = _db(store_dir)
    rows = db.execute("SELECT key, entry, value FROM entries").fetchall()
    for key, entry, value in rows:
        db.execute("UPDATE entries SET value = ? WHERE key = ? AND entry = ?",
                   (change(bytes(value)), key, entry))
    db.close()
    return len(rows)


def _forge(value: bytes) -> bytes:
    """Same format, a MAC made without the key."""
    cut = len(MAGIC) + 1
    return value[:cut] + bytes(MAC_BYTES) + value[cut + MAC_BYTES:]


def _flip(value: bytes) -> bytes:
    bad = bytearray(value)
    bad[len(bad) // 2] ^= 0x10
    return bytes(bad)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (_forge, "bad signature"),
        (_flip, "bad signature"),
        (lambda v: v[: len(v) - 7], "bad signature"),
        (lambda v: v[:10], "corrupt"),
    ],
    ids=["forged", "bit-flipped", "truncated", "cut-to-the-header"],
)
def test_a_bad_value_is_refused_with_a_warning(
    project: Path, store_dir: Path, change: Any, reason: str
) -> None:
    """A forged, bit-flipped or truncated value is never loaded: a StoreWarning says why,
    the call compiles, and the result is right."""
    run(project, [[2, 3]])
    assert _rewrite(store_dir, change) == 1
    warm = run(project, [[2, 3]])
    assert warm["results"] == [[6, 1]]
    assert warm["compiles"] == 1
    assert outcomes(warm)[0] == "rejected"
    assert reason in warm["events"][0]["reason"]
    assert any(w.startswith("StoreWarning") and reason in w for w in warm["warnings"])


def test_a_value_signed_with_another_key_is_never_loaded(project: Path) -> None:
    """Process one signs with one JITGUARD_CACHE_KEY, process two has another: refused."""
    run(project, [[2, 3]], JITGUARD_CACHE_KEY="the first key, long enough")
    warm = run(project, [[2, 3]], JITGUARD_CACHE_KEY="the other key, long enough")
    assert warm["compiles"] == 1
    assert outcomes(warm)[0] == "rejected"
    assert "another key" in warm["events"][0]["reason"]
    # the second process replaced the entry with its own, signed with its key
    same = run(project, [[2, 3]], JITGUARD_CACHE_KEY="the other key, long enough")
    assert same["compiles"] == 0


def test_a_newer_format_is_stale(project: Path, store_dir: Path) -> None:
    """A value of a newer store format (signed right) is stale: warning, recompile."""
    run(project, [[2, 3]])
    from jitguard._src.store.signing import Signer

    signer = Signer.for_directory(store_dir)

    def newer(value: bytes) -> bytes:
        body = value[len(MAGIC) + 1 + MAC_BYTES:]
        head = MAGIC + bytes([STORE_FORMAT + 1])
        return head + signer.sign(head + body) + body

    _rewrite(store_dir, newer)
    warm = run(project, [[2, 3]])
    assert warm["compiles"] == 1
    assert outcomes(warm)[0] == "stale"
    assert f"format {STORE_FORMAT + 1}" in warm["events"][0]["reason"]
    assert any("StoreWarning" in w for w in warm["warnings"])


def test_another_environment_makes_entries_stale(project: Path) -> None:
    """The compiler's store_environment is part of the key: entries stored for another one
    are not loaded, and the store log names what differs."""
    run(project, [[2, 3]], FLAVOUR="spicy")
    warm = run(project, [[2, 3]], FLAVOUR="mild")
    assert warm["compiles"] == 1
    assert outcomes(warm) == ["stale", "saved"]
    assert "flavour spicy -> mild" in warm["events"][0]["reason"]


def test_a_failing_deserialize_rejects_the_entry(project: Path) -> None:
    """deserialize raising: the entry is rejected with the error, the call compiles."""
    run(project, [[2, 3]])
    warm = run(project, [[2, 3]], BREAK_DESERIALIZE="1")
    assert warm["compiles"] == 1
    assert outcomes(warm)[0] == "rejected"
    assert "cannot rebuild the artifact" in warm["events"][0]["reason"]


# ---- in one process ----------------------------------------------------------------------


class Plain:
    """A compiler with serialize/deserialize, counting its compiles."""

    def __init__(self) -> None:
        self.compiles = 0

    def __call__(self, request: Any) -> Any:
        self.compiles += 1
        return request.fn

    def serialize(self, artifact: Any) -> bytes:
        return b"plain"

    def deserialize(self, data: bytes, fn: Any) -> Any:
        return fn


def add(x: Any, n: Any) -> Any:
    return x + n


OBJ = object()


def test_a_compiler_without_serialize_is_said_once(store_dir: Path) -> None:
    """store=True with a compiler lacking serialize/deserialize: one StoreWarning, when
    specialize is called; nothing is stored."""

    def compiler(request: Any) -> Any:
        return request.fn

    with pytest.warns(StoreWarning, match=r"nothing of .*add.* is stored: its compiler"):
        f = specialize_(add, compiler=compiler, store=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert f(1, 2) == 3 and f(1.0, 2) == 3.0
    assert jitguard.cache_of(f).store_events() == ()
    assert Store(store_dir).rows() == []


def test_a_failing_serialize_warns_once_per_function(
    store_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """serialize raising: the first entry warns, later entries of the function are logged
    and listed as "not stored" without another warning; every call still compiles."""

    class Unstorable(Plain):
        def serialize(self, artifact: Any) -> bytes:
            raise ValueError("this backend's artifact has no bytes")

    compiler = Unstorable()
    f = specialize_(add, compiler=compiler, store=Store(store_dir))
    with pytest.warns(StoreWarning, match=r"serialize raised ValueError: this backend's"):
        assert f(1, 2) == 3
    with caplog.at_level("INFO", logger="jitguard.store"), warnings.catch_warnings():
        warnings.simplefilter("error")
        assert f(1.5, 2) == 3.5 and f("a", "b") == "ab"
    assert caplog.text.count("serialize raised ValueError") == 2
    assert [e.outcome for e in jitguard.cache_of(f).store_events()] == ["not stored"] * 3
    assert compiler.compiles == 3 and Store(store_dir).rows() == []


def test_environment_turns_the_store_on(store_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                        caplog: pytest.LogCaptureFixture) -> None:
    """JITGUARD_STORE=1 stores every function; store=False opts out; a compiler without
    serialize is then a log line, not a warning."""
    monkeypatch.setenv("JITGUARD_STORE", "1")
    f = specialize_(add)
    assert f(1, 2) == 3
    assert [e.outcome for e in jitguard.cache_of(f).store_events()] == ["saved"]
    off = specialize_(add, store=False)
    assert off(1, 2) == 3 and jitguard.cache_of(off).store_key is None
    with caplog.at_level("INFO", logger="jitguard.store"), warnings.catch_warnings():
        warnings.simplefilter("error")
        specialize_(add, compiler=lambda r: r.fn)
    assert "is stored: its compiler" in caplog.text
    # a fresh function object of the same code loads what f saved
    again = specialize_(add)
    assert again(1, 2) == 3
    assert [e.outcome for e in jitguard.cache_of(again).store_events()] == ["loaded"]


def test_environment_directory(tmp_path: Path, store_dir: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    """JITGUARD_STORE=<directory> stores there."""
    monkeypatch.setenv("JITGUARD_STORE", str(tmp_path / "elsewhere"))
    f = specialize_(add)
    assert f(1, 2) == 3
    assert len(Store(tmp_path / "elsewhere").rows()) == 1


def test_bad_store_argument() -> None:
    """store= takes None, a bool, a directory or a Store."""
    with pytest.raises(TypeError, match="store must be"):
        specialize_(add, store=3)  # type: ignore[arg-type]


def test_non_portable_guard_is_not_stored(store_dir: Path) -> None:
    """An entry with an identity guard on an object of this process is not stored; the
    event names the guard."""

    class IdCompiler(Plain):
        def __call__(self, request: Any) -> Any:
            request.add_guard(GlobalSource("OBJ"), GB.ID_MATCH)
            return super().__call__(request)

    f = specialize_(add, compiler=IdCompiler(), store=store_dir)
    assert f(1, 2) == 3
    (event,) = jitguard.cache_of(f).store_events()
    assert event.outcome == "not stored"
    assert "the ID_MATCH guard on G['OBJ'] is not portable" in event.reason
    assert Store(store_dir).rows() == []


def test_stored_non_portable_guard_is_rejected_naming_it(store_dir: Path) -> None:
    """A stored entry (written by some other writer) holding a non-portable guard is
    rejected on load, and the reason names the guard; the call compiles."""
    store = Store(store_dir)
    compiler = Plain()
    f = specialize_(add, compiler=compiler, store=store)
    cache = jitguard.cache_of(f)
    key = cache.store_key
    assert key is not None
    from jitguard._src.compiler.schema import export_guards
    from jitguard._src.store.keys import entry_id

    probe = specialize_(
        add, compiler=lambda r: (r.add_guard(GlobalSource("OBJ"), GB.ID_MATCH), r.fn)[1])
    probe(1, 2)
    doc = export_guards(jitguard.cache_of(probe).entries()[0].check)
    persist = cache._persist
    assert persist is not None
    store.save(StoredRecord(
        key=key, entry=entry_id(doc), name=persist.identity["name"], env=persist._env,
        identity={}, guards=doc, dynamic=[], artifact=b"plain", created=0.0,
    ))
    with pytest.warns(StoreWarning, match=r"rejected .*the ID_MATCH guard on G\['OBJ'\]"):
        assert f(1, 2) == 3
    assert compiler.compiles == 1
    rejected = [e for e in cache.store_events() if e.outcome == "rejected"]
    assert len(rejected) == 1
    assert "the ID_MATCH guard on G['OBJ'] is not portable" in rejected[0].reason


def test_stale_when_the_code_changed(store_dir: Path) -> None:
    """Entries of another version of the function (same name, other code) are stale; the
    event says the code changed."""
    ns: dict[str, Any] = {"__name__": __name__}
    exec("def add(x, n):\n    return x + n + 0\n", ns)
    old = specialize_(ns["add"], compiler=Plain(), store=store_dir)
    old(1, 2)
    new = specialize_(add, compiler=Plain(), store=store_dir)
    assert new(1, 2) == 3
    events = jitguard.cache_of(new).store_events()
    assert [e.outcome for e in events] == ["stale", "saved"]
    assert "the function's code, defaults or closure changed" in events[0].reason
    assert "stale" in str(jitguard.explain(new))


def test_clear_reads_the_store_again(store_dir: Path) -> None:
    """cache.clear() forgets the entries in memory; the next miss loads them again."""
    compiler = Plain()
    f = specialize_(add, compiler=compiler, store=store_dir)
    f(1, 2)
    jitguard.cache_of(f).clear()
    assert f(1, 2) == 3
    assert compiler.compiles == 1
    assert [e.outcome for e in jitguard.cache_of(f).store_events()][-1] == "loaded"


def test_loaded_entries_respect_maxsize(store_dir: Path) -> None:
    """Loading more entries than maxsize keeps maxsize of them."""
    f = specialize_(add, compiler=Plain(), store=store_dir, maxsize=None,
                            recompile_limit=None)
    for i in range(5):
        f(i, 1)
    compiler = Plain()
    g = specialize_(add, compiler=compiler, store=store_dir, maxsize=2)
    assert g(4, 1) == 5
    assert len(jitguard.cache_of(g).entries()) <= 2
    assert compiler.compiles == 0


def test_disk_full_is_a_warning_and_the_entry_stays_in_memory(store_dir: Path) -> None:
    """A local tier that cannot grow: StoreWarning, the call still compiles and returns the
    right result, and the entry serves the next call."""
    store = Store(store_dir)
    conn = store.local.connection()
    (pages,) = conn.execute("PRAGMA page_count").fetchone()
    conn.execute(f"PRAGMA max_page_count = {pages}")

    class Big(Plain):
        def serialize(self, artifact: Any) -> bytes:
            return bytes(1 << 20)

    compiler = Big()
    f = specialize_(add, compiler=compiler, store=store)
    with pytest.warns(StoreWarning, match="database or disk is full.*in memory only"):
        assert f(1, 2) == 3
    assert f(1, 2) == 3 and compiler.compiles == 1
    assert store.rows() == []


# ---- Redis faults ------------------------------------------------------------------------


@pytest.mark.parametrize("server", ["closed", "silent"])
def test_redis_down_or_slow_is_a_warning(
    store_dir: Path, server: str, request: pytest.FixtureRequest
) -> None:
    """Redis on a closed port, or one that never answers: the first miss warns once (after
    one short timeout), the call compiles and returns the right result, the local tier
    still gets the entry, and the tier is not tried again for a while."""
    port = closed_port() if server == "closed" else request.getfixturevalue("silent_port")
    store = Store(store_dir, redis_url=f"redis://127.0.0.1:{port}/0", redis_timeout=0.2)
    compiler = Plain()
    f = specialize_(add, compiler=compiler, store=store)
    with pytest.warns(StoreWarning) as caught:
        assert f(1, 2) == 3
        assert f(1.5, 2) == 3.5
    (warned,) = [w for w in caught if issubclass(w.category, StoreWarning)]
    assert "Redis at redis://127.0.0.1" in str(warned.message)
    assert compiler.compiles == 2
    assert len(store.rows()) == 2
    assert store.shared is not None and store.shared.down


def test_redis_url_without_redis_py_says_how_to_install_it(tmp_path: Path) -> None:
    """With redis-py missing, import jitguard and a store without Redis work; a Redis URL
    is one StoreWarning naming the ``redis`` extra (the local tier still works), and a
    StoreError with strict=True."""
    code = (
        "import sys, warnings; sys.modules['redis'] = None\n"
        "import jitguard\n"
        "f = jitguard.specialize(lambda x: x, store=True); assert f(3) == 3\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    s = jitguard.Store(redis_url='redis://127.0.0.1:6379/0')\n"
        "assert s.usable and s.shared is None, s.problem\n"
        "print('warned:', *[x.message for x in w])\n"
        "try:\n"
        "    jitguard.Store(redis_url='redis://127.0.0.1:6379/0', strict=True)\n"
        "except jitguard.StoreError as e:\n"
        "    print('raised:', e)\n"
    )
    env = {**os.environ, "PYTHONPATH": SRC, "JITGUARD_CACHE_DIR": str(tmp_path)}
    env.pop("JITGUARD_REDIS_URL", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    warned, raised = out.stdout.splitlines()
    assert warned.startswith("warned:") and "pip install redis (or unset" in warned
    assert "without its shared tier" in warned
    assert raised.startswith("raised:") and "pip install redis (or unset" in raised


# ---- both tiers, real Redis --------------------------------------------------------------


def test_read_through_from_redis_in_a_new_process(
    project: Path, tmp_path: Path, redis_prefix: tuple[str, str]
) -> None:
    """A process with an empty local tier loads what another machine (another cache
    directory) wrote to Redis, and copies it into its local tier."""
    url, prefix = redis_prefix
    env = {"JITGUARD_REDIS_URL": url, "JITGUARD_CACHE_KEY": "fleet key, shared by all",
           "JITGUARD_REDIS_PREFIX": prefix}
    first = run(project, CALLS, JITGUARD_CACHE_DIR=str(tmp_path / "machine-a"), **env)
    assert first["compiles"] == 3
    assert {e["tier"] for e in first["events"]} == {"sqlite+redis"}
    second = run(project, CALLS, JITGUARD_CACHE_DIR=str(tmp_path / "machine-b"), **env)
    assert second["compiles"] == 0
    assert [(e["outcome"], e["tier"]) for e in second["events"]] == [("loaded", "redis")] * 3
    assert len(Store(tmp_path / "machine-b", redis_url=None,
                     key=b"fleet key, shared by all").rows()) == 3
    third = run(project, CALLS, JITGUARD_CACHE_DIR=str(tmp_path / "machine-b"), **env)
    assert [(e["outcome"], e["tier"]) for e in third["events"]] == [("loaded", "sqlite")] * 3


MANY = '''
import json, sys, jitguard

def h(x):
    return x + 1

h2 = jitguard.specialize(h, store=True, recompile_limit=None, automatic_dynamic=False)
first, count = int(sys.argv[1]), int(sys.argv[2])
results = [h2(i) for i in range(first, first + count)]
cache = jitguard.cache_of(h2)
print(json.dumps({"ok": results == [i + 1 for i in range(first, first + count)],
                  "compiles": cache.stats().compiles,
                  "outcomes": sorted({e.outcome for e in cache.store_events()})}))
'''


def test_four_processes_compiling_at_once_then_a_fifth_loads_all(
    tmp_path: Path, store_dir: Path, redis_prefix: tuple[str, str]
) -> None:
    """Four processes each compile 100 entries of one function at once (SQLite and Redis);
    a fifth process loads all 400 and compiles none; one on another machine (an empty
    local tier) gets them all from Redis."""
    url, prefix = redis_prefix
    (tmp_path / "many.py").write_text(MANY)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JITGUARD_")}
    env.update(PYTHONPATH=SRC, JITGUARD_CACHE_DIR=str(store_dir), JITGUARD_REDIS_URL=url,
               JITGUARD_REDIS_PREFIX=prefix, JITGUARD_CACHE_KEY="a fleet key for many.py",
               JITGUARD_REDIS_TIMEOUT="10")  # concurrency is tested, not a slow server

    def start(first: int, count: int, **extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, str(tmp_path / "many.py"), str(first),
                                 str(count)], env={**env, **extra}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    procs = [start(100 * w, 100) for w in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [o[1] for o in outs]
    for out, _ in outs:
        data = json.loads(out)
        # a process may load what another saved first (entries for other values: unused)
        assert data["ok"] and data["compiles"] == 100 and "saved" in data["outcomes"]
    assert len(Store(store_dir, redis_url=None, key=b"a fleet key for many.py").rows()) == 400
    out, err = start(0, 400).communicate(timeout=300)
    assert json.loads(out) == {"ok": True, "compiles": 0, "outcomes": ["loaded"]}, err
    out, err = start(0, 400, JITGUARD_CACHE_DIR=str(tmp_path / "other")).communicate(
        timeout=300)
    assert json.loads(out) == {"ok": True, "compiles": 0, "outcomes": ["loaded"]}, err


def _save_doc(store: Store, f: Any, doc: dict[str, Any]) -> None:
    """Save ``doc`` as an entry of the specialized ``f`` (signed with the store's key)."""
    from jitguard._src.store.keys import entry_id

    cache = jitguard.cache_of(f)
    persist = cache._persist
    assert persist is not None and cache.store_key is not None
    store.save(StoredRecord(
        key=cache.store_key, entry=entry_id(doc), name=persist.identity["name"],
        env=persist._env, identity={}, guards=doc, dynamic=[], artifact=b"plain", created=0.0,
    ))


ENUM_MODULE = '''
import enum, json, sys
import jitguard


class Color(enum.Enum):
    RED = 1
    BLUE = 2


class Plain:
    compiles = 0

    def __call__(self, request):
        Plain.compiles += 1
        return request.fn

    def serialize(self, artifact):
        return b"plain"

    def deserialize(self, data, fn):
        return fn


def paint(c, n):
    return f"{c.name}:{n}"


g = jitguard.specialize(paint, compiler=Plain(), store=True, global_state=False)
results = [g(getattr(Color, name), 1) for name in sys.argv[1:]]
print(json.dumps({
    "results": results, "compiles": Plain.compiles,
    "events": [[e.outcome, e.reason] for e in jitguard.cache_of(g).store_events()],
}))
'''


def test_entry_keyed_on_an_enum_member_is_stored_and_reloaded(tmp_path: Path,
                                                              store_dir: Path) -> None:
    """An entry whose default guard is an identity guard on an enum argument is saved, and a
    new process loads it for that member and compiles anew for another member."""
    (tmp_path / "enummod.py").write_text(ENUM_MODULE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JITGUARD_")}
    env.update(PYTHONPATH=f"{tmp_path}{os.pathsep}{SRC}",
               JITGUARD_CACHE_DIR=os.environ["JITGUARD_CACHE_DIR"])

    def run_enum(*members: str) -> dict[str, Any]:
        out = subprocess.run([sys.executable, str(tmp_path / "enummod.py"), *members], env=env,
                             capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stderr
        data: dict[str, Any] = json.loads(out.stdout)
        return data

    cold = run_enum("RED")
    assert cold["results"] == ["RED:1"] and cold["compiles"] == 1
    assert [e[0] for e in cold["events"]] == ["saved"], cold["events"]
    warm = run_enum("RED", "BLUE", "RED")
    assert warm["results"] == ["RED:1", "BLUE:1", "RED:1"]
    assert warm["compiles"] == 1  # BLUE only: the loaded RED entry never passes BLUE
    assert [e[0] for e in warm["events"]] == ["loaded", "saved"], warm["events"]
    again = run_enum("BLUE", "RED")
    assert again["compiles"] == 0
    assert sorted(e[0] for e in again["events"]) == ["loaded", "loaded"]


def test_loading_never_imports_a_module(store_dir: Path) -> None:
    """A stored guard naming a module that is not loaded is rejected with that reason, and
    the module is still not imported afterwards (loading only looks in sys.modules)."""
    store = Store(store_dir)
    compiler = Plain()
    f = specialize_(add, compiler=compiler, store=store)
    doc = {
        "schema_version": 1, "kind": "jitguard.guard_set", "arg_names": ["x", "n"],
        "guards": [{
            "kind": "ID_MATCH", "code": "G['m'] is antigravity", "portable": True,
            "sources": [{"type": "GlobalSource", "name": "G['m']",
                         "fields": {"global_name": "m"}}],
            "expect": {"$": "object", "module": "antigravity"},
        }],
    }
    assert "antigravity" not in sys.modules
    _save_doc(store, f, doc)
    with pytest.warns(StoreWarning, match="module antigravity is not loaded"):
        assert f(1, 2) == 3
    assert "antigravity" not in sys.modules
    (rejected,) = [e for e in jitguard.cache_of(f).store_events() if e.outcome == "rejected"]
    assert "module antigravity is not loaded" in rejected.reason
    assert compiler.compiles == 1


def test_store_log_and_explain(store_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The jitguard.store log says what happened to each entry; explain's JSON has the
    store's key, each loaded entry's origin and the events."""
    f = specialize_(add, compiler=Plain(), store=store_dir)
    with caplog.at_level("INFO", logger="jitguard.store"):
        f(1, 2)
    assert "saved" in caplog.text and "add" in caplog.text
    g = specialize_(add, compiler=Plain(), store=store_dir)
    caplog.clear()
    with caplog.at_level("INFO", logger="jitguard.store"):
        g(1, 2)
        g(5, 2)
    lines = [r.getMessage() for r in caplog.records]
    assert any(" loaded " in line and "[sqlite]: 2 guards" in line for line in lines), lines
    data = jitguard.explain(g).as_dict()
    assert data["store"]["key"] == jitguard.cache_of(g).store_key
    loaded = [e for e in data["entries"] if e["stored"] is not None]
    assert len(loaded) == 1 and loaded[0]["stored"]["tier"] == "sqlite"
    assert any(line.startswith("loaded ") for line in data["store"]["events"])
    assert not any(line.startswith("guard failed ") for line in data["store"]["events"])
    assert jitguard.explain(specialize_(add, store=False)).as_dict()["store"] is None


def test_store_is_a_log_name() -> None:
    """``store`` is one of the JITGUARD_LOGS names."""
    from jitguard._src import logs

    assert "store" in logs.LOGS
    assert logs.get_logger("store").name == "jitguard.store"


class CollectorSeen(Plain):
    """Plain, noting whether the garbage collector was on when it deserialized."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[bool] = []

    def deserialize(self, data: bytes, fn: Any) -> Any:
        import gc

        self.seen.append(gc.isenabled())
        return fn


@pytest.mark.parametrize("was_on", [True, False])
def test_loading_pauses_the_collector_and_restores_it(store_dir: Path, was_on: bool) -> None:
    """An entry is re-bound with the garbage collector paused ([Note: Loading without
    collections]); after the load the collector is as it was, on or off."""
    import gc

    compiler = CollectorSeen()
    f = specialize_(add, compiler=compiler, store=store_dir)
    f(1, 2)
    jitguard.cache_of(f).clear()
    enabled = gc.isenabled()
    try:
        gc.enable() if was_on else gc.disable()
        assert f(1, 2) == 3
        assert gc.isenabled() is was_on
    finally:
        gc.enable() if enabled else gc.disable()
    assert compiler.seen == [False] and compiler.compiles == 1
    assert [e.outcome for e in jitguard.cache_of(f).store_events()][-1] == "loaded"
