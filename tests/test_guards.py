"""The guard data model: GuardSource, SLoc, ShapeGuard, Guard, GuardEnvExpr, Source bases."""

from __future__ import annotations

import dataclasses
import functools
import gc
import logging
import traceback
import weakref
from typing import Any

import pytest

import jitguard
from jitguard import (
    AttrSource,
    ChainedSource,
    ConstantSource,
    DuplicateInputs,
    FSDPNNModuleSource,
    GetItemSource,
    GlobalSource,
    GlobalStateSource,
    Guard,
    GuardBuilderBase,
    GuardEnvExpr,
    GuardSource,
    LocalSource,
    NNModuleSource,
    ShapeGuard,
    SLoc,
    Source,
    StorageOverlap,
    SyntheticLocalSource,
    TypeSource,
)
from jitguard._src.guards import RELATIONAL_ATTR
from jitguard._src.stacks import CapturedStack

# ---- create functions used as guard kinds ----------------------------------------------


def EQUALS_MATCH(builder: Any, guard: Guard) -> None:
    builder.calls.append(("EQUALS_MATCH", guard))


def TYPE_MATCH(builder: Any, guard: Guard) -> None:
    builder.calls.append(("TYPE_MATCH", guard))


def DUPLICATE_INPUT(builder: Any, guard: Guard, other: Any = None) -> None:
    builder.calls.append(("DUPLICATE_INPUT", guard))


setattr(DUPLICATE_INPUT, RELATIONAL_ATTR, True)


def BROKEN(builder: Any, guard: Guard) -> None:
    raise ValueError("cannot build this guard")


class Builder(GuardBuilderBase):
    def __init__(self) -> None:
        self.calls: list[tuple[str, Guard]] = []


class CallableKind:
    """A create_fn that is an object: no __name__, no __code__."""

    def __call__(self, builder: Any, guard: Guard) -> None:
        pass

    def __repr__(self) -> str:
        return "<CallableKind>"


L = LocalSource
X = L("x")


# ---- GuardSource -----------------------------------------------------------------------


def test_guard_source_members_and_values() -> None:
    """GuardSource has exactly the specification's 16 members with its values."""
    assert {m.name: m.value for m in GuardSource} == {
        "LOCAL": 0,
        "GLOBAL": 1,
        "LOCAL_SPECIALIZED_NN_MODULE": 2,
        "GLOBAL_SPECIALIZED_NN_MODULE": 3,
        "CONSTANT": 4,
        "RANDOM_VALUE": 5,
        "SHAPE_ENV": 6,
        "LOCAL_FSDP_MODULE": 7,
        "GLOBAL_FSDP_MODULE": 8,
        "BACKWARD_STATE": 9,
        "EPHEMERAL": 10,
        "SYNTHETIC_LOCAL": 11,
        "LOCAL_UNSPECIALIZED_NN_MODULE": 12,
        "GLOBAL_UNSPECIALIZED_NN_MODULE": 13,
        "LOCAL_UNSPECIALIZED_BUILTIN_NN_MODULE": 14,
        "GLOBAL_UNSPECIALIZED_BUILTIN_NN_MODULE": 15,
    }


G_ = GuardSource
FSDP = {G_.LOCAL_FSDP_MODULE, G_.GLOBAL_FSDP_MODULE}
SPECIALIZED = {G_.LOCAL_SPECIALIZED_NN_MODULE, G_.GLOBAL_SPECIALIZED_NN_MODULE}
UNSPEC_BUILTIN = {
    G_.LOCAL_UNSPECIALIZED_BUILTIN_NN_MODULE,
    G_.GLOBAL_UNSPECIALIZED_BUILTIN_NN_MODULE,
}
UNSPEC = UNSPEC_BUILTIN | {G_.LOCAL_UNSPECIALIZED_NN_MODULE, G_.GLOBAL_UNSPECIALIZED_NN_MODULE}
LOCALS = {
    G_.LOCAL,
    G_.LOCAL_SPECIALIZED_NN_MODULE,
    G_.LOCAL_FSDP_MODULE,
    G_.LOCAL_UNSPECIALIZED_NN_MODULE,
    G_.LOCAL_UNSPECIALIZED_BUILTIN_NN_MODULE,
}


