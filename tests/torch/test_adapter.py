"""One test per torch internal that jitguard/_src/torch/adapter.py and its siblings
adapter_stored.py and adapter_runtime.py rely on (adapter_sources.py has its own file): a
torch upgrade that moves one fails here, by name."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from _helpers import counting_mode  # noqa: E402
from jitguard._src.torch import adapter, adapter_graphs, adapter_runtime, adapter_stored  # noqa: E402

SCALE = 2.0


def _f(x: Any, n: int) -> Any:
    return x.sin() * SCALE + n


def _capture(keep_all: bool = True, full: bool = False) -> adapter.Captured:
    return adapter.capture(_f, (torch.ones(3), 1), {}, adapter.resolve_backend("eager"),
                           lambda es: [keep_all] * len(es), full_tree=full)


def test_backend_lookup() -> None:
    """Backends resolve by name (torch's registry) or pass through when callable."""
    assert callable(adapter.resolve_backend("eager"))
    assert callable(adapter.resolve_backend("aot_eager"))

    def mine(gm: Any, example_inputs: Any) -> Any:
        return gm

    assert adapter.resolve_backend(mine) is mine
    assert adapter.backend_name("eager") == "eager" and adapter.backend_name(mine) == "mine"
    with pytest.raises(TypeError, match="backend must be"):
        adapter.resolve_backend(3)


def test_stance_is_read() -> None:
    """torch.compiler.set_stance is visible through adapter.stance()."""
    assert adapter.stance() == "default"
    with torch.compiler.set_stance("force_eager"):
        assert adapter.stance() == "force_eager"
    assert adapter.stance() == "default"


def test_config_knobs_are_read() -> None:
    """Both recompile limits and fail_on_recompile_limit_hit follow torch._dynamo.config."""
    with torch._dynamo.config.patch(recompile_limit=3, fail_on_recompile_limit_hit=True):
        assert adapter.recompile_limit() == 3
        assert adapter.fail_on_recompile_limit_hit() is True
    with torch._dynamo.config.patch(accumulated_recompile_limit=5):
        assert adapter.accumulated_recompile_limit() == 5
    assert adapter.fail_on_recompile_limit_hit() is False


def test_capture_gives_guards_program_and_tree() -> None:
    """fullgraph_capture + build_guards(save=False): every guard reaches the filter, the
    program runs the graph over live globals, and torch's tree checks the kept guards."""
    global SCALE
    cap = _capture()
    kinds = {e.guard_type for e in cap.entries}
    assert {"TENSOR_MATCH", "CONSTANT_MATCH"} <= kinds
    assert all(cap.kept) and cap.tree is not None and cap.graph_module is not None
    x = torch.ones(3)
    torch.testing.assert_close(cap.fn(x, 1), _f(x, 1))
    assert adapter_runtime.tree_check(cap.tree, {"x": x, "n": 1})
    assert not adapter_runtime.tree_check(cap.tree, {"x": torch.ones(4), "n": 1})
    old, SCALE = SCALE, 5.0
    try:  # the float global was baked in: the tree guards it
        assert not adapter_runtime.tree_check(cap.tree, {"x": x, "n": 1})
    finally:
        SCALE = old
    assert cap.installed and all(name in globals() for name in cap.installed)


def test_capture_keeps_nothing_when_told() -> None:
    """A filter that keeps nothing leaves no tree (the guards are jitguard's to check)."""
    cap = _capture(keep_all=False)
    assert cap.tree is None and not any(cap.kept) and cap.entries


def test_full_tree_for_verify_mode() -> None:
    """full_tree=True builds a second tree holding every guard."""
    cap = _capture(keep_all=False, full=True)
    assert cap.full_tree is not None
    assert adapter_runtime.tree_check(cap.full_tree, {"x": torch.ones(3), "n": 1})
    assert not adapter_runtime.tree_check(cap.full_tree, {"x": torch.ones(3), "n": 2})


def test_check_verbose_words_the_failure() -> None:
    """check_verbose gives torch's failure text; empty when the tree holds."""
    cap = _capture()
    assert adapter_runtime.check_verbose(cap.tree, {"x": torch.ones(3), "n": 1}) == []
    (first, *_) = adapter_runtime.check_verbose(cap.tree, {"x": torch.ones(4), "n": 1})
    assert "size mismatch at index 0. expected 3, actual 4" in first


def test_graph_breaks_are_these_exceptions() -> None:
    """A graph break raises one of GRAPH_BREAKS."""
    def breaks(x: Any) -> Any:
        print("side effect")
        return x + 1

    with pytest.raises(adapter.GRAPH_BREAKS):
        adapter.capture(breaks, (torch.ones(2),), {}, adapter.resolve_backend("eager"),
                        lambda es: [True] * len(es))


def test_frame_locals_reads_cells_then_params() -> None:
    """Free variables come from the cells (an empty cell is left out), then parameters."""
    k = 3

    def g(x: Any) -> Any:
        return x + k

    assert adapter_runtime.frame_locals(("k",), g.__closure__, ("x",), (1,)) == {"k": 3, "x": 1}


def test_graph_is_dynamic_reads_placeholders() -> None:
    """A graph captured with dynamic=True takes symbolic sizes; a static one does not."""
    static = _capture()
    assert adapter_runtime.graph_is_dynamic(static.graph_module) is False
    dyn = adapter.capture(_f, (torch.ones(3), 1), {}, adapter.resolve_backend("eager"),
                          lambda es: [True] * len(es), dynamic=True)
    assert adapter_runtime.graph_is_dynamic(dyn.graph_module) is True


def test_reset_hook_runs_after_torch_reset() -> None:
    """on_reset callbacks run after torch._dynamo.reset()."""
    seen: list[int] = []
    adapter_runtime.on_reset(lambda: seen.append(1))
    torch._dynamo.reset()
    assert seen == [1]


def test_capture_failures_and_user_errors_are_told_apart() -> None:
    """A graph break is a capture failure; a marked dynamic dim that got specialized is a
    user error (raised as torch raises it)."""
    assert adapter.is_capture_failure(adapter.GRAPH_BREAKS[0]("graph break"))
    x = torch.randn(3, 4)
    torch._dynamo.mark_dynamic(x, 0)

    def specializes(x: Any) -> Any:
        return x.view(3, 4) + 1

    with pytest.raises(adapter.USER_ERRORS) as info:
        adapter.capture(specializes, (x,), {}, adapter.resolve_backend("eager"),
                        lambda es: [True] * len(es))
    assert not adapter.is_capture_failure(info.value)


def test_data_dependent_branch_is_a_capture_failure() -> None:
    """A branch on ``item()``: the capture raises a UserError caused by torch's
    GuardOnDataDependentSymNode, which is a capture failure (the function runs eagerly)."""

    def branches(x: Any) -> Any:
        return x * 2 if x.sum().item() > 3 else x * 3

    with pytest.raises(adapter.USER_ERRORS) as info:
        adapter.capture(branches, (torch.ones(3),), {}, adapter.resolve_backend("eager"),
                        lambda es: [True] * len(es))
    assert adapter.is_capture_failure(info.value)


def test_an_op_failing_on_fake_tensors_is_not_a_capture_failure() -> None:
    """Adding a (4,) to a (3,): the capture raises one of FAKE_RUN_ERRORS (a RuntimeError),
    which is the function's own error, not a capture failure."""

    def adds(x: Any) -> Any:
        return x + torch.ones(3)

    with pytest.raises(adapter.FAKE_RUN_ERRORS) as info:
        adapter.capture(adds, (torch.ones(4),), {}, adapter.resolve_backend("eager"),
                        lambda es: [True] * len(es))
    assert isinstance(info.value, RuntimeError) and not adapter.is_capture_failure(info.value)


def test_saving_capture_gives_torch_serializable_forms() -> None:
    """``capture(saving=True)``: the backend compiles under the AOT-compile config, and the
    capture holds the program's bytecode, its module aliases, the backend id, the traced
    code and the compiled graph as torch's SerializableCallable."""
    from torch._dynamo.aot_compile_types import SerializableCallable

    for backend in ("eager", "aot_eager"):
        cap = adapter.capture(_f, (torch.randn(3), 2), {}, adapter.resolve_backend(backend),
                              lambda es: [False] * len(es), saving=True)
        assert cap.unsaved is None and cap.saved is not None
        assert isinstance(cap.saved.compiled, SerializableCallable)
        assert cap.saved.backend_id in cap.saved.bytecode.co_names
        assert _f.__code__ in cap.saved.traced_code
    assert set(adapter_stored._SAVING_CONFIG) <= set(torch._functorch.config.get_config_copy())



def test_stored_aot_eager_graphs_leave_out_node_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compiled to be stored, an aot_eager graph is pickled without its nodes' fake values,
    tensor metadata and provenance ([Note: Lean stored graphs]); the live graph keeps them,
    torch's method is unchanged outside ``saving()``, and the loaded graph computes the
    same values."""
    import pickle

    from torch._dynamo.backends.debugging import AOTEagerOutputCode

    def fat_f(x: Any, n: int) -> Any:
        return x.cos() * 3.25 + n

    def lean_f(x: Any, n: int) -> Any:
        return x.tan() * 5.5 - n

    def stored(lean: bool) -> tuple[Any, bytes]:
        # two graphs of their own: torch's AOTAutograd cache, on a hit, would give back the
        # entry some earlier compile of the same graph serialized
        if not lean:
            monkeypatch.setattr(adapter_graphs, "_LEAN_META", ())
        cap = adapter.capture(lean_f if lean else fat_f, (torch.randn(3), 2), {},
                              adapter.resolve_backend("aot_eager"),
                              lambda es: [False] * len(es), saving=True)
        monkeypatch.undo()
        assert cap.saved is not None
        return cap, pickle.dumps(adapter_stored.dump_compiled(cap.saved.compiled))

    _, fat = stored(lean=False)
    cap, lean = stored(lean=True)
    # a fake value is pickled as GraphPickler's tensor data, one per node that had one
    assert b"_TensorPickleData" in fat and b"_TensorPickleData" not in lean
    assert len(lean) < len(fat)
    x = torch.randn(3)
    loaded = adapter_stored.load_compiled(*pickle.loads(lean))
    assert torch.equal(loaded(x)[0], cap.saved.compiled(x)[0])
    assert torch.allclose(loaded(x)[0], x.tan() * 5.5 - 2)
    # outside saving(), torch's own method runs: the metadata stays in what it pickles
    gm = torch.fx.symbolic_trace(lambda a: a.sin())
    for node in gm.graph.nodes:
        node.meta["val"] = "kept"
    out = AOTEagerOutputCode(gm=gm)
    out.prepare_for_serialization()
    assert b"kept" in out._serialized_gm
    assert all(n.meta["val"] == "kept" for n in gm.graph.nodes)
    # inside it, the pickle leaves the value out and the live graph gets it back
    with adapter_stored.saving():
        out = AOTEagerOutputCode(gm=gm)
        out.prepare_for_serialization()
    assert out._serialized_gm is not None and b"kept" not in out._serialized_gm
    assert all(n.meta["val"] == "kept" for n in gm.graph.nodes)

def _aot_stored(fn: Any, *args: Any) -> tuple[Any, tuple[Any, bytes]]:
    """A capture of ``fn`` with aot_eager, compiled to be stored, and its stored form."""
    import pickle

    cap = adapter.capture(fn, args, {}, adapter.resolve_backend("aot_eager"),
                          lambda es: [False] * len(es), saving=True)
    assert cap.saved is not None
    return cap, pickle.loads(pickle.dumps(adapter_stored.dump_compiled(cap.saved.compiled)))


def _counting(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, calls: list[str]) -> None:
    real = getattr(owner, name)

    def counted(*a: Any, **k: Any) -> Any:
        calls.append(name)
        return real(*a, **k)

    monkeypatch.setattr(owner, name, staticmethod(counted) if name == "loads" else counted)


def test_a_stored_aot_eager_graph_keeps_its_forward_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """An aot_eager graph is stored with its (boxed) forward's code ([Note: Stored forward
    code]): loading it unpickles no graph and runs no ``recompile``, and its first call runs
    without the aliasing check of its builtin ops ([Note: The first call's aliasing
    check]); it computes what the capture computes, and the graph is there when asked."""
    from torch._functorch._aot_autograd.runtime_wrappers import (
        _AnalyzeCustomOpInputOutputMode,
    )
    from torch.fx._graph_pickler import GraphPickler

    def g(x: Any, n: int) -> Any:
        return (x.exp() * 1.75 - n).relu()

    cap, stored = _aot_stored(g, torch.randn(5), 3)
    calls: list[str] = []
    _counting(monkeypatch, GraphPickler, "loads", calls)
    _counting(monkeypatch, torch.fx.GraphModule, "recompile", calls)
    _counting(monkeypatch, _AnalyzeCustomOpInputOutputMode, "__torch_dispatch__", calls)
    loaded = adapter_stored.load_compiled(*stored)
    x = torch.randn(5)
    assert torch.equal(loaded(x)[0], (x.exp() * 1.75 - 3).relu())
    assert calls == []
    assert torch.equal(loaded(x)[0], cap.saved.compiled(x)[0])
    calls.clear()
    # an entry stored without its forward (as before this was kept) is loaded torch's way,
    # and its first call is checked
    monkeypatch.setattr(adapter_graphs, "_boxed_forward_form", lambda gm: None)
    _, plain = _aot_stored(lambda x, n: (x.exp() * 1.5 - n).relu(), torch.randn(5), 3)
    calls.clear()
    reloaded = adapter_stored.load_compiled(*plain)
    assert torch.equal(reloaded(x)[0], (x.exp() * 1.5 - 3).relu())
    assert calls.count("loads") == 1 and calls.count("recompile") == 1
    assert "__torch_dispatch__" in calls


def test_a_stored_boxed_graph_is_unpickled_when_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``AOTEagerOutputCode`` serialized inside ``lean()`` carries its forward; after
    ``post_compile`` its ``gm`` runs that forward (boxed: a list of inputs) and unpickles
    the graph on the first read of anything else, once, with the same code."""
    import pickle

    from torch._dynamo.backends.debugging import AOTEagerOutputCode
    from torch.fx._graph_pickler import GraphPickler
    from torch.fx.graph import _BoxedCodeGen

    gm = torch.fx.symbolic_trace(lambda a: torch.ops.aten.cos.default(a) * 2)
    gm.graph.set_codegen(_BoxedCodeGen())
    gm.recompile()
    with adapter_graphs.lean():
        out = AOTEagerOutputCode(gm=gm)
        out.prepare_for_serialization()
    loaded = pickle.loads(pickle.dumps(out))
    calls: list[str] = []
    _counting(monkeypatch, GraphPickler, "loads", calls)
    loaded.post_compile()
    x = torch.randn(4)
    assert torch.equal(loaded([x]), x.cos() * 2)
    assert calls == []
    assert loaded.gm.graph is loaded.gm.graph and calls == ["loads"]
    assert "cos" in loaded.gm.code and isinstance(loaded.gm.graph._codegen, _BoxedCodeGen)
    # serialized again (outside lean()), it is what it was loaded from, forward and all
    loaded.prepare_for_serialization()
    assert loaded._serialized_gm == out._serialized_gm and loaded.gm is None
    loaded = pickle.loads(pickle.dumps(loaded))
    loaded.post_compile()
    assert torch.equal(loaded([x]), x.cos() * 2) and calls == ["loads"]
    # outside lean(), torch's own: no forward carried, post_compile unpickles the graph
    plain = AOTEagerOutputCode(gm=gm)
    plain.prepare_for_serialization()
    plain = pickle.loads(pickle.dumps(plain))
    plain.post_compile()
    assert isinstance(plain.gm, torch.fx.GraphModule) and calls == ["loads", "loads"]


