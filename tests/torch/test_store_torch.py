"""Stored jitguard.torch.compile entries (jitguard/_src/torch/stored.py, the compiler's
serialize/deserialize): torch's serialized capture, re-bound and checked in a new process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import jitguard as jg  # noqa: E402
import jitguard.torch as jgt  # noqa: E402
from jitguard._src.compiler import snapshot  # noqa: E402

SRC = str(Path(jg.__file__).resolve().parents[1])
G_FN: Any = None

MODELS = '''
import torch


class Scaled(torch.nn.Module):
    def __init__(self, width=8, scale=2.0):
        super().__init__()
        self.lin = torch.nn.Linear(width, width)
        self.scale = scale

    def forward(self, x):
        return helper(self.lin(x)) * self.scale


def helper(y):
    return torch.relu(y)
'''

# One process: compile (or load), call, and report what happened as JSON on stdout.
RUNNER = '''
import json, os, sys, warnings
import torch
import jitguard as jg, jitguard.torch as jgt
import models
from jitguard._src.compiler.schema import compile_guard_records, export_guards, import_guards

mode, where, backend, scale, dtype = sys.argv[1:6]
dynamic = {"1": True, "0": False}.get(os.environ.get("JG_DYNAMIC", ""))
batches = [int(b) for b in os.environ.get("JG_BATCHES", "4").split(",")]
torch.manual_seed(0)
m = models.Scaled(scale=float(scale)).to(getattr(torch, dtype))
x = torch.ones(batches[0], 8, dtype=getattr(torch, dtype))
store = None
if mode.startswith("store"):
    redis_url = sys.argv[6] if len(sys.argv) > 6 else None
    store = jg.Store(where, redis_url=redis_url, redis_prefix=sys.argv[7] if redis_url else None)
c = jgt.compile(m, backend=backend, isolate_recompiles=True, store=store, dynamic=dynamic)
compiler = c.compiler
compiler.saving = True
out = {}
if mode.startswith("store"):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = c(x)
        y2 = c(x)
        equal = True
        for b in batches[1:]:  # more batch sizes: a dynamic entry serves them all
            xb = torch.ones(b, 8, dtype=x.dtype)
            equal = equal and bool(torch.allclose(c(xb), m(xb)))
    out["compiles"] = c.cache.stats().compiles
    out["hits"] = c.cache.stats().hits
    out["events"] = [[e.outcome, e.reason] for e in c.cache.store_events()]
    out["reasons"] = c.cache.reasons()
    out["warnings"] = [str(w.message) for w in caught]
    out["equal"] = equal and bool(torch.allclose(y, m(x))) and bool(torch.allclose(y2, m(x)))
elif mode == "save":
    y = c(x)
    entry = c.cache.entries()[0]
    doc = export_guards(entry.check, arg_names=c.cache.signature.params)
    with open(where + "/guards.json", "w") as f:
        json.dump(doc, f)
    with open(where + "/artifact.bin", "wb") as f:
        f.write(compiler.serialize(entry.artifact))
    out["y"] = y.double().sum().item()
else:
    records = import_guards(open(where + "/guards.json").read())
    fwd = type(m).forward
    try:
        check = compile_guard_records(records, arg_names=("self", "x"), f_globals=fwd.__globals__)
        program = compiler.deserialize(open(where + "/artifact.bin", "rb").read(), fwd)
    except jg.JitGuardError as e:
        out["error"] = f"{type(e).__name__}: {e}"
    else:
        out["hit"] = bool(check(m, x))
        out["reasons"] = [str(f) for f in check.explain(m, x)]
        if out["hit"]:
            out["y"] = program(m, x).double().sum().item()
        out["expected"] = m(x).double().sum().item()
print("RESULT " + json.dumps(out))
'''


def run(tmp_path: Path, *args: str, **extra_env: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, str(tmp_path)]),
           "JITGUARD_CACHE_KEY": "storetorch-test-key-0123456789", **extra_env}
    proc = subprocess.run([sys.executable, str(tmp_path / "runner.py"), *args], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    result: dict[str, Any] = json.loads(line[len("RESULT "):])
    return result


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "runner.py").write_text(RUNNER)
    return tmp_path


def test_artifact_round_trip_in_a_new_process(project: Path) -> None:
    """Stored in one process, the entry's guards hold for the same call in another and its
    program computes what the module computes there (parameters read from the live module)."""
    saved = run(project, "save", str(project), "eager", "2.0", "float32")
    loaded = run(project, "load", str(project), "eager", "2.0", "float32")
    assert loaded["hit"] is True and loaded["reasons"] == []
    assert loaded["y"] == pytest.approx(loaded["expected"])
    assert saved["y"] == pytest.approx(loaded["expected"])


def test_another_dtype_is_rejected_naming_the_guard(project: Path) -> None:
    """A stored entry is not used for a float64 module and input; the reason names the tensor."""
    run(project, "save", str(project), "eager", "2.0", "float32")
    loaded = run(project, "load", str(project), "eager", "2.0", "float64")
    assert loaded["hit"] is False
    assert loaded["reasons"][0] == "tensor 'L['x']' dtype mismatch. expected Float, actual Double"


def test_changed_baked_in_attribute_is_rejected(project: Path) -> None:
    """The graph bakes in ``self.scale``: a module of the same structure with another scale
    is rejected, naming the attribute's guard."""
    run(project, "save", str(project), "eager", "2.0", "float32")
    loaded = run(project, "load", str(project), "eager", "3.0", "float32")
    assert loaded["hit"] is False
    assert loaded["reasons"] == ["L['self'].scale == 2.0 failed: got 3.0"]


