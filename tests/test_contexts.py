"""Per-thread tracing state: GuardsSet, GuardsContext, hop caches, CompileContext,
TracingContext, compile_context/tracing, fake-mode detection entry points."""

from __future__ import annotations

import gc
import linecache
import threading
import traceback
from collections.abc import Callable
from typing import Any

import pytest

from jitguard import (
    AttrSource,
    CompileContext,
    CompileId,
    DuplicateInputs,
    GetItemSource,
    GlobalContext,
    Guard,
    GuardsCheckpointState,
    GuardsContext,
    GuardsSet,
    HopDispatchSetCache,
    HopSubgraphCache,
    InvokeSubgraphCache,
    LocalSource,
    ModuleContext,
    NoCompileContextError,
    NoTracingContextError,
    TraceId,
    TracingContext,
    TypeSource,
    WeakIdKeyDictionary,
    active_fake_mode,
    compile_context,
    detect_fake_mode,
    tracing,
)
from jitguard._src._util import OrderedSet

L = LocalSource


def EQUALS_MATCH(builder: Any, guard: Any) -> None:
    pass


def TYPE_MATCH(builder: Any, guard: Any) -> None:
    pass


def guard(source: Any, fn: Callable[..., Any] = EQUALS_MATCH) -> Guard:
    if isinstance(source, str):
        source = L(source)
    return Guard(source, fn)


def frame(name: str, lineno: int = 1) -> traceback.FrameSummary:
    return traceback.FrameSummary(f"{name}.py", lineno, name, lookup_line=False)


def run_in_thread(fn: Callable[[], Any]) -> Any:
    """Run fn on a new thread; return its result or re-raise its exception here."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as e:
            box["error"] = e

    t = threading.Thread(target=target)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box.get("result")


def innermost_name(g: Guard) -> str:
    assert g.stack is not None
    return g.stack.summary()[-1].name


# ---- GuardsSet -------------------------------------------------------------------------


def test_add_records_stack_and_user_stack_outside_tracing() -> None:
    """add records the framework stack (ending at the caller) and an empty user stack."""
    gs = GuardsSet()
    g = guard("x")
    gs.add(g)
    assert innermost_name(g) == "test_add_records_stack_and_user_stack_outside_tracing"
    assert isinstance(g.user_stack, traceback.StackSummary) and len(g.user_stack) == 0
    assert list(gs) == [g]


def test_add_records_user_stack_while_tracing() -> None:
    """While tracing, add records the traced user stack including the current line."""
    tc = TracingContext(None)
    with tracing(tc):
        tc.frame_summary_stack.append(frame("outer", 3))
        TracingContext.set_current_loc("inner.py", 7, "inner")
        g = guard("x")
        GuardsSet().add(g)
    assert g.user_stack is not None
    assert [(f.filename, f.lineno, f.name) for f in g.user_stack] == [
        ("outer.py", 3, "outer"),
        ("inner.py", 7, "inner"),
    ]


def test_add_keeps_existing_stacks() -> None:
    """Stacks a guard already carries are not overwritten."""
    from jitguard import CapturedStack

    g = guard("x")
    mine = CapturedStack.extract(limit=1)
    user = traceback.StackSummary.from_list([frame("mine")])
    g.stack, g.user_stack = mine, user
    with tracing(TracingContext(None)):
        TracingContext.set_current_loc("other.py", 1, "other")
        GuardsSet().add(g)
    assert g.stack is mine and g.user_stack is user


def test_add_without_debug_stack() -> None:
    """collect_debug_stack=False records no framework stack, but still the user stack."""
    g = guard("x")
    GuardsSet().add(g, collect_debug_stack=False)
    assert g.stack is None and g.user_stack is not None


def _add_via_helper(gs: GuardsSet, g: Guard) -> None:
    gs.add(g, skip=1)


def test_add_skip_drops_helper_frames() -> None:
    """skip=n attributes the guard to the caller n frames further out."""
    g = guard("x")
    _add_via_helper(GuardsSet(), g)
    assert innermost_name(g) == "test_add_skip_drops_helper_frames"


def test_add_identically_built_guard_once() -> None:
    """Adding an identically built guard twice keeps one guard (spec bug fixed)."""
    gs = GuardsSet()
    g1, g2 = guard("x"), guard("x")
    gs.add(g1)
    gs.add(g2)
    assert len(gs) == 1 and next(iter(gs)) is g1
    assert g2.stack is None, "a duplicate is not touched"


def test_add_reads_no_source_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stack capture in add reads no files; format() reads them later."""

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("linecache used while adding a guard")

    tc = TracingContext(None)
    g = guard("x")
    with tracing(tc):
        tc.frame_summary_stack.append(frame("user", 2))
        TracingContext.set_current_loc(__file__, 1, "user_fn")
        for name in ("getline", "getlines", "checkcache", "updatecache", "lazycache"):
            monkeypatch.setattr(linecache, name, boom)
        GuardsSet().add(g)
        monkeypatch.undo()
    assert g.stack is not None
    text = "".join(g.stack.format())
    assert "GuardsSet().add(g)" in text
    assert "test_add_reads_no_source_lines" in text