def test_only_graphs_of_builtin_ops_skip_the_first_calls_check() -> None:
    """A graph of aten ops (and getitem) has nothing for the first call's aliasing check to
    check; a call_method node or a custom op's graph keeps it ([Note: The first call's
    aliasing check])."""
    import operator

    graph = torch.fx.Graph()
    a = graph.placeholder("a")
    mx = graph.call_function(torch.ops.aten.max.dim, (a, 0))
    graph.output((graph.call_function(operator.getitem, (mx, 0)),))
    assert adapter_graphs._builtin_only(torch.fx.GraphModule(torch.nn.Module(), graph))
    assert not adapter_graphs._builtin_only(torch.fx.symbolic_trace(lambda t: t.sin()))

    @torch.library.custom_op("jitguard_test::twice", mutates_args=())
    def twice(t: torch.Tensor) -> torch.Tensor:
        return t * 2

    graph = torch.fx.Graph()
    a = graph.placeholder("a")
    graph.output((graph.call_function(torch.ops.jitguard_test.twice.default, (a,)),))
    assert not adapter_graphs._builtin_only(torch.fx.GraphModule(torch.nn.Module(), graph))


def test_saving_refuses_an_unserializable_backend() -> None:
    """A backend returning a plain callable cannot be serialized: ``unsaved`` says so."""
    def backend(gm: Any, inputs: Any) -> Any:
        return lambda *a: gm(*a)

    cap = adapter.capture(_f, (torch.randn(3), 2), {}, backend, lambda es: [False] * len(es),
                          saving=True)
    assert cap.saved is None
    assert cap.unsaved == "the backend returned a function, which torch cannot serialize"


