"""jitguard.torch.compile: make_fx traces under a ShapeEnv as cache entries, their guards,
automatic dynamic shapes, mark_dynamic, recompile reasons."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import jitguard  # noqa: E402
import jitguard.torch as jgt  # noqa: E402
from jitguard import LocalSource, cache_of  # noqa: E402
from jitguard._src.torch.trace import TraceError  # noqa: E402

X = LocalSource("x")


pytestmark = pytest.mark.usefixtures("restore_grad_mode")


def infos(cf: Any) -> list[Any]:
    return list(jgt.traced_info(cf).values())


def stats(cf: Any) -> Any:
    return cache_of(cf).stats()


def checked(entry: Any) -> dict[str, tuple[Any, Any]]:
    """Per tensor source name, the (sizes, strides) the entry's tensor guards check."""
    out = {}
    for leaf in entry.check.leaves:
        if leaf.kind.name == "TENSORS_MATCH":
            for src, spec in zip(leaf.sources, leaf.params.specs, strict=True):
                out[src.name()] = (spec.sizes, spec.strides)
        elif leaf.kind.name == "TENSOR_MATCH":
            out[leaf.sources[0].name()] = (leaf.params.sizes, leaf.params.strides)
    return out


# ---- static entries ---------------------------------------------------------------------


def test_static_entry_hits_and_matches_eager() -> None:
    def f(x: Any, n: int) -> Any:
        return (x * n).relu() + x.shape[0]

    cf = jgt.compile(f)
    x = torch.randn(4, 3)
    torch.testing.assert_close(cf(x, 2), f(x, 2))
    y = torch.randn(4, 3)
    torch.testing.assert_close(cf(y, 2), f(y, 2))
    s = stats(cf)
    assert (s.compiles, s.hits) == (1, 1)
    (info,) = infos(cf)
    assert info.graph_module is not None and info.fallback_reason is None
    assert info.dynamic_dims == {} and info.shape_guards() == []
    (entry,) = cache_of(cf).entries()
    assert checked(entry) == {"L['x']": ((4, 3), (3, 1))}


def test_recompile_on_dtype_change_with_reason() -> None:
    cf = jgt.compile(lambda x: x + 1)
    x = torch.randn(3)
    cf(x)
    torch.testing.assert_close(cf(x.double()), x.double() + 1)
    assert stats(cf).compiles == 2
    (line,) = cache_of(cf).reasons()
    assert line.endswith("dtype mismatch. expected Float, actual Double")
    assert line.startswith(f"{cache_of(cf).compile_ids()[0]}: tensor ")
    # a dtype change never makes anything dynamic
    assert all(i.dynamic_dims == {} for i in infos(cf))


def test_outputs_of_any_structure() -> None:
    def f(x: Any, d: dict[str, Any]) -> Any:
        return {"sum": x + d["a"], "n": x.shape[0] * 2, "same": x, "pair": (x * 2, None)}

    cf = jgt.compile(f)
    x, a = torch.randn(3), torch.randn(3)
    out = cf(x, {"a": a})
    assert out["same"] is x and out["n"] == 6 and out["pair"][1] is None
    torch.testing.assert_close(out["sum"], x + a)


def test_signature_with_defaults_varargs_and_kwargs() -> None:
    def f(x: Any, *rest: Any, scale: float = 2.0, **kw: Any) -> Any:
        out = x * scale
        for r in rest:
            out = out + r
        return out + kw.get("bias", 0)

    cf = jgt.compile(f)
    x, y = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(cf(x), f(x))
    torch.testing.assert_close(cf(x, y, scale=3.0), f(x, y, scale=3.0))
    torch.testing.assert_close(cf(x, y, y, bias=1.5), f(x, y, y, bias=1.5))
    torch.testing.assert_close(cf(x, y, scale=3.0), f(x, y, scale=3.0))
    assert stats(cf).hits == 1


# ---- automatic dynamic shapes -------------------------------------------------------------


