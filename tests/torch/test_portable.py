"""Portable torch guards (jitguard/_src/torch/portable.py): each kind a stored
jitguard.torch.compile entry holds goes through JSON and back with the same verdicts."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import jitguard as jg  # noqa: E402
import jitguard.torch as jgt  # noqa: E402
from jitguard import GuardBuilder as GB  # noqa: E402
from jitguard import LocalSource  # noqa: E402

F = torch.nn.functional


def round_trip(guards: list[Any], frame: dict[str, Any],
               f_globals: Any = None) -> tuple[Any, Any, dict[str, Any]]:
    """(original check, check rebuilt from its JSON document, the document)."""
    names = list(frame)
    original = jg.compile_guards(guards, f_locals=frame, arg_names=names, f_globals=f_globals)
    doc = json.loads(json.dumps(jg.export_guards(original), allow_nan=False))
    assert all(g["portable"] for g in doc["guards"]), [g.get("reason") for g in doc["guards"]]
    rebuilt = jg.compile_guard_records(jg.import_guards(doc), arg_names=names, f_globals=f_globals)
    return original, rebuilt, doc


def same_verdicts(original: Any, rebuilt: Any, *calls: tuple[Any, ...]) -> list[bool]:
    out = []
    for args in calls:
        got = rebuilt(*args)
        assert got == original(*args), args
        assert [str(f) for f in rebuilt.explain(*args)] == [str(f) for f in original.explain(*args)]
        out.append(got)
    return out


def test_tensor_match_round_trip() -> None:
    """TENSOR_MATCH: dtype, device, layout, sizes, strides, requires_grad and type survive
    JSON; the rebuilt check rejects each change with the original's text."""
    x = torch.randn(3, 4)
    original, rebuilt, doc = round_trip([LocalSource("x").make_guard(GB.TENSOR_MATCH)], {"x": x})
    expect = doc["guards"][0]["expect"]
    assert expect["$"] == "codec" and expect["type"] == "jitguard.torch:TensorSpec"
    verdicts = same_verdicts(
        original, rebuilt, (torch.zeros(3, 4),), (x.double(),), (x.t(),), (torch.zeros(3, 5),),
        (x.clone().requires_grad_(),), (torch.nn.Parameter(x),), (x.to_sparse(),), (x.neg().conj(),),
    )
    assert verdicts == [True, False, False, False, False, False, False, True]
    assert str(rebuilt.explain(x.double())[0]) == (
        "tensor 'L['x']' dtype mismatch. expected Float, actual Double"
    )


def test_tensor_match_dynamic_dims_round_trip() -> None:
    """A dynamic dim stays unchecked after the round trip; the static one stays checked."""
    guard = LocalSource("x").make_guard(functools.partial(GB.TENSOR_MATCH, dynamic_dims=(0,)))
    original, rebuilt, _ = round_trip([guard], {"x": torch.randn(3, 4)})
    assert same_verdicts(original, rebuilt, (torch.zeros(7, 4),), (torch.zeros(7, 5),)) == [True, False]


def test_tensors_match_round_trip_rebuilds_the_cxx_checker() -> None:
    """TENSORS_MATCH comes back with torch's C++ checker (built from example tensors that
    pass each spec) and the same verdicts, including two sources holding one tensor."""
    a, b, p = torch.randn(2, 3), torch.randn(5).requires_grad_(), torch.nn.Parameter(torch.randn(4))
    guard = LocalSource("a").make_guard(
        functools.partial(jgt.TENSORS_MATCH, others=(LocalSource("b"), LocalSource("p"))))
    original, rebuilt, _ = round_trip([guard], {"a": a, "b": b, "p": p})
    (leaf,) = rebuilt.leaves
    assert leaf.params.checker is not None
    assert "___tensor_guards" in rebuilt.source
    verdicts = same_verdicts(
        original, rebuilt, (torch.zeros(2, 3), torch.zeros(5).requires_grad_(), torch.nn.Parameter(torch.zeros(4))),
        (a.half(), b, p), (a, b.detach(), p), (a, b, p.detach()), (a, b, torch.nn.Parameter(torch.zeros(5))),
        (a, a, p),
    )
    assert verdicts == [True, False, False, False, False, False]


def test_tensors_match_without_example_uses_the_reference() -> None:
    """A spec no example tensor can be made for (a dynamic dim) leaves no C++ checker: the
    rebuilt check runs the reference meaning, with the same verdicts."""
    guard = LocalSource("a").make_guard(
        functools.partial(jgt.TENSORS_MATCH, others=(LocalSource("b"),), sizes=((None, 3), None)))
    original, rebuilt, _ = round_trip([guard], {"a": torch.randn(2, 3), "b": torch.randn(4)})
    assert rebuilt.leaves[0].params.checker is None
    assert same_verdicts(original, rebuilt, (torch.zeros(9, 3), torch.zeros(4)),
                         (torch.zeros(9, 4), torch.zeros(4))) == [True, False]