def test_compiled_graph_and_code_round_trip() -> None:
    """``dump_compiled``/``load_compiled`` and ``dump_code``/``load_code`` give back a graph
    computing the same values and an equal code object."""
    import pickle

    cap = adapter.capture(_f, (torch.randn(3), 2), {}, adapter.resolve_backend("eager"),
                          lambda es: [False] * len(es), saving=True)
    assert cap.saved is not None
    deserializer, data = pickle.loads(pickle.dumps(adapter_stored.dump_compiled(cap.saved.compiled)))
    graph = adapter_stored.load_compiled(deserializer, data)
    x = torch.randn(3)
    assert torch.equal(graph(x)[0], cap.saved.compiled(x)[0])
    code = adapter_stored.load_code(pickle.loads(pickle.dumps(adapter_stored.dump_code(cap.saved.bytecode))))
    assert code.co_code == cap.saved.bytecode.co_code and code.co_names == cap.saved.bytecode.co_names
    with pytest.raises(TypeError, match="expected a SerializedCode"):
        adapter_stored.load_code(b"x")



def test_a_stored_eager_graph_keeps_its_forward_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """An eager graph is stored with its forward's code and the globals it names ([Note:
    Stored forward code]): loading it runs no ``recompile``, computes what the capture
    computes, and shows its source (``gm.code``, linecache)."""
    import linecache
    import pickle

    cap = adapter.capture(_f, (torch.randn(3), 2), {}, adapter.resolve_backend("eager"),
                          lambda es: [False] * len(es), saving=True)
    assert cap.saved is not None
    deserializer, data = pickle.loads(pickle.dumps(adapter_stored.dump_compiled(cap.saved.compiled)))
    assert deserializer is adapter_graphs.load_eager_graph

    def no_recompile(self: Any) -> None:
        raise AssertionError("recompiled")

    from torch.fx._graph_pickler import GraphPickler

    monkeypatch.setattr(torch.fx.GraphModule, "recompile", no_recompile)
    unpickled = []
    real_loads = GraphPickler.loads
    monkeypatch.setattr(GraphPickler, "loads",
                        staticmethod(lambda *a, **k: unpickled.append(1) or real_loads(*a, **k)))
    graph = adapter_stored.load_compiled(deserializer, data)
    x = torch.randn(3)
    assert torch.equal(graph(x)[0], cap.saved.compiled(x)[0])
    # this forward reads nothing of its module: the graph is unpickled only when asked for
    assert not unpickled
    forward = type(graph.graph_module).forward
    assert unpickled == [1] and forward is graph._forward
    assert graph.graph_module.code == "".join(linecache.getlines(forward.__code__.co_filename))
    assert "sin" in graph.graph_module.code