@pytest.mark.parametrize(
    ("predicate", "expected"),
    [
        ("is_fsdp_module", FSDP),
        ("is_specialized_nn_module", SPECIALIZED),
        ("is_unspecialized_nn_module", UNSPEC),
        ("is_unspecialized_builtin_nn_module", UNSPEC_BUILTIN),
        ("is_local", LOCALS),
    ],
)
def test_guard_source_predicates(predicate: str, expected: set[GuardSource]) -> None:
    """Each GuardSource predicate is true exactly on the specification's members."""
    assert {m for m in GuardSource if getattr(m, predicate)()} == expected


def test_is_specialized_nn_module_counts_fsdp_under_unsafe_flag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With config.unsafe_skip_fsdp_module_guards, FSDP modules count as specialized too."""
    monkeypatch.setattr(jitguard.config, "unsafe_skip_fsdp_module_guards", True)
    assert {m for m in GuardSource if m.is_specialized_nn_module()} == SPECIALIZED | FSDP
    monkeypatch.setattr(jitguard.config, "unsafe_skip_fsdp_module_guards", False)
    assert {m for m in GuardSource if m.is_specialized_nn_module()} == SPECIALIZED


def test_config_flag_defaults_off_and_repr() -> None:
    """The unsafe FSDP flag is off by default and shown in config's repr."""
    assert jitguard.config.unsafe_skip_fsdp_module_guards is False
    assert "unsafe_skip_fsdp_module_guards" in repr(jitguard.config)


# ---- SLoc / ShapeGuard -----------------------------------------------------------------


def test_sloc_str_with_user_and_string_framework_loc() -> None:
    """SLoc prints 'user (framework)'."""
    assert str(SLoc("fw.py:1", "user.py:2")) == "user.py:2 (fw.py:1)"


def test_sloc_str_without_user_loc() -> None:
    """Without a user location SLoc prints '(framework)'."""
    assert str(SLoc("fw.py:1", None)) == "(fw.py:1)"


def test_sloc_str_both_none() -> None:
    """With neither location SLoc prints '()'."""
    assert str(SLoc(None, None)) == "()"


def test_sloc_str_frame_summary() -> None:
    """A FrameSummary framework location prints as 'file:line in name'."""
    fs = traceback.FrameSummary("fw.py", 7, "trace", lookup_line=False)
    assert str(SLoc(fs, "u.py:3")) == "u.py:3 (fw.py:7 in trace)"


