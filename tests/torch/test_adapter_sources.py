"""One test per torch internal that guard conversion reads (adapter_sources): if a torch
upgrade moves one, its test fails here, naming it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch._dynamo import source as dsrc  # noqa: E402

from jitguard._src.torch import adapter_sources as adapter  # noqa: E402
from jitguard._src.torch.convert_sources import source_converters  # noqa: E402

pytestmark = pytest.mark.usefixtures("restore_grad_mode")


def record(fn: Any, *args: Any) -> list[Any]:
    """The parts of every GuardFilterEntry Dynamo makes compiling ``fn`` on ``args``, read
    when the filter is called (torch builds its guards once more after filtering, which
    extends the code lists of the guards kept)."""
    torch._dynamo.reset()
    got: list[Any] = []

    def keep(entries: Any) -> list[bool]:
        got.extend(map(adapter.entry_parts, entries))
        return [True] * len(entries)

    torch.compile(fn, backend="eager", fullgraph=True, options={"guard_filter_fn": keep})(*args)
    return got


class Obj:
    pass


def f(x: Any, y: Any, o: Any) -> Any:
    return x + y if hasattr(o, "v") else x * y


def test_guard_filter_entry_parts() -> None:
    """GuardFilterEntry: guard_type, derived_guard_types, value, orig_guard's source,
    partial create_fn keywords (HASATTR's attr=, TENSOR_MATCH's value=, DUPLICATE_INPUT's
    source_b=), code_list and user_stack."""
    x = torch.ones(3)
    parts = {p.guard_type: p for p in record(f, x, x, Obj())}
    assert parts["HASATTR"].options == {"attr": "v"}
    assert parts["HASATTR"].value.__class__ is Obj and parts["HASATTR"].has_value
    assert adapter.unwrap_tensor_weakref(parts["TENSOR_MATCH"].options["value"]) is x
    assert parts["TENSOR_MATCH"].derived == ("TENSOR_MATCH",)
    assert parts["TENSOR_MATCH"].code_list[0] == "hasattr(L['x'], '_dynamo_dynamic_indices') == False"
    assert adapter.dynamo_source_name(parts["DUPLICATE_INPUT"].options["source_b"]) == "L['x']"
    assert parts["TENSOR_MATCH"].user_stack[-1].name == "f"
    assert adapter.is_dynamo_source(parts["TENSOR_MATCH"].source)
    assert not adapter.is_dynamo_source("L['x']")


def test_shape_env_code_list() -> None:
    """SHAPE_ENV's code_list holds each shape guard as Python over source names."""
    x = torch.ones(4)
    torch._dynamo.mark_dynamic(x, 0)
    (shape,) = [p for p in record(lambda x: x + 1, x) if p.guard_type == "SHAPE_ENV"]
    assert shape.code_list == ("2 <= L['x'].size()[0]",)


L = dsrc.LocalSource("x")
G = dsrc.GlobalSource("g")
# Each Dynamo source class the converters know, built the way Dynamo builds it, with the
# name it must have (torch-guards.md, b.2).
EXAMPLES: dict[str, tuple[Any, str]] = {
    "LocalSource": (L, "L['x']"),
    "GlobalSource": (G, "G['g']"),
    "GlobalWeakRefSource": (dsrc.GlobalWeakRefSource("w"), "G['w']()"),
    "AttrSource": (dsrc.AttrSource(L, "weight"), "L['x'].weight"),
    "ParamBufferSource": (dsrc.ParamBufferSource(L, "weight"), "L['x'].weight"),
    "UnspecializedParamBufferSource": (dsrc.UnspecializedParamBufferSource(L, "bias"), "L['x'].bias"),
    "GradSource": (dsrc.GradSource(L, "grad"), "L['x'].grad"),
    "CellContentsSource": (dsrc.CellContentsSource(L, "cell_contents"), "L['x'].cell_contents"),
    "GenericAttrSource": (dsrc.GenericAttrSource(L, "foo"), "object.__getattribute__(L['x'], 'foo')"),
    "ClosureSource": (dsrc.ClosureSource(L), "L['x'].__closure__"),
    "CodeSource": (dsrc.CodeSource(L), "L['x'].__code__"),
    "TypeSource": (dsrc.TypeSource(L), "type(L['x'])"),
    "TypeMROSource": (dsrc.TypeMROSource(L), "L['x'].__mro__"),
    "TypeDictSource": (dsrc.TypeDictSource(dsrc.TypeSource(L)), "dict(type(L['x']).__dict__)"),
    "WeakRefCallSource": (dsrc.WeakRefCallSource(L), "L['x']()"),
    "CallFunctionNoArgsSource": (dsrc.CallFunctionNoArgsSource(L), "L['x']()"),
    "DefaultsSource": (dsrc.DefaultsSource(G, 0), "G['g'].__defaults__[0]"),
    "GetItemSource": (dsrc.GetItemSource(L, 2), "L['x'][2]"),
    "ListGetItemSource": (dsrc.ListGetItemSource(L, 3), "list.__getitem__(L['x'], 3)"),
    "DictGetItemSource": (dsrc.DictGetItemSource(L, "k"), "L['x']['k']"),
    "DictSubclassGetItemSource": (dsrc.DictSubclassGetItemSource(L, "k"), "L['x']['k']"),
    "ConstDictKeySource": (dsrc.ConstDictKeySource(L, 0), "list(dict.keys(L['x']))[0]"),
    "TensorPropertySource": (
        dsrc.TensorPropertySource(L, dsrc.TensorProperty.SIZE, 1), "L['x'].size()[1]"
    ),
    "OptimizerSource": (dsrc.OptimizerSource(L), "L['x']"),
    "NNModuleSource": (dsrc.NNModuleSource(L), "L['x']"),
    "UnspecializedNNModuleSource": (dsrc.UnspecializedNNModuleSource(L), "L['x']"),
    "UnspecializedBuiltinNNModuleSource": (dsrc.UnspecializedBuiltinNNModuleSource(L), "L['x']"),
    "FSDPNNModuleSource": (dsrc.FSDPNNModuleSource(L), "L['x']"),
    "RandomValueSource": (dsrc.RandomValueSource(0), "random_value_0"),
    "SyntheticLocalSource": (dsrc.SyntheticLocalSource("s"), "SYNTHETIC_LOCAL['s']"),
    "GlobalStateSource": (dsrc.GlobalStateSource(), ""),
    "ShapeEnvSource": (dsrc.ShapeEnvSource(), ""),
    "BackwardStateSource": (dsrc.BackwardStateSource(), ""),
}