def test_changed_inlined_code_makes_the_entry_unusable(project: Path) -> None:
    """Editing a function the graph inlined (``helper``) after storing: the identity guard on
    it re-binds by name, so the stored code fingerprint refuses the entry, naming it."""
    run(project, "save", str(project), "eager", "2.0", "float32")
    models = project / "models.py"
    models.write_text(models.read_text().replace("torch.relu(y)", "torch.tanh(y)"))
    loaded = run(project, "load", str(project), "eager", "2.0", "float32")
    assert loaded["error"] == (
        "ArtifactError: the code of models.helper changed since the entry was stored"
    )


def test_moving_code_keeps_the_entry_usable(project: Path) -> None:
    """Line numbers are not part of the fingerprint: code moved down the file still loads."""
    run(project, "save", str(project), "eager", "2.0", "float32")
    models = project / "models.py"
    models.write_text("\n\n# a comment\n" + models.read_text())
    assert run(project, "load", str(project), "eager", "2.0", "float32")["hit"] is True


@pytest.mark.parametrize("backend", ["aot_eager"])
def test_aot_backends_round_trip(project: Path, backend: str) -> None:
    """AOTAutograd's bundled entry (aot_eager) is stored and loaded as well."""
    run(project, "save", str(project), backend, "2.0", "float32")
    loaded = run(project, "load", str(project), backend, "2.0", "float32")
    assert loaded["hit"] is True and loaded["y"] == pytest.approx(loaded["expected"])



TRAIN = """
import json, sys, torch
import jitguard as jg, jitguard.torch as jgt
import models
torch.manual_seed(0)
m = models.Scaled()
x = torch.randn(4, 8)
c = jgt.compile(m, backend="aot_eager", isolate_recompiles=True, store=jg.Store(sys.argv[1]))
loss = c(x).square().sum()
loss.backward()
grads = [p.grad.clone() for p in m.parameters()]
m.zero_grad()
m(x).square().sum().backward()
print("RESULT " + json.dumps({
    "events": [e.outcome for e in c.cache.store_events()],
    "compiles": c.cache.stats().compiles,
    "equal": bool(torch.allclose(loss, m(x).square().sum()))
             and all(torch.allclose(g, p.grad) for g, p in zip(grads, m.parameters())),
}))
"""