def test_a_stored_forward_that_reads_its_module_gets_the_graph_at_load() -> None:
    """A forward that calls a submodule (``self.sub``) is made from the stored code on the
    unpickled graph, at load ([Note: Stored forward code]), and computes the same."""
    from torch._dynamo.aot_compile_types import GraphModuleSerializableCallable

    root = torch.nn.Module()
    root.sub = torch.nn.ReLU()
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output((graph.call_module("sub", (x,)),))
    gm = torch.fx.GraphModule(root, graph)
    deserializer, data = adapter_stored.dump_compiled(GraphModuleSerializableCallable(gm))
    assert deserializer is adapter_graphs.load_eager_graph
    loaded = adapter_stored.load_compiled(deserializer, data)
    assert isinstance(loaded, GraphModuleSerializableCallable)
    t = torch.randn(4)
    assert torch.equal(loaded(t)[0], t.relu())
    assert "self.sub" in loaded.graph_module.code

def test_a_graph_global_with_no_name_keeps_torchs_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """A graph whose code names a global that cannot be found again by name is stored the
    way torch stores it; a named global missing at load makes the load ``recompile``."""
    import pickle

    def local_op(t: Any) -> Any:
        return t + 1

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output(graph.call_function(local_op, (x,)))
    assert adapter_graphs.forward_form(torch.fx.GraphModule(torch.nn.Module(), graph)) is None

    cap = adapter.capture(_f, (torch.randn(3), 2), {}, adapter.resolve_backend("eager"),
                          lambda es: [False] * len(es), saving=True)
    assert cap.saved is not None
    deserializer, data = adapter_stored.dump_compiled(cap.saved.compiled)
    torch_data, (code, src, names, selfless) = pickle.loads(data)
    names = {**names, "gone": ("module", "jitguard_no_such_module")}
    recompiled = []
    real = torch.fx.GraphModule.recompile
    monkeypatch.setattr(torch.fx.GraphModule, "recompile",
                        lambda self: recompiled.append(1) or real(self))
    loaded = adapter_stored.load_compiled(deserializer,
                                          pickle.dumps((torch_data, (code, src, names, selfless))))
    x = torch.randn(3)
    assert recompiled and torch.equal(loaded(x)[0], cap.saved.compiled(x)[0])