def test_update_adds_from_several_iterables() -> None:
    """update adds every guard of every argument, attributing them to update's caller."""
    gs = GuardsSet()
    a, b, c = guard("a"), guard("b"), guard("c")
    gs.update({a}, [b, c], [guard("a")])
    assert list(gs) == [a, b, c]
    assert innermost_name(b) == "test_update_adds_from_several_iterables"


def test_len_iter_bool_in_insertion_order() -> None:
    """GuardsSet iterates in insertion order; bool is whether it holds any guard."""
    gs = GuardsSet()
    assert not gs and len(gs) == 0
    names = ["z", "a", "m"]
    for n in names:
        gs.add(guard(n))
    assert gs and len(gs) == 3
    assert [g.name for g in gs] == [f"L['{n}']" for n in names]


def test_sub_gives_added_guards() -> None:
    """a - b is a GuardsSet of the guards in a but not in b."""
    before = GuardsSet()
    before.add(guard("x"))
    after = GuardsSet(OrderedSet(before.inner))
    after.add(guard("y"))
    after.add(guard("z"))
    delta = after - before
    assert isinstance(delta, GuardsSet)
    assert [g.name for g in delta] == ["L['y']", "L['z']"]
    assert not (before - after)


def test_remove_guards_with_source_removes_derived() -> None:
    """Removing a source drops guards on it and on every source chained from it."""
    x = L("x")
    gs = GuardsSet()
    kept = [guard("xy"), guard("y"), guard(AttrSource(L("y"), "x"))]
    dropped = [
        guard(x),
        guard(x, TYPE_MATCH),
        guard(AttrSource(x, "a")),
        guard(TypeSource(GetItemSource(AttrSource(x, "a"), 0))),
    ]
    for g in kept + dropped:
        gs.add(g)
    gs.remove_guards_with_source(L("x"))
    assert set(gs) == set(kept)
    gs.remove_guards_with_source(AttrSource(L("y"), "x"))
    assert set(gs) == {kept[0], kept[1]}


def test_get_guards_for_source_is_exact() -> None:
    """get_guards_for_source lists guards whose originating source is that source only."""
    x = L("x")
    gs = GuardsSet()
    on_x = [guard(x), guard(x, TYPE_MATCH)]
    for g in [*on_x, guard(AttrSource(x, "a")), guard("y")]:
        gs.add(g)
    assert gs.get_guards_for_source(L("x")) == on_x
    assert gs.get_guards_for_source(L("nope")) == []


def test_clear() -> None:
    """clear empties the set."""
    gs = GuardsSet()
    gs.add(guard("x"))
    gs.clear()
    assert len(gs) == 0 and list(gs) == []
    gs.add(guard("x"))
    assert len(gs) == 1