def test_automatic_dynamic_after_a_size_change() -> None:
    cf = jgt.compile(lambda x: x * 2 + x.shape[0])
    cf(torch.randn(4, 3))
    cf(torch.randn(5, 3))  # recompile caused by sizes only: dim 0 becomes dynamic
    first, second = infos(cf)
    assert first.dynamic_dims == {} and second.dynamic_dims == {X: frozenset({0})}
    assert second.shape_guards() == ["2 <= L['x'].size()[0]"]
    for n in (2, 7, 100):
        x = torch.randn(n, 3)
        torch.testing.assert_close(cf(x), x * 2 + n)
    s = stats(cf)
    assert s.compiles == 2 and s.hits == 3
    (entry,) = [e for e in cache_of(cf).entries() if e.compile_id == second.compile_id]
    assert checked(entry) == {"L['x']": ((None, 3), (3, 1))}
    # the other dim stays static
    torch.testing.assert_close(cf(torch.ones(4, 5)), torch.ones(4, 5) * 2 + 4)
    assert stats(cf).compiles == 3


def test_size_change_together_with_dtype_change_is_not_size_only() -> None:
    cf = jgt.compile(lambda x: x + 1)
    cf(torch.randn(4))
    cf(torch.randn(5, dtype=torch.float64))  # the only entry differs in dtype too
    assert all(i.dynamic_dims == {} for i in infos(cf))
    cf(torch.randn(6))  # entry 0 rejects on size alone now
    assert infos(cf)[-1].dynamic_dims == {X: frozenset({0})}


def test_zero_one_specialization_gives_sizes_0_and_1_their_own_entries() -> None:
    cf = jgt.compile(lambda x: x.sum(0), dynamic=True)
    cf(torch.randn(5, 2))
    for n in (2, 3, 9):
        cf(torch.randn(n, 2))
    assert stats(cf).compiles == 1
    torch.testing.assert_close(cf(torch.ones(1, 2)), torch.ones(2))
    torch.testing.assert_close(cf(torch.ones(0, 2)), torch.zeros(2))
    assert stats(cf).compiles == 3
    reasons = cache_of(cf).reasons()
    assert any(
        "(2 <= L['x'].size()[0]) failed: L['x'].size()[0] = 1" in r and "0/1 specialization" in r
        for r in reasons
    )
    size_one = infos(cf)[1]
    assert size_one.dynamic_dims == {X: frozenset({0, 1})}  # asked for, but 1 stays static
    assert size_one.traced.shapes.layouts[X].sizes[0] == 1


def test_automatic_dynamic_int() -> None:
    cf = jgt.compile(lambda x, n: x * n)
    x = torch.randn(3)
    cf(x, 2)
    cf(x, 3)
    cf(x, 4)
    torch.testing.assert_close(cf(x, 11), x * 11)
    assert stats(cf).compiles == 2
    assert infos(cf)[1].dynamic_ints == {LocalSource("n")}


def test_dynamic_false_never_makes_sizes_dynamic() -> None:
    cf = jgt.compile(lambda x: x + 1, dynamic=False)
    for n in (2, 3, 4):
        cf(torch.randn(n))
    assert stats(cf).compiles == 3
    assert all(i.dynamic_dims == {} for i in infos(cf))


# ---- shape guards -------------------------------------------------------------------------


def test_equalities_between_dims_are_guarded() -> None:
    cf = jgt.compile(lambda x, y: x + y, dynamic=True)
    cf(torch.randn(5), torch.randn(5))
    assert "Eq(L['y'].size()[0], L['x'].size()[0])" in infos(cf)[0].shape_guards()
    torch.testing.assert_close(cf(torch.ones(6), torch.ones(6)), torch.full((6,), 2.0))
    assert stats(cf).compiles == 1
    # y of size 1 broadcasts: the equality fails, and the new entry is right
    torch.testing.assert_close(cf(torch.ones(6), torch.ones(1)), torch.full((6,), 2.0))
    assert stats(cf).compiles == 2
    (line,) = cache_of(cf).reasons()
    assert "(L['y'].size()[0] == L['x'].size()[0]) failed" in line
    assert "L['y'].size()[0] = 1, L['x'].size()[0] = 6" in line