def test_reserve_unique_ids_moves_dynamos_name_counter() -> None:
    """After ``reserve_unique_ids(["__builtins_dict___N"])``, Dynamo's ``unique_id`` gives
    only numbers above N, whatever the prefix."""
    from torch._dynamo.bytecode_transformation import unique_id

    n = int(unique_id("x").rsplit("_", 1)[-1]) + 50
    adapter_stored.reserve_unique_ids([f"__builtins_dict___{n}", "no_number_here"])
    assert int(unique_id("__builtins_dict__").rsplit("_", 1)[-1]) > n


def test_builtins_dict_is_the_module_builtins() -> None:
    """``builtins_dict`` is the dict Dynamo binds for a module's builtins."""
    import builtins

    assert adapter_stored.builtins_dict(_f.__globals__) is vars(builtins)
    assert adapter_stored.builtins_dict({"__builtins__": vars(builtins)}) is vars(builtins)


def _sized(x: Any) -> Any:
    return x.sum(0) * x.shape[0] + x.stride(0) + x.storage_offset()


def test_program_reads_sizes_without_dynamo_helpers() -> None:
    """A dynamic capture's bytecode reads sizes, strides and offsets through
    torch._dynamo.utils (under its import alias); jitguard's program reads that module by a
    name of its own whose three helpers are direct, with the same results, and it has no
    profiler bracket (record_runtime_overhead is off while capturing)."""
    import torch._dynamo.utils as dynamo_utils

    for helper in ("call_size", "call_stride", "call_storage_offset"):
        assert callable(getattr(dynamo_utils, helper))
    x = torch.ones(5, 3)[1:]
    cap = adapter.capture(_sized, (x,), {}, adapter.resolve_backend("eager"),
                          lambda es: [False] * len(es), dynamic=True)
    names = cap.fn.__code__.co_names
    assert adapter.UTILS_ALIAS not in names and adapter.FAST_UTILS_NAME in names
    assert globals()[adapter.UTILS_ALIAS] is dynamo_utils  # Dynamo's own name, left as it was
    assert "record_pregraph_bytecode_enter" not in names
    for y in (torch.ones(9, 3)[1:], torch.ones(3, 3)[1:]):  # what its guards accept
        torch.testing.assert_close(cap.fn(y), _sized(y))
    fast = globals()[adapter.FAST_UTILS_NAME]
    assert fast.call_size(x, 1) == dynamo_utils.call_size(x, 1) == 3
    assert fast.call_stride(x, 0) == dynamo_utils.call_stride(x, 0) == 3
    assert fast.call_storage_offset(x) == dynamo_utils.call_storage_offset(x) == 3
    assert fast.dict_getitem is dynamo_utils.dict_getitem  # the rest is the module's


