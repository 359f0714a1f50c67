"""nn.Module arguments: parameter/buffer/submodule/training sources, and module_guards:
unchanged is a hit, every change that alters a call is a miss with a clear reason."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import jitguard.torch as jgt  # noqa: E402
from jitguard import LocalSource, compile_guards  # noqa: E402

M = LocalSource("m")


class MLP(nn.Module):
    def __init__(self, n: int = 2, width: int = 4) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(n)])
        self.norm = nn.BatchNorm1d(width)

    def forward(self, x: Any) -> Any:
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.norm(x)


def guard(m: Any, **options: Any) -> Any:
    """The check of module_guards(m) that takes the module as its only argument."""
    return compile_guards(jgt.module_guards(M, m, **options), f_locals={"m": m}, arg_names=["m"])


def miss(check: Any, m: Any) -> list[str]:
    """Assert the check fails (generated and reference agree) and return the reasons."""
    assert check(m) is False
    assert check.reference(m) is False
    return [f.reason for f in check.explain(m)]


def hit(check: Any, m: Any) -> None:
    assert check(m) is True
    assert check.reference(m) is True


@pytest.fixture
def hook_free() -> Iterator[None]:
    """Fail loudly if a test leaves a global module hook installed."""
    yield
    import torch.nn.modules.module as mm

    assert not (mm._global_forward_hooks or mm._global_forward_pre_hooks)


# ---- sources ----------------------------------------------------------------------------


def test_source_names_are_dynamo_style() -> None:
    """Sources read through the registries, named as Dynamo names them."""
    layer0 = jgt.submodule_source(jgt.submodule_source(M, "layers"), "0")
    assert jgt.parameter_source(layer0, "weight").name() == (
        "L['m']._modules['layers']._modules['0']._parameters['weight']"
    )
    assert jgt.buffer_source(M, "running_mean").name() == "L['m']._buffers['running_mean']"
    assert jgt.training_source(M).name() == "L['m'].training"


def test_sources_read_the_registered_objects() -> None:
    """get_value reads the registered parameter, buffer and submodule objects."""
    m = MLP()
    frame = {"m": m}
    layer0 = jgt.submodule_source(jgt.submodule_source(M, "layers"), "0")
    assert layer0.get_value(frame, {}) is m.layers[0]
    assert jgt.parameter_source(layer0, "weight").get_value(frame, {}) is m.layers[0].weight
    norm = jgt.submodule_source(M, "norm")
    assert jgt.buffer_source(norm, "running_mean").get_value(frame, {}) is m.norm.running_mean
    assert jgt.training_source(M).get_value(frame, {}) is True


def test_module_path_source_resolves_dotted_names() -> None:
    """named_parameters/named_buffers names resolve to registry sources; unknown ones raise."""
    m = MLP()
    frame = {"m": m}
    for name, p in [*m.named_parameters(), *m.named_buffers()]:
        assert jgt.module_path_source(M, m, name).get_value(frame, {}) is p
    assert jgt.module_path_source(M, m, "layers.1").get_value(frame, {}) is m.layers[1]
    assert jgt.module_path_source(M, m, "") is M
    with pytest.raises(KeyError, match="has no submodule, parameter or buffer named 'nope'"):
        jgt.module_path_source(M, m, "layers.0.nope")


# ---- module_guards: hits -----------------------------------------------------------------


def test_unchanged_module_hits_repeatedly(hook_free: None) -> None:
    """Calling again with the same, unchanged module is a hit every time."""
    m = MLP()
    c = guard(m)
    for _ in range(3):
        hit(c, m)
    m(torch.randn(3, 4))  # running the module (in-place buffer updates) changes nothing guarded
    hit(c, m)


def test_in_place_value_updates_still_hit() -> None:
    """Optimizer-style in-place updates of parameter values are not a miss."""
    m = MLP()
    c = guard(m)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(1.0)
    hit(c, m)


def test_another_instance_is_a_miss() -> None:
    """A structurally identical module object is a different module."""
    m = MLP()
    c = guard(m)
    reasons = miss(c, MLP())
    assert reasons[0].startswith("L['m'] is <MLP object at")


# ---- module_guards: each change is a miss ----------------------------------------------------


def test_replacing_a_parameter_is_a_miss() -> None:
    """Assigning a new Parameter (the old one still alive) fails its ID_MATCH."""
    m = MLP()
    c = guard(m)
    old = m.layers[0].weight
    m.layers[0].weight = nn.Parameter(torch.randn(4, 4))
    reasons = miss(c, m)
    assert reasons[0].startswith("L['m']._modules['layers']._modules['0']._parameters['weight'] is <Parameter")
    m.layers[0].weight = old
    hit(c, m)


def test_dropped_replaced_parameter_invalidates_the_check() -> None:
    """When the replaced parameter is collected the check is invalidated, naming it."""
    m = MLP()
    c = guard(m)
    m.layers[0].bias = nn.Parameter(torch.randn(4))
    assert not c.valid and c(m) is False
    assert c.invalid_reason == (
        "Cache line invalidated because L['m']._modules['layers']._modules['0']._parameters['bias'] "
        "got deallocated"
    )


def test_changing_dtype_through_data_is_a_miss() -> None:
    """p.data = p.data.half() keeps the object but fails on dtype."""
    m = MLP()
    c = guard(m)
    w = m.layers[1].weight
    w.data = w.data.half()
    assert miss(c, m) == [
        "tensor 'L['m']._modules['layers']._modules['1']._parameters['weight']' dtype mismatch. "
        "expected Float, actual Half"
    ]
    w.data = w.data.float()
    hit(c, m)


def test_changing_shape_through_data_is_a_miss() -> None:
    """p.data = a tensor of another shape fails on size."""
    m = MLP()
    c = guard(m)
    m.layers[0].bias.data = torch.randn(5)
    assert miss(c, m) == [
        "tensor 'L['m']._modules['layers']._modules['0']._parameters['bias']' size mismatch at "
        "index 0. expected 4, actual 5"
    ]


def test_module_half_is_a_miss() -> None:
    """m.half() converts parameters and buffers in place: a miss."""
    m = MLP()
    c = guard(m)
    m.half()
    assert any("dtype mismatch. expected Float, actual Half" in r for r in miss(c, m))


def test_requires_grad_off_is_a_miss() -> None:
    """Freezing a parameter (requires_grad_(False)) is a miss."""
    m = MLP()
    c = guard(m)
    m.layers[0].weight.requires_grad_(False)
    assert miss(c, m) == [
        "tensor 'L['m']._modules['layers']._modules['0']._parameters['weight']' requires_grad "
        "mismatch. expected requires_grad=1"
    ]


def test_toggling_training_is_a_miss() -> None:
    """eval() on the root or on one submodule is a miss naming the module."""
    m = MLP()
    c = guard(m)
    m.layers[1].eval()
    assert miss(c, m) == [
        "module L['m']._modules['layers']._modules['1'] changed: training is False, expected True"
    ]
    m.train()
    hit(c, m)
    m.eval()
    assert len(miss(c, m)) == 5  # root, ModuleList, two Linear, BatchNorm


def test_forward_hook_is_a_miss_and_removing_it_a_hit() -> None:
    """An instance forward hook is a miss; once removed, a hit again."""
    m = MLP()
    c = guard(m)
    handle = m.layers[0].register_forward_hook(lambda mod, args, out: None)
    assert miss(c, m) == [
        "module L['m']._modules['layers']._modules['0'] changed: _forward_hooks has 1 hook(s), "
        "expected none"
    ]
    handle.remove()
    hit(c, m)


def test_forward_pre_hook_and_backward_hook_are_misses() -> None:
    """Pre-forward and full backward hooks are misses too."""
    m = MLP()
    c = guard(m)
    h1 = m.register_forward_pre_hook(lambda mod, args: None)
    assert "_forward_pre_hooks has 1 hook(s)" in miss(c, m)[0]
    h1.remove()
    h2 = m.norm.register_full_backward_hook(lambda mod, gi, go: None)
    assert "_backward_hooks has 1 hook(s)" in miss(c, m)[0]
    h2.remove()
    hit(c, m)


def test_global_module_hooks_are_a_miss(hook_free: None) -> None:
    """torch's global forward (pre-)hooks are a miss while installed."""
    m = MLP()
    c = guard(m)
    handle = nn.modules.module.register_module_forward_hook(lambda mod, args, out: None)
    try:
        assert miss(c, m) == ["global nn.Module hooks changed: _global_forward_hooks has 1 hook(s), expected none"]
    finally:
        handle.remove()
    hit(c, m)