def test_a_loaded_aot_eager_entry_trains(project: Path) -> None:
    """An aot_eager entry stored lean ([Note: Lean stored graphs]) and loaded in a new
    process gives eager's loss and gradients."""
    (project / "train.py").write_text(TRAIN)
    # a cache of torch's own, new: the first process compiles (and so serializes) the graph
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, str(project)]),
           "JITGUARD_CACHE_KEY": "storetorch-test-key-0123456789",
           "TORCHINDUCTOR_CACHE_DIR": str(project / "torch-cache")}
    out = _twice(project / "train.py", project / "s", env)
    assert out[0]["events"] == ["saved"] and out[0]["compiles"] == 1 and out[0]["equal"]
    assert out[1]["events"] == ["loaded"] and out[1]["compiles"] == 0 and out[1]["equal"]


def _twice(script: Path, store: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    """Run ``script store`` in two processes, one after the other (the first stores, the
    second loads): what each printed after ``RESULT``."""
    out = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, str(script), str(store)], cwd=script.parent,
                              env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
        out.append(json.loads(line[len("RESULT "):]))
    return out


def test_unserializable_backend_is_not_stored() -> None:
    """A backend whose compiled graph torch cannot serialize: serialize says so."""
    def backend(gm: Any, inputs: Any) -> Any:
        return lambda *a: gm(*a)

    def f(x: Any) -> Any:
        return x + 1

    c: Any = jgt.compile(f, backend=backend, isolate_recompiles=True)
    c.compiler.saving = True
    c(torch.ones(2))
    with pytest.raises(jg.ArtifactError, match="the backend returned a function, which torch "
                                               "cannot serialize"):
        c.compiler.serialize(c.cache.entries()[0].artifact)


def _closure_fn(k: Any) -> Any:
    def f(x: Any) -> Any:
        return x + k

    return f


def test_a_closure_is_read_through_its_portable_global() -> None:
    """A function with a closure is read by its guards through the global its qualname
    names ([Note: The compiled function's global]), so its entry serializes; another
    function object of that name gets a global of this process and is not stored."""
    from jitguard._src.sources import GlobalSource
    from jitguard._src.torch import stored

    f1, f2 = _closure_fn(torch.ones(2)), _closure_fn(torch.zeros(2))
    name = stored.function_global(f1)
    c1: Any = jgt.compile(f1, isolate_recompiles=True)
    c1.compiler.saving = True
    c1(torch.ones(2))
    assert c1.compiler.function_source == GlobalSource(name) and f1.__globals__[name] is f1
    assert c1.compiler.serialize(c1.cache.entries()[0].artifact)
    c2: Any = jgt.compile(f2, isolate_recompiles=True)
    c2.compiler.saving = True
    c2(torch.ones(2))
    assert c2.compiler.function_source != GlobalSource(name)
    with pytest.raises(jg.ArtifactError, match="has a closure"):
        c2.compiler.serialize(c2.cache.entries()[0].artifact)


def test_lambda_traced_is_not_stored() -> None:
    """A function calling one of two lambdas of one function: Dynamo traced code that
    cannot be found again by name (the qualname names either), so the entry is not
    stored (one lambda alone is found, nested in its function: [Note: Re-binding by
    name])."""
    global G_FN
    G_FN = [lambda y: y * 2, lambda y: y * 3][0]  # no single code of that qualname

    def f(x: Any) -> Any:
        return G_FN(x) + 1

    c: Any = jgt.compile(f, isolate_recompiles=True)
    c.compiler.saving = True
    c(torch.ones(2))
    with pytest.raises(jg.ArtifactError, match="cannot be found again by name"):
        c.compiler.serialize(c.cache.entries()[0].artifact)