def test_record_runtime_overhead_knob_exists() -> None:
    """torch._dynamo.config.record_runtime_overhead (turned off while capturing) exists."""
    import torch._dynamo.config as dynamo_config

    assert isinstance(dynamo_config.record_runtime_overhead, bool)


def test_constant_fold_table_is_asked_about_autocast_readers() -> None:
    """Dynamo asks torch._dynamo.variables.torch.constant_fold_functions (a dict) whether it
    may fold a torch function: replaced while capturing, the table sees
    torch.get_autocast_dtype, and a capture that reads no autocast state says so."""
    import torch._dynamo.variables.torch as dynamo_torch_vars

    assert torch.get_autocast_dtype in dynamo_torch_vars.constant_fold_functions

    def reads(x: Any) -> Any:
        return x.to(torch.get_autocast_dtype("cpu"))

    def plain(x: Any) -> Any:
        return x + 1

    keep = adapter.resolve_backend("eager")
    assert adapter.capture(reads, (torch.ones(2),), {}, keep, lambda es: [False] * len(es)).reads_autocast
    assert not adapter.capture(plain, (torch.ones(2),), {}, keep, lambda es: [False] * len(es)).reads_autocast
    assert type(dynamo_torch_vars.constant_fold_functions) is dict  # put back


def test_mode_blind_hides_tensor_reads_from_function_modes() -> None:
    """A mode_blind function's tensor reads reach no active mode; the mode works after it."""
    Counting = counting_mode()
    x = torch.ones(2, 3)
    read = adapter_runtime.mode_blind(lambda t: (tuple(t.shape), t.stride(), t.dtype))
    assert read(x) == ((2, 3), (3, 1), torch.float32)
    with Counting():
        assert read(x) == ((2, 3), (3, 1), torch.float32)
        assert Counting.calls == 0
        x.stride()
        assert Counting.calls == 1


def test_read_past_modes_and_mode_stack_len() -> None:
    """read_past_modes reads size/stride/storage_offset unseen by an active mode;
    mode_stack_len counts the modes on torch's stack."""
    Counting = counting_mode()
    x = torch.ones(2, 3)[:, 1:]
    assert adapter_runtime.mode_stack_len() == 0
    with Counting():
        assert adapter_runtime.mode_stack_len() == 1
        assert adapter_runtime.read_past_modes(x, "size") == (2, 2)
        assert adapter_runtime.read_past_modes(x, "stride") == (3, 1)
        assert adapter_runtime.read_past_modes(x, "storage_offset") == 1
        assert Counting.calls == 0
        x.size()
        assert Counting.calls == 1


def test_read_attr_past_modes() -> None:
    """read_attr_past_modes reads a view's _base unseen by an active mode."""
    Counting = counting_mode()
    base = torch.ones(4, 3)
    view = base[1:]
    assert "_base" in adapter_runtime.ATTRS_PAST_MODES
    with Counting():
        assert adapter_runtime.read_attr_past_modes(view, "_base") is base
        assert Counting.calls == 0
        _ = view._base
        assert Counting.calls == 1