def test_guards_set_over_a_plain_set() -> None:
    """A GuardsSet may wrap a plain set and still dedupes identically built guards."""
    gs = GuardsSet({guard("x")})
    gs.add(guard("x"))
    gs.add(guard("y"))
    assert len(gs) == 2


# ---- GuardsContext ---------------------------------------------------------------------


def test_guards_context_defaults() -> None:
    """A GuardsContext starts with no guards and no env expressions."""
    gc_ = GuardsContext()
    assert isinstance(gc_.dynamo_guards, GuardsSet) and len(gc_.dynamo_guards) == 0
    assert gc_.aotautograd_guards == []
    gc_.aotautograd_guards.append(DuplicateInputs(L("a"), L("b")))
    assert GuardsContext().aotautograd_guards == []


def test_guards_context_copy_restore() -> None:
    """copy_graphstate snapshots the guards; restore_graphstate goes back to it."""
    ctx = GuardsContext()
    ctx.dynamo_guards.add(guard("x"))
    snap = ctx.copy_graphstate()
    assert isinstance(snap, GuardsCheckpointState)
    ctx.dynamo_guards.add(guard("y"))
    assert len(list(snap.dynamo_guards)) == 1, "a snapshot must not see later guards"
    assert ctx.copy_graphstate() != snap
    ctx.restore_graphstate(snap)
    assert [g.name for g in ctx.dynamo_guards] == ["L['x']"]
    assert ctx.copy_graphstate() == snap


def test_guards_context_restore_steals_snapshot() -> None:
    """Restoring takes over the snapshot's set rather than copying it."""
    ctx = GuardsContext()
    snap = GuardsCheckpointState(OrderedSet([guard("x")]))
    ctx.restore_graphstate(snap)
    assert ctx.dynamo_guards.inner is snap.dynamo_guards


def test_guards_context_restore_wrong_type() -> None:
    """Restoring something that is not a guards snapshot is an AssertionError."""
    with pytest.raises(AssertionError, match="GuardsCheckpointState"):
        GuardsContext().restore_graphstate({guard("x")})  # type: ignore[arg-type]


# ---- hop caches ------------------------------------------------------------------------


def test_invoke_subgraph_cache_submodules() -> None:
    """Installed submodules accumulate per function id; unknown ids give [] and add nothing."""
    c = InvokeSubgraphCache()
    assert isinstance(c, HopSubgraphCache)
    assert c.get_dynamo_installed_submodules(1) == []
    assert 1 not in c.dynamo_installed_submodules
    c.add_dynamo_installed_submodule(1, "sub_0")
    c.add_dynamo_installed_submodule(1, "sub_1")
    c.add_dynamo_installed_submodule(2, "sub_2")
    assert c.get_dynamo_installed_submodules(1) == ["sub_0", "sub_1"]
    assert c.get_dynamo_installed_submodules(2) == ["sub_2"]


def test_invoke_subgraph_cache_autograd_and_proxy_entries() -> None:
    """Autograd and proxy-dispatch entries are stored and found by identifier."""
    c = InvokeSubgraphCache()

    def fa() -> None: ...

    def fp() -> None: ...

    assert c.get_autograd_key_entry("s") is None and c.get_proxy_dispatch_entry("s") is None
    c.add_autograd_key_entry("s", fa)
    c.add_proxy_dispatch_entry("s", fp)
    assert c.get_autograd_key_entry("s") is fa
    assert c.get_proxy_dispatch_entry("s") is fp
    assert c.get_autograd_key_entry("t") is None
    c.add_autograd_key_entry("s", fp)
    assert c.get_autograd_key_entry("s") is fp


