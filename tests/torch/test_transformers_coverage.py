"""Tests for torch/transformers_coverage.py: the structure snapshot's model of transformers'
config ``__getattribute__`` ([Note: transformers' config reads])."""

from __future__ import annotations

import sys
from typing import Any

import pytest
import torch

import jitguard
import jitguard.torch as jgt
from jitguard._src.compiler import snapshot
from jitguard._src.compiler.snapshot_record import Recorder
from jitguard._src.torch import transformers_coverage as tc

transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.skipif(
    not snapshot.available() or sys.version_info[:2] != (3, 11),
    reason="the model's fingerprints are CPython 3.11's, and it serves the front check")


def _rec() -> Recorder:
    return Recorder({}, {}, ())


def test_a_config_read_is_objects_generic_read_of_the_mapped_name() -> None:
    """A plain name reads itself; a name in ``attribute_map`` reads the name it maps to."""
    cfg = transformers.GPT2Config(n_layer=2)
    assert tc._config_member(cfg, "return_dict", _rec()) == "return_dict"
    assert tc._config_member(cfg, "hidden_size", _rec()) == "n_embd"
    assert tc._config_member(cfg, "attribute_map", _rec()) == "attribute_map"


def test_a_per_layer_spec_is_not_vouched_for() -> None:
    """A config with a heterogeneity spec reads through the mixin's checks: no model."""
    cfg = transformers.GPT2Config(n_layer=2)
    cfg.__dict__["_heterogeneity_spec"] = object()
    assert tc._config_member(cfg, "return_dict", _rec()) is None


def test_other_code_is_not_vouched_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """Code whose fingerprint is not the one the model was written against: no model."""
    cfg = transformers.GPT2Config(n_layer=2)
    monkeypatch.setattr(tc, "_KNOWN", tuple((m, q, "0" * 16) for m, q, _ in tc._KNOWN))
    assert tc._config_member(cfg, "return_dict", _rec()) is None


def test_a_class_without_the_chain_is_not_vouched_for() -> None:
    """A class whose own ``__getattribute__`` is anything else: no model."""

    class Other:
        def __getattribute__(self, name: str) -> Any:
            return object.__getattribute__(self, name)

    assert tc._config_member(Other(), "x", _rec()) is None


def _gpt2() -> tuple[Any, dict[str, Any]]:
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=64, n_embd=16, n_layer=2, n_head=2, n_positions=16,
                                  use_cache=False, bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    return model, {"input_ids": torch.arange(6).reshape(1, 6), "use_cache": False}


def _logits(out: Any) -> Any:
    return out[0] if isinstance(out, tuple) else out.logits


def _compiled() -> tuple[Any, Any, dict[str, Any]]:
    model, kw = _gpt2()
    c = jgt.compile(model, backend="eager", isolate_recompiles=True)
    with torch.no_grad():
        c(**kw)
        c(**kw)
    (entry,) = list(jitguard.cache_of(c).entries())
    covered = {leaf_text(entry.check.leaves[i]) for i in entry.check.structure_skip.covered}
    assert any("return_dict" in t for t in covered), "the config read is skipped"
    return c, model, kw


def leaf_text(leaf: Any) -> str:
    return " ".join(s.name() for s in leaf.sources)


def test_config_reads_are_skipped_and_a_write_is_seen() -> None:
    """The config's reads are covered by the snapshot; writing one after compiling gives
    eager's output (here with the hidden states)."""
    c, model, kw = _compiled()
    with torch.no_grad():
        model.config.output_hidden_states = True
        got, want = c(**kw), model(**kw)
    assert want.hidden_states is not None and got.hidden_states is not None
    assert len(got.hidden_states) == len(want.hidden_states)
    torch.testing.assert_close(_logits(got), _logits(want))


def test_a_changed_attribute_map_is_seen() -> None:
    """The class's ``attribute_map`` changed in place after compiling: the reads through
    it are read again, and the call gives eager's output."""
    c, model, kw = _compiled()
    amap = type(model.config).attribute_map
    old = dict(amap)
    try:
        amap["num_hidden_layers"] = "n_head"  # 2 heads: the same value, another name
        with torch.no_grad():
            torch.testing.assert_close(_logits(c(**kw)), _logits(model(**kw)))
        amap["num_hidden_layers"] = "n_positions"
        with torch.no_grad():
            torch.testing.assert_close(_logits(c(**kw)), _logits(model(**kw)))
    finally:
        amap.clear()
        amap.update(old)


def test_a_replaced_getattribute_code_is_seen() -> None:
    """``PreTrainedConfig.__getattribute__.__code__`` replaced after compiling (here by
    code that reads ``output_hidden_states`` as True): eager's output, not the stale
    entry's."""
    c, model, kw = _compiled()
    fn = transformers.PreTrainedConfig.__getattribute__
    old = fn.__code__
    ns: dict[str, Any] = {}
    exec("def make():\n"
         "    __class__ = None\n"
         "    def __getattribute__(self, key):\n"
         "        if key == 'output_hidden_states':\n"
         "            return True\n"
         "        return super(__class__, self).__getattribute__(key)\n"
         "    return __getattribute__\n", ns)
    replacement = ns["make"]().__code__
    try:
        fn.__code__ = replacement
        with torch.no_grad():
            got, want = c(**kw), model(**kw)
        assert want.hidden_states is not None and got.hidden_states is not None
        torch.testing.assert_close(_logits(got), _logits(want))
    finally:
        fn.__code__ = old



def test_a_replaced_builtin_super_is_seen() -> None:
    """``builtins.super`` replaced after compiling (so the configs' zero-argument
    ``super()`` raises, in eager too) fails the snapshot: the call runs the config's reads
    through the new ``super`` and raises as eager does, never serving the entry."""
    import builtins

    c, model, kw = _compiled()
    real = builtins.super

    def other_super(*args: Any) -> Any:
        return real(*args)

    raised: list[str] = []
    with torch.no_grad():  # (its context manager calls super() too, as pytest.raises does)
        try:
            builtins.super = other_super  # type: ignore[assignment]
            for call in (lambda: model(**kw), lambda: c(**kw)):
                try:
                    call()
                except RuntimeError as e:
                    raised.append(str(e))
        finally:
            builtins.super = real  # type: ignore[misc]
    assert len(raised) == 2 and all("super" in r for r in raised), raised