def test_specialize_float_knob_makes_floats_constants() -> None:
    """torch._dynamo.config.specialize_float (patched on to capture again over a zero float)
    exists, and with it on a float argument is guarded by value, not made symbolic."""
    import math

    import torch._dynamo.config as dynamo_config

    assert isinstance(dynamo_config.specialize_float, bool)

    def fn(x: Any, k: float) -> Any:
        return x * math.copysign(1.0, k)

    kinds: list[str] = []

    def keep(entries: Any) -> list[bool]:
        kinds.extend(e.guard_type for e in entries if e.name == "k" or "L['k']" in e.name)
        return [True] * len(entries)

    cap = adapter.capture(fn, (torch.ones(1), -0.0), {}, adapter.resolve_backend("eager"), keep,
                          dynamic=True, specialize_float=True)
    assert "CONSTANT_MATCH" in kinds
    assert cap.fn(torch.ones(1), -0.0).item() == -1.0


def _exploding(gm: Any, example_inputs: Any) -> Any:
    raise ValueError("backend exploded")


def test_backend_failure_comes_out_apart_from_capture_failures() -> None:
    """A backend that raises, or returns no callable: ``BackendRaised`` with the cause, not a
    capture failure; torch's ``BackendCompilerFailed`` takes (backend, cause, frame) and
    keeps ``backend_name`` and ``inner_exception``."""
    with pytest.raises(adapter.BackendRaised) as info:
        adapter.capture(_f, (torch.ones(3), 1), {}, _exploding, lambda es: [False] * len(es))
    assert isinstance(info.value.cause, ValueError) and not adapter.is_capture_failure(info.value)
    with pytest.raises(adapter.BackendRaised, match="not callable"):
        adapter.capture(_f, (torch.ones(3), 1), {}, lambda gm, ex: None,
                        lambda es: [False] * len(es))
    err = adapter.BackendCompilerFailed(_exploding, ValueError("x"), None)
    assert err.backend_name == "_exploding" and isinstance(err.inner_exception, ValueError)
    assert issubclass(adapter.BackendCompilerFailed, RuntimeError)
    assert adapter.BACKEND_GRAPH_BREAKS and all(
        issubclass(e, BaseException) for e in adapter.BACKEND_GRAPH_BREAKS)


def test_backend_graph_break_exceptions_stay_capture_failures() -> None:
    """What torch turns into a graph break when a backend raises it passes through as itself."""
    kind = adapter.BACKEND_GRAPH_BREAKS[0]

    def raising(gm: Any, example_inputs: Any) -> Any:
        raise kind.__new__(kind)

    with pytest.raises(kind) as info:
        adapter.capture(_f, (torch.ones(3), 1), {}, raising, lambda es: [False] * len(es))
    assert adapter.is_capture_failure(info.value)


def test_config_knobs_read_live() -> None:
    """``suppress_errors`` and ``capture_scalar_outputs`` follow torch._dynamo.config."""
    with torch._dynamo.config.patch(suppress_errors=True, capture_scalar_outputs=True):
        assert adapter.suppress_errors() and adapter.capture_scalar_outputs()
    with torch._dynamo.config.patch(suppress_errors=False, capture_scalar_outputs=False):
        assert not adapter.suppress_errors() and not adapter.capture_scalar_outputs()
        with adapter.suppressing_errors():
            assert torch._dynamo.config.suppress_errors
        assert not torch._dynamo.config.suppress_errors


def test_scalar_reads_are_found_and_refused() -> None:
    """A full-graph capture traces ``float(t)`` into the graph (``reads_scalars``);
    ``scalars=False`` refuses it with ``ScalarBreak`` before the backend runs."""
    def reads(x: Any) -> Any:
        return x * float(x.sum())

    seen: list[Any] = []

    def backend(gm: Any, example_inputs: Any) -> Any:
        seen.append(gm)
        return gm.forward

    cap = adapter.capture(reads, (torch.ones(3),), {}, backend, lambda es: [False] * len(es))
    assert adapter.reads_scalars(cap.graph_module) and len(seen) == 1
    assert not adapter.reads_scalars(_capture().graph_module)
    with pytest.raises(adapter.ScalarBreak):
        adapter.capture(reads, (torch.ones(3),), {}, backend, lambda es: [False] * len(es),
                        scalars=False)
    assert len(seen) == 1 and adapter.is_capture_failure(adapter.ScalarBreak("x"))


def test_current_compile_id_inside_a_backend() -> None:
    """A backend called by torch.compile sees torch's compile id ("0/0"); None outside."""
    ids: list[Any] = []

    def backend(gm: Any, example_inputs: Any) -> Any:
        ids.append(adapter.current_compile_id())
        return gm.forward

    torch._dynamo.reset()
    torch.compile(_f, backend=backend)(torch.ones(3), 1)
    assert adapter.current_compile_id() is None
    assert len(ids) == 1 and isinstance(ids[0], str) and "/" in ids[0]