def test_invoke_subgraph_cache_lazy_bwd_numbering() -> None:
    """Lazy backward graphs are numbered 0, 1, ... per identifier and found by metadata."""
    c = InvokeSubgraphCache()
    g0, g1, h0 = object(), object(), object()
    assert c.add_lazy_bwd_entry("s", ("meta0",), g0) == 0
    assert c.add_lazy_bwd_entry("s", ("meta1",), g1) == 1
    assert c.add_lazy_bwd_entry("t", ("meta0",), h0) == 0
    assert c.get_lazy_bwd_entry("s", ("meta0",)) == (g0, 0)
    assert c.get_lazy_bwd_entry("s", ("meta1",)) == (g1, 1)
    assert c.get_lazy_bwd_entry("t", ("meta0",)) == (h0, 0)
    assert c.get_lazy_bwd_entry("s", ("other",)) == (None, None)
    assert c.get_lazy_bwd_entry("unknown", ("meta0",)) == (None, None)
    assert "unknown" not in c.lazy_bwd_cache


def test_hop_dispatch_set_cache_lookup() -> None:
    """get_cache finds each known op's cache and None for others; instances don't share."""
    a, b = HopDispatchSetCache(), HopDispatchSetCache()
    assert a.get_cache(object()) is None
    for op, cache in a.hop_cache_map.items():
        assert a.get_cache(op) is cache
        assert isinstance(cache, InvokeSubgraphCache)
        assert b.get_cache(op) is not cache


# ---- CompileContext --------------------------------------------------------------------


CID = CompileId(frame_id=0, frame_compile_id=1)


def test_compile_context_get_outside_raises() -> None:
    """CompileContext.get() outside compile_context raises a clear NoCompileContextError."""
    with pytest.raises(NoCompileContextError, match=r"within `with compile_context\(ctx\):`"):
        CompileContext.get()


def test_compile_context_get_on_fresh_thread_raises() -> None:
    """On a thread that never entered a compile context get() is NoCompileContextError."""
    with pytest.raises(NoCompileContextError) as info:
        run_in_thread(CompileContext.get)
    assert isinstance(info.value, RuntimeError)
    assert "try_get" in str(info.value)


def test_compile_context_get_and_try_get_inside() -> None:
    """Inside compile_context, get() and try_get() return the context; outside try_get is None."""
    assert CompileContext.try_get() is None
    ctx = CompileContext(CID)
    with compile_context(ctx) as entered:
        assert entered is ctx
        assert CompileContext.get() is ctx and CompileContext.try_get() is ctx
    assert CompileContext.try_get() is None


def test_compile_context_fields_and_validation() -> None:
    """A CompileContext starts at attempt 0 with no shape env guards; ids must be CompileIds."""
    ctx = CompileContext(CID)
    assert ctx.compile_id is CID and ctx.attempt == 0 and ctx.shape_env_guards == []
    assert CompileContext(None).compile_id is None
    with pytest.raises(AssertionError, match="CompileId"):
        CompileContext("0/1")  # type: ignore[arg-type]


def test_current_compile_id() -> None:
    """current_compile_id is the current context's id, or None."""
    assert CompileContext.current_compile_id() is None
    with compile_context(CompileContext(CID)):
        assert CompileContext.current_compile_id() is CID
    with compile_context(CompileContext(None)):
        assert CompileContext.current_compile_id() is None


def test_current_trace_id() -> None:
    """current_trace_id pairs the compile id with the current attempt, or is None."""
    assert CompileContext.current_trace_id() is None
    ctx = CompileContext(CID)
    with compile_context(ctx):
        assert CompileContext.current_trace_id() == TraceId(CID, 0)
        ctx.attempt = 2
        tid = CompileContext.current_trace_id()
        assert tid == TraceId(CID, 2) and str(tid) == "0/1_2"
    with compile_context(CompileContext(None)):
        assert CompileContext.current_trace_id() is None