def test_store_environment_names_torch_backend_and_cpu() -> None:
    """The key's environment holds torch's version, the backend, the options and the CPU."""
    c: Any = jgt.compile(lambda x: x, backend="aot_eager", isolate_recompiles=True)
    env = c.compiler.store_environment()
    assert env["torch"] == torch.__version__ and env["backend"] == "aot_eager"
    assert env["cpu"] == torch.backends.cpu.get_cpu_capability()
    assert {"fullgraph", "dynamic"} <= set(env)




# ---- through the store: jitguard.torch.compile(..., store=...) ----------------------------


def test_store_hit_in_a_new_process_without_compiling(project: Path) -> None:
    """Compiled and saved in one process; in the next, the entry is loaded from SQLite, its
    guards hold, and the call runs it: no compile, the module's results."""
    store = str(project / "store")
    first = run(project, "store", store, "eager", "2.0", "float32")
    assert first["compiles"] == 1 and [e[0] for e in first["events"]] == ["saved"]
    second = run(project, "store", store, "eager", "2.0", "float32")
    assert second["compiles"] == 0 and second["equal"]
    assert [e[0] for e in second["events"]] == ["loaded"] and second["warnings"] == []


def test_store_another_dtype_is_not_used_and_the_reason_names_the_guard(project: Path) -> None:
    """A float64 module and input in the new process: the loaded entry rejects the call,
    the reason names the tensor guard, and the function compiles."""
    store = str(project / "store")
    run(project, "store", store, "eager", "2.0", "float32")
    other = run(project, "store", store, "eager", "2.0", "float64")
    assert other["compiles"] == 1 and other["equal"]
    assert [e[0] for e in other["events"]] == ["loaded", "guard failed", "saved"]
    assert other["events"][1][1].startswith(
        "tensor 'L['x']' dtype mismatch. expected Float, actual Double")
    assert other["reasons"] == ["0/0: tensor 'x' dtype mismatch. expected Float, actual Double"]


def test_store_changed_baked_in_attribute_is_rejected(project: Path) -> None:
    """Same structure, another ``scale`` (baked into the graph): rejected, naming the guard."""
    store = str(project / "store")
    run(project, "store", store, "eager", "2.0", "float32")
    other = run(project, "store", store, "eager", "3.0", "float32")
    assert other["compiles"] == 1 and other["equal"]
    assert other["reasons"] == ["0/0: self.scale == 2.0 failed: got 3.0"]


def test_store_changed_inlined_code_is_rejected(project: Path) -> None:
    """An inlined helper edited between the processes: the stored entry is rejected (its
    code fingerprint), with a warning naming the function, and the call compiles."""
    store = str(project / "store")
    run(project, "store", store, "eager", "2.0", "float32")
    models = project / "models.py"
    models.write_text(models.read_text().replace("torch.relu(y)", "torch.tanh(y)"))
    other = run(project, "store", store, "eager", "2.0", "float32")
    assert other["compiles"] == 1 and other["equal"]
    (rejected,) = [e for e in other["events"] if e[0] == "rejected"]
    assert rejected[1] == ("deserialize raised ArtifactError: the code of models.helper changed "
                           "since the entry was stored")


def test_store_dynamic_entry_in_a_new_process(project: Path) -> None:
    """dynamic=True: the entry saved for batch 4 is loaded in a new process with its shape
    guards, serves all four calls (batches 4, 4, 7, 2) without compiling, and a batch of 1 (specialized by
    Dynamo) misses it and compiles."""
    store = str(project / "store")
    first = run(project, "store", store, "eager", "2.0", "float32", JG_DYNAMIC="1")
    assert first["compiles"] == 1 and [e[0] for e in first["events"]] == ["saved"]
    second = run(project, "store", store, "eager", "2.0", "float32", JG_DYNAMIC="1",
                 JG_BATCHES="4,7,2")
    assert second["compiles"] == 0 and second["equal"] and second["hits"] == 4
    assert [e[0] for e in second["events"]] == ["loaded"] and second["warnings"] == []
    third = run(project, "store", store, "eager", "2.0", "float32", JG_DYNAMIC="1",
                JG_BATCHES="1")
    assert third["compiles"] == 1 and third["equal"]
    assert [e[0] for e in third["events"]][:2] == ["loaded", "guard failed"]