def test_matmul_inner_dims() -> None:
    cf = jgt.compile(lambda x, y: x @ y, dynamic=True)
    x, y = torch.randn(5, 3), torch.randn(3, 4)
    torch.testing.assert_close(cf(x, y), x @ y)
    x, y = torch.randn(7, 6), torch.randn(6, 2)
    torch.testing.assert_close(cf(x, y), x @ y)
    assert stats(cf).compiles == 1
    (entry,) = cache_of(cf).entries()
    failures = entry.check.explain(torch.randn(7, 6), torch.randn(5, 2))
    assert [f.kind for f in failures] == ["SHAPE_ENV"]
    with pytest.raises(RuntimeError):  # as eager raises: the trace fails, eager runs
        cf(torch.randn(7, 6), torch.randn(5, 2))


def test_branch_on_a_size() -> None:
    def f(x: Any) -> Any:
        return x * 2 if x.shape[0] > 3 else x - 1

    cf = jgt.compile(f, dynamic=True)
    cf(torch.randn(5))
    assert infos(cf)[0].shape_guards() == ["4 <= L['x'].size()[0]"]
    torch.testing.assert_close(cf(torch.ones(4)), torch.full((4,), 2.0))
    torch.testing.assert_close(cf(torch.ones(3)), torch.zeros(3))
    assert stats(cf).compiles == 2
    (line,) = cache_of(cf).reasons()
    assert "(4 <= L['x'].size()[0]) failed: L['x'].size()[0] = 3" in line
    assert "test_compile.py" in line  # the user line of the branch


def test_non_contiguous_inputs() -> None:
    cf = jgt.compile(lambda x: x.contiguous().view(-1) * 2, dynamic=True)
    base = torch.randn(6, 5)
    for x in (base, base.t(), base[1:, ::2], base[:, 1:].t()):
        torch.testing.assert_close(cf(x), x.contiguous().view(-1) * 2)


# ---- mark_dynamic ---------------------------------------------------------------------------


def test_mark_dynamic() -> None:
    cf = jgt.compile(lambda x: x.sum(1))
    x = jgt.mark_dynamic(torch.randn(4, 3), 1)
    cf(x)
    (info,) = infos(cf)
    assert info.dynamic_dims == {X: frozenset({1})}
    torch.testing.assert_close(cf(torch.ones(4, 9)), torch.full((4,), 9.0))
    assert stats(cf).compiles == 1
    assert jgt.mark_dynamic(torch.randn(2, 2), [0, -1]) is not None
    with pytest.raises(IndexError):
        jgt.mark_dynamic(torch.randn(2), 1)


def test_mark_dynamic_is_ignored_with_dynamic_false() -> None:
    cf = jgt.compile(lambda x: x + 1, dynamic=False)
    cf(jgt.mark_dynamic(torch.randn(4), 0))
    assert infos(cf)[0].dynamic_dims == {}


# ---- what is baked into a trace is guarded -----------------------------------------------


SCALE = 2


def test_globals_read_by_the_function_are_guarded() -> None:
    global SCALE

    def f(x: Any) -> Any:
        return x * SCALE

    cf = jgt.compile(f)
    x = torch.randn(3)
    cf(x)
    SCALE = 5
    try:
        torch.testing.assert_close(cf(x), x * 5)
        assert cache_of(cf).reasons() == [f"{cache_of(cf).compile_ids()[0]}: G['SCALE'] == 2 failed: got 5"]
    finally:
        SCALE = 2


def _double(x: Any) -> Any:
    return x * 2


HELPER = _double
GLOBAL_CFG = None  # set by the test below
OFFSETS = [1.0, 2.0]