def test_hooks_present_at_build_must_stay_the_same() -> None:
    """A module compiled with a hook hits with that hook, misses when it is swapped."""
    m = MLP()

    def hook(mod: Any, args: Any, out: Any) -> None:
        return None

    handle = m.layers[0].register_forward_hook(hook)
    c = guard(m)
    hit(c, m)
    handle.remove()
    assert "_forward_hooks keys changed" in miss(c, m)[0]
    m.layers[0].register_forward_hook(hook)
    assert "_forward_hooks keys changed" in miss(c, m)[0]  # a new handle id: a new hook


def test_instance_forward_override_is_a_miss() -> None:
    """Setting m.forward on the instance is a miss."""
    m = MLP()
    c = guard(m)
    m.layers[0].forward = lambda x: x
    assert miss(c, m) == [
        "module L['m']._modules['layers']._modules['0'] changed: an instance-level forward was set"
    ]
    del m.layers[0].forward
    hit(c, m)


def test_compiled_call_is_a_miss() -> None:
    """A module whose call was replaced (what Module.compile() does) is a miss."""
    m = MLP()
    c = guard(m)
    m._compiled_call_impl = lambda *a, **k: None
    assert miss(c, m) == ["module L['m'] changed: the module was compile()d"]


def test_class_level_compiled_call_is_a_miss() -> None:
    """A compiled call set on the module's class (Module.__call__ reads it through the
    class too) is a miss in the generated check and the reference alike."""

    class Own(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return x

    m = Own()
    c = guard(m)
    first, second = (lambda *a, **k: None), (lambda *a, **k: 1)
    Own._compiled_call_impl = first  # type: ignore[assignment]
    assert miss(c, m) == ["module L['m'] changed: the module was compile()d"]
    again = guard(m)  # built while the class's call is set: it holds, and misses once it changes
    hit(again, m)
    Own._compiled_call_impl = second  # type: ignore[assignment]
    assert miss(again, m) == ["module L['m'] changed: the compiled call changed"]
    Own._compiled_call_impl = first  # type: ignore[assignment]
    m._compiled_call_impl = first  # the same call, now an instance attribute
    assert miss(again, m) == ["module L['m'] changed: the compiled call changed"]


def test_new_parameter_buffer_or_submodule_is_a_miss() -> None:
    """Registering anything new changes the registry keys: a miss naming them."""
    m = MLP()
    c = guard(m)
    m.layers[0].register_buffer("extra", torch.zeros(1))
    assert miss(c, m) == [
        "module L['m']._modules['layers']._modules['0'] changed: _buffers keys changed: expected "
        "[], got ['extra']"
    ]
    del m.layers[0].extra
    hit(c, m)
    m.layers.append(nn.Linear(4, 4))
    assert "_modules keys changed: expected ['0', '1'], got ['0', '1', '2']" in miss(c, m)[0]


def test_replacing_a_submodule_is_a_miss() -> None:
    """Swapping a submodule for an equal-looking one fails its ID_MATCH."""
    m = MLP()
    c = guard(m)
    old = m.layers[1]
    m.layers[1] = nn.Linear(4, 4)
    assert old is not m.layers[1]
    assert miss(c, m)[0].startswith("L['m']._modules['layers']._modules['1'] is <Linear object at")


def test_class_swap_is_a_miss() -> None:
    """Changing a module's class in place (as parametrizations do) is a miss."""

    class MyLinear(nn.Linear):
        pass

    m = MLP()
    c = guard(m)
    m.layers[0].__class__ = MyLinear
    assert miss(c, m) == [
        "type(L['m']._modules['layers']._modules['0']) is Linear failed: got "
        "test_class_swap_is_a_miss.<locals>.MyLinear"
    ]


def test_buffer_replacement_and_metadata() -> None:
    """Buffers are pinned like parameters: replacement and dtype changes are misses."""
    m = MLP()
    c = guard(m)
    old = m.norm.running_mean
    m.norm.running_mean = torch.zeros(4)
    assert old is not m.norm.running_mean
    assert "._buffers['running_mean'] is <Tensor" in miss(c, m)[0]
    m2 = MLP()
    c2 = guard(m2)
    m2.norm.running_var.data = m2.norm.running_var.data.double()
    assert "dtype mismatch. expected Float, actual Double" in miss(c2, m2)[0]


# ---- options and structure --------------------------------------------------------------------


def test_tied_parameters_checked_once_and_stay_tied() -> None:
    """A parameter shared by two modules is metadata-checked once, identity-pinned twice."""
    m = MLP()
    m.layers[1].weight = m.layers[0].weight
    guards = jgt.module_guards(M, m)
    batched = [g for g in guards if g.create_fn_name() == "TENSORS_MATCH"]
    assert len(batched) == 1
    c = guard(m)
    hit(c, m)
    m.layers[1].weight = nn.Parameter(m.layers[0].weight.detach().clone())
    assert "._modules['1']._parameters['weight'] is <Parameter" in miss(c, m)[0]


def test_batch_off_gives_per_tensor_guards_with_the_same_verdicts() -> None:
    """batch=False uses one TENSOR_MATCH per tensor; the verdicts and texts are the same."""
    m = MLP()
    c = guard(m, batch=False)
    assert sum(leaf.kind.name == "TENSOR_MATCH" for leaf in c.leaves) == 9  # 2x2 Linear + 5 BatchNorm
    hit(c, m)
    m.layers[0].weight.data = m.layers[0].weight.data.half()
    assert miss(c, m)[0].endswith("dtype mismatch. expected Float, actual Half")


def test_hooks_false_ignores_hooks() -> None:
    """hooks=False leaves hook dicts unchecked but still checks training."""
    m = MLP()
    c = guard(m, hooks=False)
    handle = m.register_forward_hook(lambda *a: None)
    hit(c, m)
    handle.remove()
    m.eval()
    assert "training is False" in miss(c, m)[0]


def test_constants_option_pins_plain_attributes() -> None:
    """constants=True makes a changed int/float attribute (BatchNorm eps) a miss."""
    m = MLP()
    c = guard(m, constants=True)
    hit(c, m)
    m.norm.eps = 1e-3
    assert miss(c, m) == ["L['m']._modules['norm'].eps == 1e-05 failed: got 0.001"]
    assert guard(m)(m)  # without the option, eps is not guarded


def test_constants_option_pins_every_builtin_scalar() -> None:
    """constants=True pins bytes and complex attributes too, like the other scalars."""
    m = MLP()
    m.tag, m.gain = b"v1", 2j
    c = guard(m, constants=True)
    hit(c, m)
    m.tag = b"v2"
    assert miss(c, m) == ["L['m'].tag == b'v1' failed: got b'v2'"]
    m.tag, m.gain = b"v1", 3j
    assert miss(c, m) == ["L['m'].gain == 2j failed: got 3j"]


def test_identity_off_still_checks_metadata() -> None:
    """identity=False accepts a replaced parameter with the same metadata only."""
    m = MLP()
    c = guard(m, identity=False)
    keep = m.layers[0].weight
    m.layers[0].weight = nn.Parameter(torch.randn(4, 4))
    hit(c, m)
    m.layers[0].weight = nn.Parameter(torch.randn(4, 5))
    assert "size mismatch at index 1. expected 4, actual 5" in miss(c, m)[0]
    del keep


def test_module_guards_refuses_non_modules() -> None:
    """module_guards needs an nn.Module."""
    with pytest.raises(Exception, match=r"not an nn\.Module"):
        jgt.module_guards(M, [1, 2])


def test_none_parameter_slot() -> None:
    """A registered None parameter (bias=False) is guarded as None."""
    m = nn.Linear(3, 3, bias=False)
    c = guard(m)
    hit(c, m)
    m.bias = nn.Parameter(torch.zeros(3))
    assert miss(c, m) == ["L['m']._parameters['bias'] is None failed: got <Parameter object>"]


def _with_defaults(forward: Any) -> Any:
    import functools

    @functools.wraps(forward)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        return forward(self, *args, **kwargs)

    return wrapper


class _DecoratedForward(torch.nn.Module):
    @_with_defaults
    def forward(self, x: Any) -> Any:
        return x + 1


def test_explain_names_the_forward_below_its_decorators() -> None:
    """A forward wrapped by a functools.wraps decorator (as transformers wraps its models')
    is named in explain by its own class, file and def line, not the decorator's."""
    import inspect

    import jitguard

    m = _DecoratedForward()
    cm = jgt.compile(m, backend="eager")
    cm(torch.ones(2))
    line = inspect.getsourcelines(_DecoratedForward.forward.__wrapped__)[1]
    head = str(jitguard.explain(cm)).splitlines()[0]
    assert head == f"jitguard.explain: _DecoratedForward.forward at {__file__}:{line}", head
