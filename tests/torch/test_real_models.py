"""Real transformers models (bench/_llm_models.py at 2 layers) under jitguard.torch.compile:
the same outputs as eager, and every Dynamo guard converted (none delegated to torch's tree)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from _llm_models import build  # noqa: E402

import jitguard  # noqa: E402
import jitguard.torch as jgt  # noqa: E402
from jitguard._src.compiler import snapshot  # noqa: E402

pytestmark = pytest.mark.usefixtures("restore_grad_mode", "fresh_dynamo")


def tensors(out: Any) -> list[Any]:
    """The tensors of a forward's output, in order."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for v in out.values() for t in tensors(v)]
    if isinstance(out, (tuple, list)):
        return [t for v in out for t in tensors(v)]
    return []


@pytest.mark.parametrize("name", ["gpt2", "llama", "qwen3", "bert", "vit", "mistral", "gemma2",
                                  "starcoder2", "opt", "phi"])
def test_real_model_matches_eager_with_nothing_delegated(name: str) -> None:
    """The compiled model equals eager on two calls (a hit the second time), with one entry
    and 0 guards delegated to torch's tree (items of dict subclasses included)."""
    torch.set_grad_enabled(False)
    model, kw = build(name, layers=2)
    want = tensors(model(**kw))
    compiled = jgt.compile(model, backend="eager")
    for _ in range(2):
        got = tensors(compiled(**kw))
        assert len(got) == len(want) and all(torch.allclose(g, w) for g, w in zip(got, want, strict=True))
    entries = list(jitguard.cache_of(compiled).entries())
    assert len(entries) == 1
    (info,) = jgt.capture_info(compiled).values()
    assert sum(info.delegated.values()) == 0, info.delegated
    assert info.guard_types().get("TENSOR_MATCH", 0) > 0


@pytest.mark.skipif(not snapshot.available() or sys.version_info[:2] != (3, 11),
                    reason="the structure snapshot serves the front check on CPython 3.11")
@pytest.mark.parametrize("name", ["qwen3", "gemma2", "starcoder2", "phi"])
def test_a_hit_runs_as_many_guards_at_any_depth(name: str) -> None:
    """The guards a hit runs while the structure is unchanged (the volatile check) do not
    grow with the model's depth: one more layer adds only guards the snapshot skips (a
    partial activation per layer, biases, the config's properties included)."""
    torch.set_grad_enabled(False)
    counts = []
    for layers in (2, 3):
        model, kw = build(name, layers=layers)
        compiled = jgt.compile(model, backend="eager", isolate_recompiles=True)
        compiled(**kw)
        (entry,) = list(jitguard.cache_of(compiled).entries())
        plan = getattr(entry.check, "structure_skip", None)
        assert plan is not None
        counts.append((len(entry.check.leaves), len(plan.volatile.leaves)))
    (leaves2, volatile2), (leaves3, volatile3) = counts
    assert leaves3 > leaves2 + 100
    assert volatile3 == volatile2