def test_global_functions_objects_and_containers_are_guarded() -> None:
    global HELPER, GLOBAL_CFG
    GLOBAL_CFG = Config(3.0)

    def f(x: Any) -> Any:
        return HELPER(x) + GLOBAL_CFG.k + OFFSETS[1]  # type: ignore[attr-defined]

    cf = jgt.compile(f)
    x = torch.ones(2)
    torch.testing.assert_close(cf(x), f(x))
    try:
        HELPER = torch.neg
        torch.testing.assert_close(cf(x), f(x))
        GLOBAL_CFG.k = 5.0
        torch.testing.assert_close(cf(x), f(x))
        OFFSETS[1] = 7.0
        torch.testing.assert_close(cf(x), f(x))
        assert stats(cf).compiles == 4
    finally:
        HELPER, GLOBAL_CFG = _double, None
        OFFSETS[1] = 2.0


class Config:
    def __init__(self, k: float) -> None:
        self.k = k


# ---- globals read by helpers ([Note: Globals read by helpers]) ----------------------------

BIAS = 1.0


def _add_bias(x: Any) -> Any:
    return x + BIAS


class _Biased(torch.nn.Module):
    def forward(self, x: Any) -> Any:
        return _add_bias(x) * BIAS


def test_globals_read_by_a_helper_are_guarded() -> None:
    """A global read only by a same-module helper the function calls is guarded: changing
    it recompiles (with a reason naming it) and the result follows eager code."""
    global BIAS
    cf = jgt.compile(lambda x: _add_bias(x) * 2)
    x = torch.zeros(2)
    torch.testing.assert_close(cf(x), torch.full((2,), 2.0))
    BIAS = 3.0
    try:
        torch.testing.assert_close(cf(x), torch.full((2,), 6.0))
        (reason,) = cache_of(cf).reasons()
        assert "G['BIAS'] == 1.0 failed: got 3.0" in reason
    finally:
        BIAS = 1.0


class _Scaled:
    def __init__(self, scale: float) -> None:
        self.scale = scale


SCALED = _Scaled(2.0)
CFGMOD = types.ModuleType("jg_test_cfgmod")
CFGMOD.SCALE = 3.0  # type: ignore[attr-defined]


def _scale_by_global(x: Any) -> Any:
    return x * SCALED.scale


def _make_k() -> None:
    global LATE_K
    if "LATE_K" not in globals():
        LATE_K = 2.0


def test_attribute_of_a_global_read_by_a_helper_is_guarded() -> None:
    """A helper that reads an attribute of a global object: changing the attribute
    recompiles."""
    cf = jgt.compile(lambda x: _scale_by_global(x) + 1)
    x = torch.ones(2)
    torch.testing.assert_close(cf(x), torch.full((2,), 3.0))
    SCALED.scale = 5.0
    try:
        torch.testing.assert_close(cf(x), torch.full((2,), 6.0))
        assert "G['SCALED'].scale == 2.0 failed: got 5.0" in cache_of(cf).reasons()[0]
    finally:
        SCALED.scale = 2.0


def test_global_created_while_tracing_is_guarded() -> None:
    """A global that a helper creates during the trace and the function then reads is
    guarded."""
    global LATE_K

    def f(x: Any) -> Any:
        _make_k()
        return x * LATE_K  # noqa: F821 (created by _make_k)

    cf = jgt.compile(f)
    x = torch.ones(2)
    torch.testing.assert_close(cf(x), torch.full((2,), 2.0))
    LATE_K = 7.0
    try:
        torch.testing.assert_close(cf(x), torch.full((2,), 7.0))
    finally:
        del LATE_K


def test_attribute_of_a_user_module_global_is_guarded() -> None:
    """``cfgmod.SCALE`` read off a user module held by a global: changing it recompiles."""
    cf = jgt.compile(lambda x: x * CFGMOD.SCALE)
    x = torch.ones(2)
    torch.testing.assert_close(cf(x), torch.full((2,), 3.0))
    CFGMOD.SCALE = 4.0  # type: ignore[attr-defined]
    try:
        torch.testing.assert_close(cf(x), torch.full((2,), 4.0))
        assert "G['CFGMOD'].SCALE == 3.0 failed: got 4.0" in cache_of(cf).reasons()[0]
    finally:
        CFGMOD.SCALE = 3.0  # type: ignore[attr-defined]