def test_dimension_marking_round_trip() -> None:
    """DIMENSION_DYNAMIC_MARKING: a marking absent at build time must stay absent, after
    the round trip too."""
    x = torch.randn(3, 4)
    y = torch.randn(3, 4)
    torch._dynamo.mark_dynamic(y, 0)
    original, rebuilt, _ = round_trip(
        [LocalSource("x").make_guard(GB.DIMENSION_DYNAMIC_MARKING)], {"x": x})
    assert same_verdicts(original, rebuilt, (torch.zeros(2),), (y,)) == [True, False]
    z = torch.randn(3, 4)
    torch._dynamo.mark_dynamic(z, (0, 1))
    original, rebuilt, _ = round_trip(
        [LocalSource("x").make_guard(GB.DIMENSION_DYNAMIC_MARKING)], {"x": z})
    assert same_verdicts(original, rebuilt, (y,), (x,), (z,)) == [True, True, True]


def test_global_state_round_trip(restore_grad_mode: None) -> None:
    """GLOBAL_STATE over torch's states is written as names and values; the rebuilt check
    misses when a state changes, naming it as the original does."""
    original, rebuilt, _ = round_trip([jg.GlobalStateSource().make_guard(GB.GLOBAL_STATE)], {})
    names = [state.name for state, _ in rebuilt.leaves[0].params.values]
    assert "grad_enabled" in names and "autocast_cpu_dtype" in names
    assert same_verdicts(original, rebuilt, ()) == [True]
    torch.set_grad_enabled(False)
    assert same_verdicts(original, rebuilt, ()) == [False]
    assert str(rebuilt.explain()[0]) == "GLOBAL_STATE changed: grad_enabled (expected True, got False)"
    torch.set_grad_enabled(True)
    with torch.autocast("cpu", dtype=torch.float16):
        assert same_verdicts(original, rebuilt, ()) == [False]


def test_global_state_read_under_other_values_uses_no_group(restore_grad_mode: None) -> None:
    """A GLOBAL_STATE document read while a state differs from the recorded value rebuilds
    a check pinned to the recorded values (not the values at reading time)."""
    check = jg.compile_guards([jg.GlobalStateSource().make_guard(GB.GLOBAL_STATE)], f_locals={},
                              arg_names=[])
    doc = json.dumps(jg.export_guards(check))
    with torch.no_grad():
        rebuilt = jg.compile_guard_records(jg.import_guards(doc), arg_names=[])
        assert not rebuilt()
    assert rebuilt()


def _doc_field(doc_value: Any, key: str) -> Any:
    """An item of a ``{"$": "dict"}`` value of a guard-set document."""
    return next(v for k, v in doc_value["items"] if k == key)


def test_global_state_of_a_state_unknown_to_the_writer_is_refused() -> None:
    """A document written where a state guarded here was not registered is refused, naming
    it: the stored entry may depend on it."""
    check = jg.compile_guards([jg.GlobalStateSource().make_guard(GB.GLOBAL_STATE)], f_locals={},
                              arg_names=[])
    doc = jg.export_guards(check)
    known = _doc_field(doc["guards"][0]["expect"]["value"], "known")
    known.remove("grad_enabled")
    with pytest.raises(jg.GuardSchemaError,
                       match=r"the state\(s\) \['grad_enabled'\] guarded in this process did not exist"):
        jg.import_guards(doc)


def test_global_state_over_chosen_states_round_trip() -> None:
    """GLOBAL_STATE with ``states=`` (what jitguard.torch.compile makes: the autocast dtypes
    only while enabled) comes back over exactly those states."""
    names = ["grad_enabled", "default_dtype"]
    guard = jg.GlobalStateSource().make_guard(functools.partial(GB.GLOBAL_STATE, states=names))
    original, rebuilt, _ = round_trip([guard], {})
    assert [s.name for s, _ in rebuilt.leaves[0].params.values] == names
    assert same_verdicts(original, rebuilt, ()) == [True]
    torch.set_default_dtype(torch.float64)
    try:
        assert same_verdicts(original, rebuilt, ()) == [False]
        with torch.no_grad():
            assert not rebuilt()
    finally:
        torch.set_default_dtype(torch.float32)


def test_identity_of_builtins_and_code_re_binds_by_name() -> None:
    """``torch.relu`` (qualname ``_VariableFunctionsClass.relu``) and a module-level
    function's code object are portable, re-bound where they live."""
    frame = {"r": torch.relu, "c": F.layer_norm.__code__}
    guards = [LocalSource(n).make_guard(GB.ID_MATCH) for n in frame]
    original, rebuilt, doc = round_trip(guards, frame)
    assert sorted(json.dumps(g["expect"]) for g in doc["guards"]) == [
        '{"$": "object", "class": "torch:relu"}',
        '{"$": "object", "code": "torch.nn.functional:layer_norm"}',
    ]
    assert same_verdicts(original, rebuilt, (torch.relu, F.layer_norm.__code__),
                         (torch.tanh, F.layer_norm.__code__),
                         (torch.relu, F.group_norm.__code__)) == [True, False, False]