def test_compile_context_nesting_and_restore_on_error() -> None:
    """Nested compile contexts restore the outer one, also when the block raises."""
    outer, inner = CompileContext(CID), CompileContext(None)
    with compile_context(outer):
        with compile_context(inner):
            assert CompileContext.get() is inner
        assert CompileContext.get() is outer
        with pytest.raises(KeyError):
            with compile_context(inner):
                raise KeyError("boom")
        assert CompileContext.get() is outer
        with compile_context(None):
            assert CompileContext.try_get() is None
        assert CompileContext.get() is outer
    assert CompileContext.try_get() is None


# ---- TracingContext: basics ------------------------------------------------------------


def test_tracing_context_get_outside_raises() -> None:
    """TracingContext.get() outside a trace raises the specification's RuntimeError."""
    with pytest.raises(RuntimeError) as info:
        TracingContext.get()
    assert isinstance(info.value, NoTracingContextError)
    assert str(info.value) == "TracingContext.get() must be called within an ongoing trace."
    assert TracingContext.try_get() is None


def test_tracing_context_fields() -> None:
    """A new TracingContext holds fresh sub-contexts and empty per-trace state."""
    fm = object()
    tc = TracingContext(fm)
    assert tc.fake_mode is fm
    assert isinstance(tc.guards_context, GuardsContext)
    assert isinstance(tc.module_context, ModuleContext)
    assert isinstance(tc.global_context, GlobalContext)
    assert isinstance(tc.hop_dispatch_set_cache, HopDispatchSetCache)
    assert isinstance(tc.tensor_to_context, WeakIdKeyDictionary)
    assert tc.frame_summary_stack == [] and tc.loc_in_frame is None
    assert tc.output_strides is None and tc.traced_code == []
    assert tc.fw_metadata is None and tc.ddp_optimizer_ctx is None and tc.aot_graph_name is None
    assert tc.params_flat is None and tc.params_flat_unwrap_subclasses is None
    assert tc.params_unwrapped_to_flat_index is None
    assert tc.force_unspec_int_unbacked_size_like is False and tc.fakify_first_call is False
    assert tc.previously_inlined_functions == {} and tc.previously_cleaned_instructions == {}
    assert TracingContext(None).guards_context is not tc.guards_context


def test_tracing_context_clear() -> None:
    """clear() forgets saved global state and the inlining caches, and nothing else."""
    tc = TracingContext(None)
    tc.global_context.global_state = {"g": (print, 1)}
    tc.previously_inlined_functions["f"] = 1
    tc.previously_cleaned_instructions["c"] = 2
    tc.guards_context.dynamo_guards.add(guard("x"))
    tc.clear()
    assert tc.global_context.global_state == {}
    assert tc.previously_inlined_functions == {} and tc.previously_cleaned_instructions == {}
    assert len(tc.guards_context.dynamo_guards) == 1


def test_patch_sets_and_restores() -> None:
    """patch sets fields for the block and restores them after, also on error."""
    tc = TracingContext(None)
    with tracing(tc):
        with TracingContext.patch(fakify_first_call=True, aot_graph_name=["g"]):
            assert tc.fakify_first_call is True and tc.aot_graph_name == ["g"]
        assert tc.fakify_first_call is False and tc.aot_graph_name is None
        with pytest.raises(ValueError):
            with TracingContext.patch(fakify_first_call=True):
                raise ValueError
        assert tc.fakify_first_call is False


def test_patch_unknown_field_changes_nothing() -> None:
    """Patching a field TracingContext lacks is an error naming it; nothing is set."""
    tc = TracingContext(None)
    with tracing(tc):
        with pytest.raises(AttributeError, match="no_such_field"):
            with TracingContext.patch(fakify_first_call=True, no_such_field=1):
                pass
        assert tc.fakify_first_call is False
        assert not hasattr(tc, "no_such_field")


def test_patch_outside_tracing_raises() -> None:
    """patch needs a current tracing context."""
    with pytest.raises(NoTracingContextError):
        with TracingContext.patch(fakify_first_call=True):
            pass


# ---- TracingContext: user stack --------------------------------------------------------