class _DecoratedForward(torch.nn.Module):
    @torch.no_grad()
    def forward(self, x: Any) -> Any:
        return _add_bias(x)


@torch.no_grad()
def _decorated(x: Any) -> Any:
    return _add_bias(x) * 2


@pytest.mark.parametrize("which", ["function", "forward"])
def test_globals_behind_a_decorator_are_guarded(which: str) -> None:
    """A decorated function or forward (functools.wraps): the globals of the wrapped code
    and its helpers are guarded, not those of the decorator's module."""
    global BIAS
    cf = jgt.compile(_decorated) if which == "function" else jgt.compile(_DecoratedForward())
    x = torch.zeros(2)
    first = cf(x)
    BIAS = 4.0
    try:
        torch.testing.assert_close(cf(x), first * 4)
        assert cache_of(cf).stats().compiles == 2
    finally:
        BIAS = 1.0


def test_helper_globals_guarded_under_a_python_profiler() -> None:
    """With a Python profile function active while compiling, helper globals are still
    recorded (the profile function is chained and keeps receiving events) and guarded."""
    import sys

    global BIAS
    cf = jgt.compile(lambda x: _add_bias(x) * 2)
    x = torch.zeros(2)
    events: list[str] = []
    sys.setprofile(lambda frame, event, arg: events.append(event))
    try:
        cf(x)
    finally:
        sys.setprofile(None)
    assert "call" in events
    BIAS = 4.0
    try:
        torch.testing.assert_close(cf(x), torch.full((2,), 8.0))
    finally:
        BIAS = 1.0


EXT: Any = None  # set by the test below: a helper function or a module of another file