def test_torch_backend_wraps_as_torch_compile_does() -> None:
    """``torch_backend``: torch's inductor wrapper (mode and options into its config) for
    "inductor", torch's generic wrapper otherwise (mode/options as keyword arguments, name
    kept as ``compiler_name``); ``default_backend`` is torch's default."""
    ind = adapter.torch_backend("inductor", "max-autotune", None, None)
    assert isinstance(ind, torch._TorchCompileInductorWrapper)
    assert ind.config.get("max_autotune") is True and adapter.backend_name(ind) == "inductor"
    seen: dict[str, Any] = {}

    def mine(gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        return gm.forward

    gen = adapter.torch_backend(mine, None, {"k": 1}, None)
    assert isinstance(gen, torch._TorchCompileWrapper) and adapter.backend_name(gen) == "mine"
    cap = adapter.capture(_f, (torch.ones(3), 1), {}, gen, lambda es: [False] * len(es))
    assert seen == {"options": {"k": 1}} and cap.graph_module is not None
    assert adapter.default_backend() == "inductor"
    with pytest.raises(TypeError, match="backend must be"):
        adapter.torch_backend(3, None, None, None)


def test_tensorified_float_is_no_scalar_read() -> None:
    """Under dynamic shapes Dynamo passes a float attribute as a tensor and ``item()``s it
    back (a backed symbol): not a data-dependent read, so ``scalars=False`` keeps it."""
    class Scaled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = 2.0

        def forward(self, x: Any) -> Any:
            return x * self.scale

    m = Scaled()
    cap = adapter.capture(type(m).forward, (m, torch.ones(4, 2)), {},
                          adapter.resolve_backend("eager"), lambda es: [False] * len(es),
                          dynamic=True, scalars=False)
    assert any(n.target == "item" for n in cap.graph_module.graph.nodes)
    assert not adapter.reads_scalars(cap.graph_module)


def test_frame_ids_come_from_torchs_counter() -> None:
    """``new_frame_id`` takes the next id of ``convert_frame.FRAME_COUNTER``: torch's next
    compile gets a later one."""
    from torch._dynamo import convert_frame

    torch._dynamo.reset()  # which sets torch's counter back to 0
    first = adapter.new_frame_id()
    assert convert_frame.FRAME_COUNTER == first + 1
    ids: list[Any] = []

    def backend(gm: Any, example_inputs: Any) -> Any:
        ids.append(adapter.current_torch_compile_id())
        return gm.forward

    torch.compile(lambda x: x + 1, backend=backend)(torch.ones(2))
    assert ids[0].frame_id > first


def test_capture_runs_under_the_given_compile_id() -> None:
    """``capture(compile_id=(f, n))``: torch's compile id inside the capture (what its trace
    records carry) is ``f/n`` (``convert_frame.get_compile_id`` asked with an empty frame
    state); the function is put back after."""
    from torch._dynamo import convert_frame

    original = convert_frame.get_compile_id
    ids: list[Any] = []

    def backend(gm: Any, example_inputs: Any) -> Any:
        ids.append(adapter.current_torch_compile_id())
        return gm.forward

    adapter.capture(_f, (torch.ones(3), 1), {}, backend, lambda es: [False] * len(es),
                    compile_id=(123, 4))
    assert convert_frame.get_compile_id is original
    assert (ids[0].frame_id, ids[0].frame_compile_id) == (123, 4)


def test_graph_record_fields() -> None:
    """``graph_sizes``/``readable_graph``: the metadata and payload of torch's
    ``dynamo_output_graph`` record (node sizes; ``print_readable`` with strides/devices)."""
    cap = _capture()
    sizes = adapter.graph_sizes(cap.graph_module)
    assert sizes and all(v == [3] for v in sizes.values())
    text = adapter.readable_graph(cap.graph_module)
    assert "class GraphModule" in text and "f32[3][1]cpu" in text


def test_wrapper_marks_are_what_torch_unwraps_and_inlines() -> None:
    """``mark_for_torch_tools``: torch's ``innermost_fn`` unwraps the wrapper to the original,
    and Dynamo inlines ``_torchdynamo_inline`` when it traces a call of the wrapper."""
    from torch._dynamo.eval_frame import innermost_fn

    def user(x: Any) -> Any:
        return x.cos()

    def wrapper(*args: Any) -> Any:
        raise AssertionError("Dynamo traced into the wrapper")

    adapter_runtime.mark_for_torch_tools(wrapper, user, user)
    assert innermost_fn(wrapper) is user
    torch._dynamo.reset()
    x = torch.randn(2)
    torch.testing.assert_close(torch.compile(lambda t: wrapper(t) + 1, backend="eager",
                                             fullgraph=True)(x), x.cos() + 1)