def test_extract_stack_outside_is_empty() -> None:
    """Outside a trace the user stack is an empty StackSummary."""
    s = TracingContext.extract_stack()
    assert isinstance(s, traceback.StackSummary) and len(s) == 0


def test_extract_stack_with_loc_in_frame() -> None:
    """The user stack is the frame stack plus the current location, built lazily."""
    tc = TracingContext(None)
    with tracing(tc):
        tc.frame_summary_stack.append(frame("a", 1))
        assert [f.name for f in TracingContext.extract_stack()] == ["a"]
        TracingContext.set_current_loc("b.py", 5, "b")
        assert tc.loc_in_frame == ("b.py", 5, "b")
        stack = TracingContext.extract_stack()
        assert [(f.filename, f.lineno, f.name) for f in stack] == [
            ("a.py", 1, "a"),
            ("b.py", 5, "b"),
        ]
        assert len(tc.frame_summary_stack) == 1, "extract_stack must not grow the frame stack"


def test_set_current_loc_outside_raises() -> None:
    """set_current_loc needs a current tracing context."""
    with pytest.raises(NoTracingContextError):
        TracingContext.set_current_loc("f.py", 1, "f")


def test_clear_frame_empties_and_restores() -> None:
    """clear_frame runs the block with no user stack and restores it afterwards."""
    tc = TracingContext(None)
    with tracing(tc):
        tc.frame_summary_stack.append(frame("a"))
        TracingContext.set_current_loc("b.py", 2, "b")
        with TracingContext.clear_frame():
            assert tc.frame_summary_stack == [] and tc.loc_in_frame is None
            assert len(TracingContext.extract_stack()) == 0
        assert [f.name for f in tc.frame_summary_stack] == ["a"]
        assert tc.loc_in_frame == ("b.py", 2, "b")


def test_clear_frame_attaches_none_real_stack() -> None:
    """An exception leaving clear_frame gets real_stack None; an existing one is kept."""
    tc = TracingContext(None)
    with tracing(tc):
        tc.frame_summary_stack.append(frame("a"))
        with pytest.raises(ValueError) as info:
            with TracingContext.clear_frame():
                raise ValueError("x")
        assert info.value.real_stack is None  # type: ignore[attr-defined]
        mine = traceback.StackSummary()
        err = ValueError("y")
        err.real_stack = mine  # type: ignore[attr-defined]
        with pytest.raises(ValueError) as info:
            with TracingContext.clear_frame():
                raise err
        assert info.value.real_stack is mine  # type: ignore[attr-defined]
        assert [f.name for f in tc.frame_summary_stack] == ["a"]


def test_clear_frame_outside_raises() -> None:
    """clear_frame needs a current tracing context."""
    with pytest.raises(NoTracingContextError):
        with TracingContext.clear_frame():
            pass


def test_current_frame_pushes_and_pops() -> None:
    """current_frame pushes a frame for the block and resets the location within it."""
    tc = TracingContext(None)
    with tracing(tc):
        TracingContext.set_current_loc("outer.py", 3, "outer")
        with TracingContext.current_frame(frame("f", 9)):
            assert [f.name for f in tc.frame_summary_stack] == ["f"]
            assert tc.loc_in_frame is None
            TracingContext.set_current_loc("f.py", 10, "f")
        assert tc.frame_summary_stack == []
        assert tc.loc_in_frame == ("outer.py", 3, "outer")
        with TracingContext.current_frame(None):
            assert tc.frame_summary_stack == []


def test_current_frame_attaches_real_stack() -> None:
    """An exception leaving current_frame carries the user stack where it was raised."""
    tc = TracingContext(None)
    with tracing(tc):
        with pytest.raises(ValueError) as info:
            with TracingContext.current_frame(frame("f", 9)):
                TracingContext.set_current_loc("f.py", 11, "f")
                raise ValueError("boom")
        stack = info.value.real_stack  # type: ignore[attr-defined]
        assert [(f.filename, f.lineno) for f in stack] == [("f.py", 9), ("f.py", 11)]
        assert tc.frame_summary_stack == [] and tc.loc_in_frame is None