@pytest.mark.parametrize("route", ["function", "module"])
def test_globals_of_a_helper_in_another_module_are_guarded(
    route: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A helper defined in another user module, reached through a global of the function's
    module (an imported function, or the module): the globals it reads are guarded."""
    global EXT
    (tmp_path / "jg_ext_helpers.py").write_text(
        "SCALE = 2.0\n\ndef helper(x):\n    return x * SCALE\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    mod = importlib.import_module("jg_ext_helpers")
    EXT = mod.helper if route == "function" else mod
    try:
        cf = jgt.compile(lambda x: EXT(x) if route == "function" else EXT.helper(x))
        x = torch.ones(2)
        torch.testing.assert_close(cf(x), torch.full((2,), 2.0))
        mod.SCALE = 5.0
        torch.testing.assert_close(cf(x), torch.full((2,), 5.0))
        assert "['SCALE'] == 2.0 failed: got 5.0" in cache_of(cf).reasons()[0] or (
            ".SCALE == 2.0 failed: got 5.0" in cache_of(cf).reasons()[0])
    finally:
        EXT = None
        sys.modules.pop("jg_ext_helpers", None)


class _ClassScale:
    SCALE = 2.0


class _WithDefault:
    scale = 2.0  # read through an instance, from the class


WITH_DEFAULT = _WithDefault()


@pytest.mark.parametrize("how", ["class global", "instance of a global"])
def test_constant_class_attributes_are_guarded(how: str) -> None:
    """A constant class attribute read off a global class, or through a global instance
    that has no attribute of its own: changing it on the class recompiles."""
    if how == "class global":
        cf, owner = jgt.compile(lambda x: x * _ClassScale.SCALE), _ClassScale
    else:
        cf, owner = jgt.compile(lambda x: x * WITH_DEFAULT.scale), _WithDefault
    attr = "SCALE" if owner is _ClassScale else "scale"
    x = torch.ones(2)
    torch.testing.assert_close(cf(x), torch.full((2,), 2.0))
    setattr(owner, attr, 3.0)
    try:
        torch.testing.assert_close(cf(x), torch.full((2,), 3.0))
        assert cache_of(cf).stats().compiles == 2
    finally:
        setattr(owner, attr, 2.0)


divmod = 2.0  # a global that shadows a builtin on purpose


def test_global_shadowing_a_builtin_is_guarded() -> None:
    """A module global named like a builtin is what the function reads: it is guarded."""
    global divmod
    cf = jgt.compile(lambda x: x * divmod)
    x = torch.ones(2)
    torch.testing.assert_close(cf(x), torch.full((2,), 2.0))
    divmod = 3.0
    try:
        torch.testing.assert_close(cf(x), torch.full((2,), 3.0))
    finally:
        divmod = 2.0


def test_globals_read_by_a_module_forward_are_guarded() -> None:
    """A compiled module whose forward (and the helper it calls) reads a global: the global
    is guarded through the class's forward, and changing it recompiles."""
    global BIAS
    cm = jgt.compile(_Biased())
    x = torch.zeros(2)
    torch.testing.assert_close(cm(x), torch.full((2,), 1.0))
    BIAS = 2.0
    try:
        torch.testing.assert_close(cm(x), torch.full((2,), 4.0))
        (reason,) = cache_of(cm).reasons()
        assert ".forward.__globals__['BIAS'] == 1.0 failed: got 2.0" in reason
    finally:
        BIAS = 1.0


def test_object_attributes_are_guarded() -> None:
    cf = jgt.compile(lambda x, cfg: x * cfg.k)
    cfg = Config(2.0)
    x = torch.randn(3)
    cf(x, cfg)
    cfg.k = 4.0
    torch.testing.assert_close(cf(x, cfg), x * 4.0)
    assert stats(cf).compiles == 2


def test_module_argument() -> None:
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    m.scale = 2.0

    def f(m: Any, x: Any) -> Any:
        return m(x) * m.scale

    cf = jgt.compile(f)
    x = torch.randn(3, 4)
    torch.testing.assert_close(cf(m, x), f(m, x))
    with torch.no_grad():
        m[0].weight.add_(1.0)  # in place: seen by the same entry
    torch.testing.assert_close(cf(m, x), f(m, x))
    assert stats(cf).compiles == 1
    m.scale = 3.0
    torch.testing.assert_close(cf(m, x), f(m, x))
    m[2].weight = torch.nn.Parameter(torch.randn(2, 4))
    torch.testing.assert_close(cf(m, x), f(m, x))
    m.eval()
    torch.testing.assert_close(cf(m, x), f(m, x))
    assert stats(cf).compiles == 4


class Scaled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.eps = 0.5
        self.unused = 1

    def forward(self, x: Any) -> Any:
        return self.lin(x) + self.eps


def test_only_attributes_the_trace_read_are_guarded() -> None:
    m = Scaled()
    cf = jgt.compile(lambda m, x: m(x))
    x = torch.randn(2, 3)
    cf(m, x)
    (entry,) = cache_of(cf).entries()
    assert "L['m'].eps == 0.5" in entry.code
    assert not any("unused" in c or "in_features" in c for c in entry.code)
    assert type(m) is Scaled and type(m.lin) is torch.nn.Linear  # classes are back
    m.unused = 2  # never read: still a hit
    torch.testing.assert_close(cf(m, x), m(x))
    assert stats(cf).compiles == 1
    m.eps = 1.5
    torch.testing.assert_close(cf(m, x), m(x))
    assert stats(cf).compiles == 2


def test_exact_type_checks_inside_the_function_see_the_real_class() -> None:
    m = Scaled()
    cf = jgt.compile(lambda m, x: m(x) if type(m) is Scaled else x)
    x = torch.randn(2, 3)
    torch.testing.assert_close(cf(m, x), m(x))


def test_reading_dict_of_an_object_guards_all_its_constants() -> None:
    cfg = Config(2.0)
    cfg.other = 1  # type: ignore[attr-defined]
    cf = jgt.compile(lambda x, cfg: x * vars(cfg)["k"])
    cf(torch.ones(2), cfg)
    cfg.other = 3  # type: ignore[attr-defined]
    cf(torch.ones(2), cfg)
    assert stats(cf).compiles == 2


def test_compile_a_module_guards_the_module() -> None:
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5))
    cm = jgt.compile(m)
    x = torch.randn(2, 4)
    torch.manual_seed(0)
    got = cm(x)
    torch.manual_seed(0)
    torch.testing.assert_close(got, m(x))
    m.eval()  # dropout off: the training-mode trace must not serve this call
    torch.testing.assert_close(cm(x), m(x))
    assert stats(cm).compiles == 2
    assert any("training is False, expected True" in r for r in cache_of(cm).reasons())