def test_store_inductor_entry_in_a_new_process(project: Path) -> None:
    """backend="inductor" on CPU: saved in one process, loaded in the next without a
    compile, with the module's results."""
    store = str(project / "store")
    first = run(project, "store", store, "inductor", "2.0", "float32")
    assert first["compiles"] == 1 and first["equal"]
    assert [e[0] for e in first["events"]] == ["saved"]
    second = run(project, "store", store, "inductor", "2.0", "float32")
    assert second["compiles"] == 0 and second["equal"]
    assert [e[0] for e in second["events"]] == ["loaded"] and second["warnings"] == []


def test_store_through_redis_with_an_empty_local_tier(project: Path) -> None:
    """Saved to Redis by one process; another with an empty local directory loads it from
    Redis and does not compile."""
    import uuid

    redis = pytest.importorskip("redis")
    url = os.environ.get("JITGUARD_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    prefix = f"jitguard-test-storetorch-{uuid.uuid4().hex}"
    try:
        first = run(project, "store", str(project / "a"), "aot_eager", "2.0", "float32", url, prefix)
        assert first["compiles"] == 1
        second = run(project, "store", str(project / "b"), "aot_eager", "2.0", "float32", url, prefix)
        assert second["compiles"] == 0 and second["equal"]
        assert [e[0] for e in second["events"]] == ["loaded"]
    finally:
        client = redis.Redis.from_url(url)
        for key in client.scan_iter(f"{prefix}:*"):
            client.delete(key)


WRAPPED = '''
import dataclasses
import functools

import torch


def returns_output(func):
    @functools.wraps(func)
    def wrapper(self, *args, **kwargs):
        return func(self, *args, **kwargs)

    return wrapper


@dataclasses.dataclass
class Output:
    y: torch.Tensor


class Wrapped(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    @returns_output
    def forward(self, x):
        if type(x) is torch.Tensor:
            x = x + 1
        return Output(self.lin(x))
'''

WRAPPED_RUNNER = '''
import json, sys
import torch
import jitguard as jg, jitguard.torch as jgt
import wrapped

torch.manual_seed(0)
m = wrapped.Wrapped()
x = torch.ones(2, 8)
c = jgt.compile(m, backend="eager", store=jg.Store(sys.argv[1]))
y = c(x)
out = {"compiles": c.cache.stats().compiles, "equal": bool(torch.allclose(y.y, m(x).y)),
       "events": [[e.outcome, e.reason] for e in c.cache.store_events()]}
print("RESULT " + json.dumps(out))
'''


def test_store_a_decorated_forward_like_transformers(tmp_path: Path) -> None:
    """A forward under a functools.wraps decorator (a closure), returning a dataclass (an
    exec-made __init__) and asking type(x) (a module Dynamo binds by id): stored in one
    process, loaded and used in the next without compiling."""
    (tmp_path / "wrapped.py").write_text(WRAPPED)
    (tmp_path / "runner.py").write_text(WRAPPED_RUNNER)
    store = str(tmp_path / "store")
    first = run(tmp_path, store)
    assert first["compiles"] == 1 and [e[0] for e in first["events"]] == ["saved"], first
    second = run(tmp_path, store)
    assert second["compiles"] == 0 and second["equal"], second
    assert [e[0] for e in second["events"]] == ["loaded"]



QWEN3_RUNNER = '''
import json, sys
import torch
import transformers
import jitguard as jg, jitguard.torch as jgt

torch.manual_seed(0)
cfg = transformers.Qwen3Config(vocab_size=128, hidden_size=32, intermediate_size=64,
                               num_hidden_layers=2, num_attention_heads=2,
                               num_key_value_heads=1, head_dim=16, use_cache=False)
m = transformers.Qwen3ForCausalLM(cfg).eval()
ids = torch.arange(6).reshape(1, 6)
with torch.no_grad():
    expected = m(input_ids=ids, use_cache=False).logits
    c = jgt.compile(m, backend="eager", store=jg.Store(sys.argv[1]))
    y = c(input_ids=ids, use_cache=False).logits
out = {"compiles": c.cache.stats().compiles, "equal": bool(torch.equal(y, expected)),
       "events": [[e.outcome, e.reason] for e in c.cache.store_events()]}
print("RESULT " + json.dumps(out))
'''


def test_store_a_transformers_qwen3_with_hub_kernel_wrappers(tmp_path: Path) -> None:
    """transformers' Qwen3, whose rotary embedding is a kernels hub wrapper (a module-level
    function replaced by an nn.Module of a class made at run time, closing over it): stored
    in one process, loaded in the next without compiling, with eager's output."""
    pytest.importorskip("transformers")
    (tmp_path / "runner.py").write_text(QWEN3_RUNNER)
    store = str(tmp_path / "store")
    first = run(tmp_path, store)
    assert first["compiles"] == 1 and [e[0] for e in first["events"]] == ["saved"], first
    assert first["equal"]
    second = run(tmp_path, store)
    assert second["compiles"] == 0 and second["equal"], second
    assert [e[0] for e in second["events"]] == ["loaded"]


DEEP_RUNNER = '''
import json, sys
import torch
import jitguard as jg, jitguard.torch as jgt

torch.manual_seed(0)
m = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(8)])
x = torch.randn(2, 8)
c = jgt.compile(m, backend="eager", verify=False, store=jg.Store(sys.argv[1]))
with torch.no_grad():
    y, y2 = c(x), c(x)
    expected = m(x)
entry = list(jg.cache_of(c).entries())[0]
deferred = entry.check.deferred
m[3].note = 1  # a structure change no guard is about: the full check runs, and holds
with torch.no_grad():
    y3 = c(x)
program = entry.artifact
print("RESULT " + json.dumps({
    "deferred": deferred, "deferred_after_change": entry.check.deferred,
    "events": [e.outcome for e in c.cache.store_events()],
    "compiles": c.cache.stats().compiles,
    "front_check": getattr(entry.check, "structure_skip", None) is not None,
    "pinned_inputs": any(getattr(k, "__name__", "") == "read_graph_inputs"
                         for k in program.__code__.co_consts),
    "equal": bool(torch.allclose(y, expected) and torch.allclose(y2, expected)
                  and torch.allclose(y3, expected)),
}))
'''


@pytest.mark.skipif(sys.version_info[:2] != (3, 11) or not snapshot.available(),
                    reason="the front check needs the C extension, its rewrite CPython 3.11")
def test_loaded_entry_gets_the_front_check_and_pinned_inputs(tmp_path: Path) -> None:
    """An entry loaded in a new process gets the front check a compiled one gets, and its
    program takes its graph's inputs from the pins ([Note: Inputs read from the pins]); its
    full check's code is generated only once a structure change makes it run ([Note:
    Deferred check code])."""
    (tmp_path / "deep.py").write_text(DEEP_RUNNER)
    env = {**os.environ, "PYTHONPATH": SRC, "JITGUARD_CACHE_KEY": "storetorch-test-key-0123456789"}
    cold, warm = _twice(tmp_path / "deep.py", tmp_path / "s", env)
    assert cold["events"] == ["saved"] and cold["front_check"] and cold["pinned_inputs"]
    assert warm["events"] == ["loaded"] and warm["compiles"] == 0
    assert warm["front_check"] and warm["pinned_inputs"] and warm["equal"]
    assert not cold["deferred"] and warm["deferred"] and not warm["deferred_after_change"]