def test_identity_of_a_process_object_stays_not_portable() -> None:
    """An ID_MATCH on an nn.Module instance is not portable: importing keeps it, compiling
    it is refused with the reason."""
    m = torch.nn.Linear(2, 2)
    check = jg.compile_guards([LocalSource("m").make_guard(GB.ID_MATCH)], f_locals={"m": m})
    doc = jg.export_guards(check)
    assert doc["guards"][0]["portable"] is False
    with pytest.raises(jg.GuardSchemaError, match="expects a Linear of this process, held by identity"):
        jg.compile_guard_records(jg.import_guards(doc))


def test_not_present_in_generic_dict_round_trip() -> None:
    """NOT_PRESENT_IN_GENERIC_DICT (an instance-level ``forward``) survives the round trip."""
    m = torch.nn.Linear(2, 2)
    guard = LocalSource("m").make_guard(
        functools.partial(GB.NOT_PRESENT_IN_GENERIC_DICT, attr="forward"))
    original, rebuilt, _ = round_trip([guard], {"m": m})
    patched = torch.nn.Linear(2, 2)
    patched.forward = lambda x: x  # type: ignore[method-assign]
    assert same_verdicts(original, rebuilt, (torch.nn.Linear(3, 3),), (patched,)) == [True, False]


def _dynamic(x: Any, y: Any) -> Any:
    return (x * y)[: x.shape[0] // 2]


def test_shape_env_round_trip() -> None:
    """SHAPE_ENV guards of a dynamic capture (sympy expressions over sizes) come back as
    expression trees and reject what the original rejects, with the same reasons."""
    c: Any = jgt.compile(_dynamic, dynamic=True, isolate_recompiles=True)
    c(torch.ones(4), torch.ones(4))
    (entry,) = c.cache.entries()
    doc = json.loads(json.dumps(jg.export_guards(entry.check)))
    shape = [g for g in doc["guards"] if g["kind"] == "SHAPE_ENV"]
    assert shape and all(g["portable"] for g in shape)
    assert all(g["expect"]["items"][0]["$"] == "codec" for g in shape)
    rebuilt = jg.compile_guard_records(jg.import_guards(doc), arg_names=entry.check.arg_names,
                                       f_globals=globals())
    assert len([ln for ln in rebuilt.source.splitlines() if "SHAPE_ENV" in ln]) == len(shape)
    calls = [(torch.ones(9), torch.ones(9)), (torch.ones(9), torch.ones(8)),
             (torch.ones(1), torch.ones(1))]
    assert same_verdicts(entry.check, rebuilt, *calls) == [True, False, False]
    assert str(rebuilt.explain(torch.ones(9), torch.ones(8))[0]).startswith(
        "(L['y'].size()[0] == L['x'].size()[0]) failed: L['y'].size()[0] = 8, L['x'].size()[0] = 9")


def test_sympy_decoding_builds_only_sympy_classes() -> None:
    """A document naming a class that is not a loaded sympy class is refused: decoding
    constructs sympy classes only."""
    c: Any = jgt.compile(_dynamic, dynamic=True, isolate_recompiles=True)
    c(torch.ones(4), torch.ones(4))
    text = json.dumps(jg.export_guards(c.cache.entries()[0].check))
    assert "sympy.core.relational:Equality" in text
    with pytest.raises(jg.GuardSchemaError, match="os:system is not a loaded sympy class"):
        jg.import_guards(text.replace("sympy.core.relational:Equality", "os:system"))


def test_class_attrs_match_round_trip() -> None:
    """CLASS_ATTRS_MATCH (where the class lookup of ``forward`` finds it) survives the round
    trip: a subclass overriding ``forward`` is rejected."""
    class MyLinear(torch.nn.Linear):
        def forward(self, x: Any) -> Any:
            return x

    c: Any = jgt.compile(torch.nn.Linear(2, 2), isolate_recompiles=True)
    c(torch.ones(2))
    (entry,) = c.cache.entries()
    doc = json.loads(json.dumps(jg.export_guards(entry.check)))
    kinds = {g["kind"] for g in doc["guards"]}
    assert "CLASS_ATTRS_MATCH" in kinds or "TYPE_MATCH" in kinds
    assert all(g["portable"] for g in doc["guards"])
    rebuilt = jg.compile_guard_records(jg.import_guards(doc), arg_names=entry.check.arg_names,
                                       f_globals=torch.nn.Linear.forward.__globals__)
    assert same_verdicts(entry.check, rebuilt, (torch.nn.Linear(2, 2), torch.ones(2)),
                         (MyLinear(2, 2), torch.ones(2))) == [True, False]