def test_compile_a_bound_method_guards_its_self() -> None:
    class Scaler:
        def __init__(self) -> None:
            self.s = 3.0

        def apply(self, x: Any) -> Any:
            return x * self.s

    obj = Scaler()
    cf = jgt.compile(obj.apply)
    x = torch.ones(2)
    torch.testing.assert_close(cf(x), x * 3.0)
    obj.s = 4.0
    torch.testing.assert_close(cf(x), x * 4.0)
    assert cache_of(cf).reasons() == [
        f"{cache_of(cf).compile_ids()[0]}: L['__jitguard_callable'].__self__.s == 3.0 failed: got 4.0"
    ]


def test_compile_a_closure_guards_its_cells() -> None:
    scale = [2.0]
    k = 1.0

    def f(x: Any) -> Any:
        return x * scale[0] + k

    cf = jgt.compile(f)
    x = torch.ones(2)
    torch.testing.assert_close(cf(x), f(x))
    scale[0] = 5.0  # mutated in place: the cell holds the same list
    torch.testing.assert_close(cf(x), f(x))
    k = 3.0  # rebound
    torch.testing.assert_close(cf(x), f(x))
    assert stats(cf).compiles == 3


# ---- grad mode, requires_grad ---------------------------------------------------------------


def test_grad_mode_and_requires_grad() -> None:
    cf = jgt.compile(lambda x, w: (x @ w).sum())
    x = torch.randn(3, 4)
    w = torch.randn(4, 2, requires_grad=True)
    out = cf(x, w)
    assert out.requires_grad
    out.backward()
    torch.testing.assert_close(w.grad, x.sum(0, keepdim=True).t().expand(4, 2))
    with torch.no_grad():
        out = cf(x, w)
    assert not out.requires_grad
    assert any("grad_enabled" in r for r in cache_of(cf).reasons())
    cf(x, w.detach())
    assert any("requires_grad mismatch" in r for r in cache_of(cf).reasons())


def test_grad_mode_blocks_inside_the_function() -> None:
    def f(x: Any) -> Any:
        with torch.no_grad():
            n = x.sum().int().item()
            torch._check(n >= 0)
            y = x * n
        return y + 0, x * 3

    cf = jgt.compile(f)
    x = torch.ones(3, requires_grad=True)
    assert [t.requires_grad for t in cf(x)] == [t.requires_grad for t in f(x)] == [False, True]
    assert infos(cf)[0].traced is not None
    with pytest.raises(RuntimeError):  # the check fails inside the no_grad block...
        cf(-torch.ones(3, requires_grad=True))
    assert torch.is_grad_enabled()  # ...and grad mode is back, as leaving the block does
    assert stats(cf).compiles == 1


def test_autocast_block_inside_the_function() -> None:
    def f(x: Any) -> Any:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return x @ x

    cf = jgt.compile(f)
    x = torch.randn(3, 3)
    assert cf(x).dtype == f(x).dtype == torch.bfloat16
    torch.testing.assert_close(cf(x), f(x))


