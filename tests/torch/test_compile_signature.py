"""``jitguard.torch.compile`` takes ``torch.compile``'s parameters with torch's meanings
([Note: torch.compile's parameters]); one with no meaning for jitguard raises clearly."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch._dynamo.testing import CompileCounter  # noqa: E402

import jitguard.torch as jgt  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _f(x: Any) -> Any:
    return x.sin() + 1


def test_every_torch_compile_parameter_is_taken() -> None:
    """Each parameter of torch.compile is one of jitguard's, same name, kind and default
    (but backend's: "eager" here, torch's default with None)."""
    ours = inspect.signature(jgt.compile).parameters
    theirs = inspect.signature(torch.compile).parameters
    for name, p in theirs.items():
        assert name in ours, f"torch.compile's {name!r} is missing"
        assert ours[name].kind == p.kind, name
        if name != "backend":
            assert ours[name].default == p.default, name
    assert set(ours) - set(theirs) == {"verify", "store"}


def test_mode_reaches_inductor() -> None:
    """mode= is handed to inductor as torch.compile hands it (torch's inductor wrapper)."""
    cf = jgt.compile(_f, backend="inductor", mode="reduce-overhead")
    wrapper = cf.compiler.backend_fn
    assert type(wrapper).__name__ == "_TorchCompileInductorWrapper"
    assert wrapper.config.get("triton.cudagraphs") is True


def test_options_become_inductor_config() -> None:
    """options= is inductor's config, checked by torch's wrapper (an unknown key raises)."""
    cf = jgt.compile(_f, backend="inductor", options={"max_autotune": True})
    assert cf.compiler.backend_fn.config["max_autotune"] is True
    with pytest.raises(RuntimeError, match="Unexpected optimization option"):
        jgt.compile(_f, backend="inductor", options={"no_such_knob": 1})


def test_mode_and_options_with_another_backend_go_to_it() -> None:
    """With a callable backend, mode and options are passed to it as keyword arguments."""
    seen: dict[str, Any] = {}

    def backend(gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        return gm.forward

    x = torch.randn(3)
    torch.testing.assert_close(jgt.compile(_f, backend=backend, mode="max-autotune")(x), _f(x))
    assert seen == {"mode": "max-autotune"}


def test_mode_and_options_together_raise() -> None:
    """As torch.compile: mode and options at once is an error."""
    with pytest.raises(RuntimeError, match="Either mode or options"):
        jgt.compile(_f, mode="default", options={"max_autotune": True})


def test_disable_returns_the_model() -> None:
    """disable=True gives back the model itself, decorator or not."""
    assert jgt.compile(_f, disable=True) is _f
    assert jgt.compile(disable=True)(_f) is _f


def test_backend_none_is_torchs_default() -> None:
    """backend=None means torch's default backend (inductor)."""
    cf = jgt.compile(_f, backend=None)
    assert cf.compiler.backend == "inductor"


def test_name_recompile_limit_isolate_are_taken() -> None:
    """name, recompile_limit and isolate_recompiles are accepted and keep their meanings."""
    cnt = CompileCounter()
    cf = jgt.compile(_f, backend=cnt, name="mine", recompile_limit=1, isolate_recompiles=True)
    x = torch.randn(3)
    torch.testing.assert_close(cf(x), _f(x))
    assert cf.cache.recompile_limit == 1 and cf.cache.isolated


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"shapes_spec": object()}, "does not take shapes_spec"),
    ({"options": {"guard_filter_fn": lambda entries: [True] * len(entries)}},
     r"options\['guard_filter_fn'\]"),
    ({"options": {"use_aoti": True}}, r"options\['use_aoti'\]"),
])
def test_parameters_with_no_meaning_raise(kwargs: dict[str, Any], match: str) -> None:
    """shapes_spec, options' guard_filter_fn and use_aoti: a TypeError saying what to use."""
    with pytest.raises(TypeError, match=match):
        jgt.compile(_f, **kwargs)


def test_decorator_with_torch_parameters() -> None:
    """@compile(mode=..., backend=...) works as a decorator."""
    cnt = CompileCounter()

    @jgt.compile(backend=cnt, dynamic=False, fullgraph=True)
    def g(x: Any) -> Any:
        return x * 2

    x = torch.randn(2)
    torch.testing.assert_close(g(x), x * 2)
    assert cnt.frame_count == 1