def test_current_frame_none_still_attaches() -> None:
    """current_frame(None) pushes nothing but still attaches real_stack."""
    tc = TracingContext(None)
    with tracing(tc):
        tc.frame_summary_stack.append(frame("a"))
        with pytest.raises(KeyError) as info:
            with TracingContext.current_frame(None):
                raise KeyError
        assert [f.name for f in info.value.real_stack] == ["a"]  # type: ignore[attr-defined]


def test_current_frame_inside_clear_frame_keeps_inner_stack() -> None:
    """clear_frame keeps a real_stack that an inner current_frame attached."""
    tc = TracingContext(None)
    with tracing(tc):
        tc.frame_summary_stack.append(frame("outer"))
        with pytest.raises(ValueError) as info:
            with TracingContext.clear_frame():
                with TracingContext.current_frame(frame("inner")):
                    raise ValueError
        assert [f.name for f in info.value.real_stack] == ["inner"]  # type: ignore[attr-defined]


def test_report_output_strides() -> None:
    """report_output_strides yields a fresh list inside a trace and restores the old value."""
    with TracingContext.report_output_strides() as strides:
        assert strides is None
    tc = TracingContext(None)
    tc.output_strides = [(9,)]
    with tracing(tc):
        with TracingContext.report_output_strides() as strides:
            assert strides == [] and strides is tc.output_strides
            strides.append((1, 2))
        assert tc.output_strides == [(9,)]
        with pytest.raises(ValueError):
            with TracingContext.report_output_strides():
                raise ValueError
        assert tc.output_strides == [(9,)]


def test_get_traced_code() -> None:
    """get_traced_code is the current trace's code list, or None outside."""
    assert TracingContext.get_traced_code() is None
    tc = TracingContext(None)
    with tracing(tc):
        code_list = TracingContext.get_traced_code()
        assert code_list is tc.traced_code
        assert code_list is not None
        code_list.append(test_get_traced_code.__code__)
    assert tc.traced_code == [test_get_traced_code.__code__]


# ---- tracing() -------------------------------------------------------------------------


def test_tracing_nesting_and_restore() -> None:
    """tracing installs its context for the block and restores the outer one, even on error."""
    outer, inner = TracingContext(None), TracingContext(None)
    with tracing(outer) as entered:
        assert entered is outer and TracingContext.get() is outer
        with tracing(inner):
            assert TracingContext.get() is inner
        assert TracingContext.get() is outer
        with pytest.raises(ValueError):
            with tracing(inner):
                raise ValueError
        assert TracingContext.get() is outer
        with tracing(None):
            assert TracingContext.try_get() is None
        assert TracingContext.get() is outer
    assert TracingContext.try_get() is None


def test_tracing_attaches_real_stack() -> None:
    """An exception leaving tracing() carries the trace's user stack; an existing one stays."""
    tc = TracingContext(None)
    with pytest.raises(ValueError) as info:
        with tracing(tc):
            tc.frame_summary_stack.append(frame("user", 4))
            TracingContext.set_current_loc("user.py", 5, "user")
            raise ValueError
    stack = info.value.real_stack  # type: ignore[attr-defined]
    assert [(f.name, f.lineno) for f in stack] == [("user", 4), ("user", 5)]
    err = ValueError()
    err.real_stack = "kept"  # type: ignore[attr-defined]
    with pytest.raises(ValueError) as info:
        with tracing(TracingContext(None)):
            raise err
    assert info.value.real_stack == "kept"  # type: ignore[attr-defined]


def test_tracing_none_attaches_nothing() -> None:
    """tracing(None) attaches no real_stack."""
    with pytest.raises(ValueError) as info:
        with tracing(None):
            raise ValueError
    assert not hasattr(info.value, "real_stack")