def test_inference_mode_inside_the_function_runs_eagerly() -> None:
    def f(x: Any) -> Any:
        with torch.inference_mode():
            return x * 2

    cf = jgt.compile(f)
    assert cf(torch.ones(2)).is_inference()
    assert "inference mode" in (infos(cf)[0].fallback_reason or "")


def test_storage_offset_read_by_the_function() -> None:
    def f(x: Any) -> Any:
        return x.as_strided((2,), (1,), x.storage_offset())

    cf = jgt.compile(f)
    base = torch.arange(10.0)
    torch.testing.assert_close(cf(base[0:4]), base[0:2])
    torch.testing.assert_close(cf(base[1:5]), base[1:3])
    assert stats(cf).compiles == 2


# ---- what cannot be traced ----------------------------------------------------------------


def test_untraceable_function_runs_eagerly() -> None:
    def f(x: Any) -> Any:
        return x + 1 if x.sum() > 0 else x - 1

    cf = jgt.compile(f)
    torch.testing.assert_close(cf(torch.ones(3)), torch.full((3,), 2.0))
    torch.testing.assert_close(cf(-torch.ones(3)), torch.full((3,), -2.0))
    (info,) = infos(cf)
    assert info.traced is None and "data-dependent" in (info.fallback_reason or "")
    with pytest.raises(TraceError):
        jgt.compile(f, fullgraph=True)(torch.ones(3))


def test_trace_runs_inside_a_jitguard_tracing_context() -> None:
    seen: list[Any] = []

    def f(x: Any) -> Any:
        ctx = jitguard.TracingContext.try_get()
        seen.append((ctx is not None and ctx.fake_mode is not None, jitguard.detect_fake_mode(x)))
        return x * 2

    cf = jgt.compile(f)
    cf(torch.randn(2))
    (in_trace, mode) = seen[0]
    assert in_trace and mode is not None and type(mode).__name__ == "FakeTensorMode"
    cf(torch.randn(2))
    assert len(seen) == 1  # a hit runs the graph, not the Python function
    assert jitguard.TracingContext.try_get() is None


_CONTEXTS: list[Any] = []


def _adds_a_guard(x: Any, n: int) -> Any:
    ctx = jitguard.TracingContext.get()
    _CONTEXTS.append(ctx)
    # a guard added while traced is part of the entry
    ctx.guards_context.dynamo_guards.add(
        LocalSource("n").make_guard(jitguard.GuardBuilder.EQUALS_MATCH)
    )
    return x * n


def test_the_trace_uses_the_cache_s_tracing_context() -> None:
    cf = jgt.compile(_adds_a_guard, dynamic=True)  # n by type only, but the trace pins it
    cf(torch.ones(2), 3)
    (entry,) = cache_of(cf).entries()
    assert "L['n'] == 3" in entry.code
    assert _CONTEXTS[-1].fake_mode is None  # the patch ended with the trace


def test_compile_context_records_the_shape_guards() -> None:
    from jitguard._src.torch.compile import TorchCompiler

    seen: list[Any] = []
    compiler = TorchCompiler(dynamic=True)

    def spy(request: Any) -> Any:
        artifact = compiler(request)
        seen.append(list(jitguard.CompileContext.get().shape_env_guards))
        return artifact

    sf = jitguard.specialize(lambda x: x * 2, compiler=spy, dynamic=["x"], global_state=False)
    torch.testing.assert_close(sf(torch.ones(4)), torch.full((4,), 2.0))
    assert seen == [["2 <= L['x'].size()[0]"]]


def test_compile_rejects_its_own_compiler_option() -> None:
    with pytest.raises(TypeError):
        jgt.compile(lambda x: x, compiler=lambda r: r.fn)
    with pytest.raises(ValueError):
        jgt.compile(lambda x: x, dynamic="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        jgt.traced_info(lambda x: x)


def test_decorator_form() -> None:
    @jgt.compile(dynamic=True)
    def f(x: Any) -> Any:
        return x.cos()

    x = torch.randn(5)
    torch.testing.assert_close(f(x), x.cos())