def test_every_converted_source_class_has_an_example() -> None:
    """The examples cover the converter registry exactly."""
    assert set(EXAMPLES) == set(source_converters())


@pytest.mark.parametrize("cls", sorted(EXAMPLES))
def test_source_class_fields_and_name(cls: str) -> None:
    """The class exists under its name, is a dataclass with the fields its converter reads,
    and has the name jitguard's converted source must match."""
    source, name = EXAMPLES[cls]
    assert adapter.source_class_name(source) == cls
    assert dataclasses.is_dataclass(source)
    fields = adapter.dynamo_source_fields(source)
    if cls not in ("LocalSource", "GlobalSource", "GlobalWeakRefSource", "RandomValueSource",
                   "SyntheticLocalSource", "GlobalStateSource", "ShapeEnvSource",
                   "BackwardStateSource"):
        assert fields["base"] is not None
    assert adapter.dynamo_source_name(source) == name


def test_local_source_cell_flag() -> None:
    """LocalSource carries is_derefed_cell_contents (closure variables)."""
    fields = adapter.dynamo_source_fields(dsrc.LocalSource("k", is_derefed_cell_contents=True))
    assert fields["is_derefed_cell_contents"] is True and fields["local_name"] == "k"


def test_constant_base_types() -> None:
    """The base types CONSTANT_SUBCLASS_MATCH converts a subclass instance with."""
    assert adapter.constant_base_types() == (int, float, str)


def test_tensor_property_name() -> None:
    """TensorProperty members by name."""
    assert [adapter.tensor_property_name(p) for p in dsrc.TensorProperty] == [
        "SIZE", "STRIDE", "STORAGE_OFFSET"
    ]


def test_config_flags() -> None:
    """The two config flags conversion reads, with their 2.13 defaults."""
    assert adapter.config_flag("skip_nnmodule_hook_guards") is True
    assert adapter.config_flag("skip_no_tensor_aliasing_guards_on_parameters") is True


def test_saved_tensors_hooks_ids() -> None:
    """None with no hooks; a pair of plain functions is inlineable and read by id."""
    assert adapter.saved_tensors_hooks_ids() is None

    def pack(t: Any) -> Any:
        return t

    def unpack(t: Any) -> Any:
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        ids = adapter.saved_tensors_hooks_ids()
    assert ids is None or ids == (id(pack), id(unpack))


def test_top_saved_tensors_hooks_read() -> None:
    """torch's reader, called with its argument, gives None with no hooks and the innermost
    pair inside ``saved_tensors_hooks``."""
    fn, arg = adapter.top_saved_tensors_hooks_read()
    assert fn(arg) is None

    def pack(t: Any) -> Any:
        return t

    def unpack(t: Any) -> Any:
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        assert tuple(fn(arg)) == (pack, unpack)
    assert fn(arg) is None


def test_forward_ad_level() -> None:
    """-1 outside forward AD, 0 inside one dual level."""
    assert adapter.forward_ad_level() == -1
    with torch.autograd.forward_ad.dual_level():
        assert adapter.forward_ad_level() == 0


def test_functorch_states() -> None:
    """Empty outside functorch transforms; inside vmap one state, which then matches."""
    assert adapter.functorch_states() == []
    assert adapter.functorch_states_match([])
    seen: list[Any] = []

    def body(x: Any) -> Any:
        seen.append(adapter.functorch_states())
        seen.append(adapter.functorch_states_match(seen[0]))
        seen.append(adapter.functorch_states_match([]))
        return x

    torch.vmap(body)(torch.ones(2, 3))
    assert len(seen[0]) == 1 and seen[1] is True and seen[2] is False


def test_current_default_device() -> None:
    """None by default; the device ``torch.set_default_device`` put in force."""
    assert adapter.current_default_device() is None
    torch.set_default_device("cpu")
    try:
        assert adapter.current_default_device() == torch.device("cpu")
        module, name = adapter.default_device_home()
        assert getattr(module, name) == torch.device("cpu")
    finally:
        torch.set_default_device(None)
    assert getattr(*adapter.default_device_home()) is None


def test_dict_version() -> None:
    """A write changes the version tag; a read does not."""
    d = {"a": 1}
    v = adapter.dict_version(d)
    assert adapter.dict_version(d) == v
    d["a"] = 2
    assert adapter.dict_version(d) != v


def test_sympy_functions() -> None:
    """FloorDiv and PythonMod evaluate as Python's // and %."""
    import sympy

    floor_div, mod = adapter.sympy_floor_div(), adapter.sympy_python_mod()
    assert floor_div(sympy.Integer(-7), sympy.Integer(2)) == -4
    assert mod(sympy.Integer(-7), sympy.Integer(3)) == 2
    s = sympy.Symbol("s", integer=True)
    assert floor_div(s, 2).xreplace({s: sympy.Integer(9)}) == 4