def test_sloc_frozen() -> None:
    """SLoc is immutable and compares by value."""
    s = SLoc("a", "b")
    assert s == SLoc("a", "b") and hash(s) == hash(SLoc("a", "b"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.maybe_user_loc = "c"  # type: ignore[misc]


def test_shape_guard_fields() -> None:
    """ShapeGuard is a named tuple (expr, sloc, size_oblivious)."""
    sg = ShapeGuard("s0 > 1", SLoc(None, None), True)
    assert sg._fields == ("expr", "sloc", "size_oblivious")
    assert sg.expr == "s0 > 1" and sg.size_oblivious is True


# ---- Guard: identity -------------------------------------------------------------------


def test_identically_built_guards_equal_before_and_after_hashing() -> None:
    """Equality agrees with the hash whether or not either guard has been hashed (spec bug)."""
    g1, g2 = Guard(L("x"), EQUALS_MATCH), Guard(L("x"), EQUALS_MATCH)
    assert g1 == g2
    hash(g1)
    assert g1 == g2 and g2 == g1
    hash(g2)
    assert g1 == g2 and hash(g1) == hash(g2)


def test_equal_guards_ignore_stacks_and_export_info() -> None:
    """Captured stacks and export info do not take part in a guard's identity."""
    g1, g2 = Guard(L("x"), EQUALS_MATCH), Guard(L("x"), EQUALS_MATCH)
    g1.stack = CapturedStack.extract()
    g1.user_stack = traceback.StackSummary.from_list([("u.py", 1, "f", "x")])
    g2.set_export_info("EQUALS", None, ["x == 1"], None)
    assert g1 == g2 and hash(g1) == hash(g2)


def test_set_of_identically_built_guards_holds_one() -> None:
    """A set never holds two identically built guards."""
    guards = {Guard(L("x"), EQUALS_MATCH) for _ in range(5)}
    assert len(guards) == 1


def test_guards_differ_by_create_fn_name_and_guard_source() -> None:
    """Guards differ when their create_fn, name or guard source differ."""
    base = Guard(L("m"), EQUALS_MATCH)
    assert base != Guard(L("m"), TYPE_MATCH)
    assert base != Guard(L("n"), EQUALS_MATCH)
    relabelled = Guard(NNModuleSource(L("m")), EQUALS_MATCH)
    assert relabelled.name == base.name
    assert base != relabelled
    assert len({base, relabelled}) == 2


def test_source_metadata_does_not_split_guards() -> None:
    """LocalSource's is_input is metadata: guards on x with and without it are equal."""
    assert Guard(L("x"), EQUALS_MATCH) == Guard(L("x", is_input=True), EQUALS_MATCH)


def test_partial_create_fns_with_equal_args_are_one_kind() -> None:
    """Two partials of one function with equal arguments make equal guards; others differ."""
    a = Guard(X, functools.partial(EQUALS_MATCH, k=1))
    b = Guard(X, functools.partial(EQUALS_MATCH, k=1))
    c = Guard(X, functools.partial(EQUALS_MATCH, k=2))
    assert a == b and hash(a) == hash(b)
    assert a != c
    assert a != Guard(X, EQUALS_MATCH)


def test_partial_with_unhashable_args_keys_on_identity() -> None:
    """A partial with unhashable arguments is its own kind: equal only to itself."""
    p = functools.partial(EQUALS_MATCH, [1])
    assert Guard(X, p) == Guard(X, p)
    assert Guard(X, p) != Guard(X, functools.partial(EQUALS_MATCH, [1]))


def test_guard_eq_with_non_guard() -> None:
    """A guard never equals a non-guard."""
    g = Guard(X, EQUALS_MATCH)
    assert g != "L['x']"
    assert g.__eq__(1) is NotImplemented


# ---- Guard: ordering and create_fn -----------------------------------------------------


def test_sort_key_fields() -> None:
    """sort_key is (relational, source value, len(name), name, create_fn first line)."""
    assert RELATIONAL_ATTR == "__jitguard_relational__"
    assert Guard(L("a"), DUPLICATE_INPUT).sort_key()[0] is True
    g = Guard(GlobalSource("cfg"), TYPE_MATCH)
    assert g.sort_key() == (
        False,
        1,
        len("G['cfg']"),
        "G['cfg']",
        TYPE_MATCH.__code__.co_firstlineno,
    )


def test_sorting_puts_relational_last_then_source_then_name() -> None:
    """Sorting orders by guard source, name length, name, line; relational kinds go last."""
    dup = Guard(L("a"), functools.partial(DUPLICATE_INPUT, other=L("b")))
    dup_plain = Guard(L("a"), DUPLICATE_INPUT)
    g_global = Guard(GlobalSource("a"), EQUALS_MATCH)
    g_long = Guard(L("abc"), EQUALS_MATCH)
    g_b = Guard(L("b"), EQUALS_MATCH)
    g_a_eq = Guard(L("a"), EQUALS_MATCH)
    g_a_type = Guard(L("a"), TYPE_MATCH)
    ordered = sorted([dup, g_global, g_long, dup_plain, g_b, g_a_type, g_a_eq])
    assert ordered[:5] == [g_a_eq, g_a_type, g_b, g_long, g_global]
    assert set(ordered[5:]) == {dup, dup_plain}
    assert g_a_eq < g_a_type  # EQUALS_MATCH is defined on an earlier line
    assert not (dup < g_global)


def test_sort_key_of_create_fn_without_code() -> None:
    """A create_fn with no __code__ sorts with line 0 and is shown by repr."""
    g = Guard(X, CallableKind())
    assert g.sort_key()[-1] == 0
    assert str(g) == "<CallableKind> on L['x'] (local)"


def test_inner_create_fn_and_name_with_partial() -> None:
    """inner_create_fn/create_fn_name see through functools.partial."""
    p = functools.partial(DUPLICATE_INPUT, other=L("b"))
    g = Guard(X, p)
    assert g.create_fn is p
    assert g.inner_create_fn() is DUPLICATE_INPUT
    assert g.create_fn_name() == "DUPLICATE_INPUT"
    plain = Guard(X, TYPE_MATCH)
    assert plain.inner_create_fn() is TYPE_MATCH and plain.create_fn_name() == "TYPE_MATCH"


def test_name_and_source_properties() -> None:
    """Guard.name is its source's name(); Guard.source its guard_source()."""
    src = AttrSource(GlobalSource("cfg"), "lr")
    g = Guard(src, EQUALS_MATCH)
    assert g.name == "G['cfg'].lr"
    assert g.source is GuardSource.GLOBAL
    assert g.originating_source is src


def test_guard_predicates_follow_source() -> None:
    """is_local/is_fsdp_module/is_specialized_nn_module delegate to the guard source."""
    local = Guard(X, EQUALS_MATCH)
    assert local.is_local() and not local.is_fsdp_module() and not local.is_specialized_nn_module()
    fsdp = Guard(FSDPNNModuleSource(GlobalSource("m")), EQUALS_MATCH)
    assert fsdp.is_fsdp_module() and not fsdp.is_local() and not fsdp.is_specialized_nn_module()
    nn = Guard(NNModuleSource(L("m")), EQUALS_MATCH)
    assert nn.is_specialized_nn_module() and nn.is_local()


# ---- Guard.create ----------------------------------------------------------------------


def test_create_calls_create_fn_with_builder_and_guard() -> None:
    """create(builder) calls create_fn(builder, guard) and returns its result."""
    b = Builder()
    g = Guard(X, EQUALS_MATCH)
    assert g.create(b) is None
    assert b.calls == [("EQUALS_MATCH", g)]
    assert Guard(X, lambda builder, guard: ("built", guard.name)).create(b) == ("built", "L['x']")


def test_create_logs_and_reraises_without_stack(caplog: pytest.LogCaptureFixture) -> None:
    """A failing create_fn is logged (DEBUG) with the guard text and the error is re-raised;
    at the default levels nothing is logged, so nothing reaches stderr."""
    g = Guard(X, BROKEN)
    with caplog.at_level(logging.INFO, logger="jitguard.guards"):
        with pytest.raises(ValueError, match="cannot build this guard"):
            g.create(Builder())
    assert caplog.records == []
    with caplog.at_level(logging.DEBUG, logger="jitguard.guards"):
        with pytest.raises(ValueError, match="cannot build this guard"):
            g.create(Builder())
    assert len(caplog.records) == 1
    rec = caplog.records[0]
    assert rec.getMessage() == "Error while creating guard BROKEN on L['x'] (local)"
    assert rec.exc_info is not None and rec.exc_info[0] is ValueError


def test_create_logs_where_the_guard_was_created(caplog: pytest.LogCaptureFixture) -> None:
    """With a captured stack the log also says where the guard was created."""
    g = Guard(X, BROKEN)
    g.stack = CapturedStack.extract()
    with caplog.at_level(logging.DEBUG, logger="jitguard.guards"):
        with pytest.raises(ValueError):
            g.create(Builder())
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert messages[1].startswith("Created at:\n")
    assert "test_create_logs_where_the_guard_was_created" in messages[1]


# ---- Guard.set_export_info -------------------------------------------------------------


class Thing:
    pass


def test_set_export_info_accumulates() -> None:
    """Repeated export info accumulates guard types and code, keeping class and object."""
    g = Guard(X, EQUALS_MATCH)
    obj = Thing()
    cls_ref = weakref.ref(Thing)
    obj_ref = weakref.ref(obj)
    first = ["x.a == 1"]
    g.set_export_info("EQUALS_MATCH", cls_ref, first, obj_ref)
    g.set_export_info("TYPE_MATCH", cls_ref, ["type(x) is T"], obj_ref)
    assert g.guard_types == ["EQUALS_MATCH", "TYPE_MATCH"]
    assert g.code_list == ["x.a == 1", "type(x) is T"]
    assert first == ["x.a == 1"], "the caller's list must not be extended"
    assert g.guarded_class_weakref is cls_ref
    assert g.obj_weakref is obj_ref


def test_set_export_info_class_mismatch_raises() -> None:
    """A different guarded class on a second call is an AssertionError."""
    g = Guard(X, EQUALS_MATCH)
    g.set_export_info("A", weakref.ref(Thing), [], None)
    with pytest.raises(AssertionError, match="Guarded class id must be identical, or None"):
        g.set_export_info("B", weakref.ref(Builder), [], None)


def test_set_export_info_object_mismatch_raises() -> None:
    """A different live guarded object on a second call is an AssertionError."""
    g = Guard(X, EQUALS_MATCH)
    a, b = Thing(), Thing()
    g.set_export_info("A", None, [], weakref.ref(a))
    with pytest.raises(AssertionError, match="Guarded object must be identical, None or ephemeral"):
        g.set_export_info("B", None, [], weakref.ref(b))


def test_set_export_info_dead_weakref_may_be_replaced() -> None:
    """A guarded object whose weakref died meanwhile may be replaced (ephemeral values)."""
    g = Guard(X, EQUALS_MATCH)
    a = Thing()
    g.set_export_info("A", None, [], weakref.ref(a))
    del a
    gc.collect()
    b = Thing()
    new_ref = weakref.ref(b)
    g.set_export_info("B", None, [], new_ref)
    assert g.obj_weakref is new_ref


def test_set_export_info_none_then_value() -> None:
    """An unset class or object accepts any value."""
    g = Guard(X, EQUALS_MATCH)
    g.set_export_info("A", None, [], None)
    ref = weakref.ref(Thing)
    g.set_export_info("B", ref, [], ref)
    assert g.guarded_class_weakref is ref and g.obj_weakref is ref


# ---- Guard: text -----------------------------------------------------------------------


class HostileConfig(dict):  # type: ignore[type-arg]
    """Maps attributes to keys; records every attribute lookup it is asked for."""

    looked_up: list[str] = []

    def __getattr__(self, name: str) -> Any:
        HostileConfig.looked_up.append(name)
        return self[name]


def test_weakref_to_str_live() -> None:
    """A live weakref prints with the referent's class name and address."""
    obj = Thing()
    ref = weakref.ref(obj)
    assert Guard.weakref_to_str(ref) == f"<weakref at {hex(id(ref))}; to 'Thing' at {hex(id(obj))}>"


def test_weakref_to_str_hostile_getattr() -> None:
    """A dict subclass whose __getattr__ raises KeyError prints without calling it."""
    HostileConfig.looked_up.clear()
    obj = HostileConfig(offset=5)
    ref = weakref.ref(obj)
    text = Guard.weakref_to_str(ref)
    assert text == f"<weakref at {hex(id(ref))}; to 'HostileConfig' at {hex(id(obj))}>"
    assert HostileConfig.looked_up == []


def test_weakref_to_str_dead() -> None:
    """A dead weakref prints as dead."""
    obj = Thing()
    ref = weakref.ref(obj)
    del obj
    gc.collect()
    assert Guard.weakref_to_str(ref) == f"<weakref at {hex(id(ref))}; dead>"


def test_weakref_to_str_non_weakref() -> None:
    """Anything else prints with str()."""
    assert Guard.weakref_to_str(None) == "None"
    assert Guard.weakref_to_str("plain") == "plain"


def test_guard_str_content() -> None:
    """str(guard) is one readable line: kind, source and guard source."""
    g = Guard(X, EQUALS_MATCH)
    assert str(g) == "EQUALS_MATCH on L['x'] (local)"
    assert str(Guard(GlobalStateSource(), EQUALS_MATCH)) == "EQUALS_MATCH (global)"


def test_guard_str_and_repr_with_export_info() -> None:
    """str adds the check's text once built; repr is one line with every field, the
    create_fn behind a partial and a hostile weakref."""
    obj = HostileConfig(a=1)
    ref = weakref.ref(obj)
    g = Guard(GlobalSource("cfg"), functools.partial(TYPE_MATCH))
    g.set_export_info("TYPE_MATCH", None, ["___check_type_id(G['cfg'], 1)"], ref)
    assert str(g) == "TYPE_MATCH on G['cfg'] (global): ___check_type_id(G['cfg'], 1)"
    r = repr(g)
    assert "\n" not in r
    assert r == (
        "Guard(name=\"G['cfg']\", source=global, create_fn=TYPE_MATCH, "
        "guard_types=['TYPE_MATCH'], code=[\"___check_type_id(G['cfg'], 1)\"], "
        f"obj_weakref=<weakref at {hex(id(ref))}; to 'HostileConfig' at {hex(id(obj))}>, "
        "guarded_class=None)"
    )


# ---- GuardEnvExpr ----------------------------------------------------------------------


def test_duplicate_inputs_needs_two_sources() -> None:
    """DuplicateInputs of one source (or two equal ones) is an AssertionError."""
    with pytest.raises(AssertionError, match="two different sources"):
        DuplicateInputs(L("a"), L("a"))
    with pytest.raises(AssertionError):
        DuplicateInputs(L("a"), L("a", is_input=True))
    d = DuplicateInputs(L("a"), L("b"))
    assert isinstance(d, GuardEnvExpr)
    assert (d.input_source_a, d.input_source_b) == (L("a"), L("b"))


def test_guard_env_exprs_are_frozen() -> None:
    """GuardEnvExpr subclasses are frozen dataclasses."""
    d = DuplicateInputs(L("a"), L("b"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.input_source_a = L("c")  # type: ignore[misc]
    so = StorageOverlap([L("a")], [L("b")])
    assert so.overlapping_sources == [L("a")] and so.non_overlapping_sources == [L("b")]
    assert isinstance(so, GuardEnvExpr)
    with pytest.raises(dataclasses.FrozenInstanceError):
        so.overlapping_sources = []  # type: ignore[misc]


# ---- Source / ChainedSource bases ------------------------------------------------------


def test_source_base_methods_are_abstract() -> None:
    """The base Source says nothing: name, guard_source, reconstruct, get_value all raise."""
    s = Source()
    for call in (s.name, s.guard_source, lambda: s.reconstruct(None), lambda: s.get_value({}, {})):
        with pytest.raises(NotImplementedError):
            call()
    assert s.is_dict_key() is False and s.is_ephemeral() is False


def test_chained_source_base_access_is_abstract() -> None:
    """A bare ChainedSource takes its base's guard source but cannot read a value."""
    c = ChainedSource(GlobalSource("g"))
    assert c.guard_source() is GuardSource.GLOBAL
    with pytest.raises(NotImplementedError):
        c.get_value({}, {"g": 1})


def test_make_guard_builds_a_guard() -> None:
    """make_guard returns a Guard on the source with the given create_fn."""
    g = AttrSource(X, "a").make_guard(EQUALS_MATCH)
    assert isinstance(g, Guard)
    assert g.originating_source == AttrSource(X, "a") and g.create_fn is EQUALS_MATCH


def test_make_guard_on_constant_is_not_implemented() -> None:
    """A constant source (or anything chained on it) cannot be guarded."""
    with pytest.raises(NotImplementedError):
        ConstantSource("c").make_guard(EQUALS_MATCH)
    with pytest.raises(NotImplementedError):
        AttrSource(ConstantSource("c"), "a").make_guard(EQUALS_MATCH)


def test_subguards_allowed_and_specialized() -> None:
    """subguards_allowed is False only for synthetic locals; is_specialized follows the source."""
    assert X.subguards_allowed() is True
    assert SyntheticLocalSource("s").subguards_allowed() is False
    assert NNModuleSource(X).is_specialized_nn_module() is True
    assert X.is_specialized_nn_module() is False


def test_get_base_walks_the_chain() -> None:
    """get_base returns the root of a chain of sources."""
    root = GlobalSource("g")
    chain = TypeSource(GetItemSource(AttrSource(root, "a"), 0))
    assert chain.get_base() is root


def test_chain_walks_bases_once() -> None:
    """chain() is the source, then each base down to the root; derived-from is membership."""
    root = L("x")
    a = AttrSource(root, "a")
    deep = GetItemSource(a, 0)
    assert root.chain() == (root,)
    assert deep.chain() == (deep, a, root)
    assert AttrSource(L("x"), "a") in deep.chain() and root in a.chain()
    assert a not in root.chain() and L("y") not in deep.chain()
    assert a not in AttrSource(L("y"), "a").chain()
    assert NNModuleSource(deep).chain()[1:] == deep.chain()


def test_set_export_info_compares_weakrefs_by_identity_not_eq() -> None:
    """Re-recording export info for the same object never calls its __eq__ (tensors'
    elementwise == would raise); a different live object is still rejected."""
    class Hostile:
        def __eq__(self, other: object) -> bool:
            raise RuntimeError("ambiguous")

        __hash__ = object.__hash__

    obj, other = Hostile(), Hostile()
    g = Guard(L("x"), EQUALS_MATCH)
    g.set_export_info("ID_MATCH", None, ["a"], weakref.ref(obj, lambda r: None))
    g.set_export_info("ID_MATCH", None, ["b"], weakref.ref(obj, lambda r: None))
    assert g.code_list == ["a", "b"]
    with pytest.raises(AssertionError, match="Guarded object must be identical"):
        g.set_export_info("ID_MATCH", None, ["c"], weakref.ref(other))


def test_make_guard_takes_a_kind_not_its_name() -> None:
    """make_guard('EQUALS_MATCH') is a TypeError at the call, saying what to write."""
    import jitguard as jg

    with pytest.raises(TypeError, match=r"make_guard takes a guard kind such as "
                       r"GuardBuilder\.EQUALS_MATCH, got str 'EQUALS_MATCH' \(write "
                       r"GuardBuilder\.EQUALS_MATCH\)"):
        jg.LocalSource("n").make_guard("EQUALS_MATCH")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"got int 3$"):
        jg.LocalSource("n").make_guard(3)  # type: ignore[arg-type]


def test_guard_needs_a_source_and_compiling_needs_a_create_fn() -> None:
    """Guard('x', kind) is a TypeError at the call; a create_fn that is not callable (the
    specification's Guard takes any object) is one when the guards compile."""
    from jitguard import compile_guards

    with pytest.raises(TypeError, match=r"Guard needs a Source as originating_source "
                       r"\(LocalSource\('x'\).*got str 'x'"):
        Guard("x", EQUALS_MATCH)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"the guard on \"L\['x'\]\" needs a create_fn such as "
                       r"GuardBuilder\.EQUALS_MATCH, got str 'EQUALS_MATCH' \(write "
                       r"GuardBuilder\.EQUALS_MATCH\)"):
        compile_guards([Guard(L("x"), "EQUALS_MATCH")],  # type: ignore[arg-type]
                       f_locals={"x": 1})
    with pytest.raises(TypeError, match=r"got NoneType None$"):
        compile_guards([Guard(L("x"), None)], f_locals={"x": 1})  # type: ignore[arg-type]
    assert Guard(L("x"), EQUALS_MATCH).name == "L['x']"