class ShapeEnv:
    def __init__(self) -> None:
        self.cleanups = 0

    def cleanup(self) -> None:
        self.cleanups += 1


class DummyFakeMode:
    def __init__(self, shape_env: Any) -> None:
        self.shape_env = shape_env


def test_tracing_cleans_up_shape_env_on_exit() -> None:
    """Leaving tracing() calls the fake mode's shape_env.cleanup(), also on error."""
    env = ShapeEnv()
    tc = TracingContext(DummyFakeMode(env))
    with tracing(tc):
        assert env.cleanups == 0
    assert env.cleanups == 1
    with pytest.raises(RuntimeError):
        with tracing(tc):
            raise RuntimeError
    assert env.cleanups == 2


def test_tracing_without_shape_env_is_fine() -> None:
    """A fake mode without a shape env (or without the attribute) needs no cleanup."""
    with tracing(TracingContext(DummyFakeMode(None))):
        pass
    with tracing(TracingContext(object())):
        pass
    assert TracingContext.try_get() is None


# ---- threads ---------------------------------------------------------------------------


def test_contexts_are_invisible_to_other_threads() -> None:
    """A context entered on one thread is not seen from another."""
    tc, cc = TracingContext(None), CompileContext(CID)
    with tracing(tc), compile_context(cc):
        seen = run_in_thread(lambda: (TracingContext.try_get(), CompileContext.try_get()))
        assert seen == (None, None)
        assert TracingContext.get() is tc and CompileContext.get() is cc


def test_thread_context_does_not_leak_to_main() -> None:
    """A context a worker thread holds open is not visible on the main thread."""
    entered, release = threading.Event(), threading.Event()
    seen: list[Any] = []

    def worker() -> None:
        with tracing(TracingContext(None)), compile_context(CompileContext(CID)):
            seen.append(TracingContext.try_get())
            entered.set()
            release.wait(10)

    t = threading.Thread(target=worker)
    t.start()
    try:
        assert entered.wait(10)
        assert seen[0] is not None
        assert TracingContext.try_get() is None and CompileContext.try_get() is None
    finally:
        release.set()
        t.join()


def test_threads_trace_independently() -> None:
    """Several threads each see only their own tracing context."""
    barrier = threading.Barrier(4)
    results: dict[int, bool] = {}

    def worker(i: int) -> None:
        tc = TracingContext(None)
        with tracing(tc):
            barrier.wait(10)
            results[i] = TracingContext.get() is tc
            barrier.wait(10)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {0: True, 1: True, 2: True, 3: True}


# ---- fake-mode entry points (torch-independent parts) ----------------------------------


def test_detect_fake_mode_prefers_tracing_context() -> None:
    """Inside a trace with a fake mode, detect_fake_mode returns it; outside, None."""
    assert detect_fake_mode() is None
    fm = DummyFakeMode(None)
    with tracing(TracingContext(fm)):
        assert detect_fake_mode() is fm
        assert detect_fake_mode([1, 2]) is fm
    with tracing(TracingContext(None)):
        assert detect_fake_mode() is None


def test_active_fake_mode_none_without_one() -> None:
    """With no fake mode active, active_fake_mode is None, even inside a trace."""
    assert active_fake_mode() is None
    with tracing(TracingContext(DummyFakeMode(None))):
        assert active_fake_mode() is None


def test_tensor_to_context_keys_by_identity() -> None:
    """tensor_to_context is keyed by identity and drops dead keys."""
    tc = TracingContext(None)

    class T:
        def __eq__(self, other: object) -> bool:
            raise RuntimeError("ambiguous")

        __hash__ = None  # type: ignore[assignment]

    t = T()
    tc.tensor_to_context[t] = "ctx"
    assert tc.tensor_to_context[t] == "ctx"
    del t
    gc.collect()
    assert len(tc.tensor_to_context) == 0
