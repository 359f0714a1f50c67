"""Property tests: the compiled check agrees with the reference evaluator on random guards
over random nested values, and is sound (True only when every guard holds)."""

from __future__ import annotations

import contextlib
import functools
import math
import os
from collections.abc import Callable, Iterator
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _helpers import Hostile, registry_candidates
from jitguard import (
    AttrSource,
    CheckFunction,
    GetItemSource,
    Guard,
    GuardBuilder,
    LocalSource,
    Source,
    compile_guards,
)
from jitguard._src.compiler import chunks
from jitguard._src.compiler.builtin_kinds import strict_equal

SETTINGS = settings(
    # JITGUARD_EXAMPLES=2000 for a long hunt; the default keeps the suite fast.
    max_examples=int(os.environ.get("JITGUARD_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
ARG_NAMES = ["x", "y"]


class Obj:
    """A value with attributes."""

    def __init__(self, **attrs: Any) -> None:
        self.__dict__.update(attrs)

    def __repr__(self) -> str:
        return f"Obj({self.__dict__!r})"


ATTR_NAMES = ["a", "b", "val", "x_1", "名"]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, float("nan")]),
    st.text(max_size=4),
    st.binary(max_size=3),
)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keys = st.one_of(st.text(max_size=3), st.integers(-2, 5))
    return st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(keys, children, max_size=4),
        st.dictionaries(st.sampled_from(ATTR_NAMES), children, max_size=3).map(
            lambda d: Obj(**d)
        ),
    )


values = st.recursive(scalars, _containers, max_leaves=12)

# ---- guards from a value --------------------------------------------------------------------


def _is_constant(v: Any) -> bool:
    if type(v) is tuple:
        return all(_is_constant(x) for x in v)
    return type(v) in (int, float, str, bytes, bool, type(None))


def _nodes(source: Source, value: Any, depth: int = 0) -> list[tuple[Source, Any]]:
    """Every (source, value) under ``source``, parents first."""
    out = [(source, value)]
    if depth >= 4:
        return out
    children: list[tuple[Source, Any]] = []
    if type(value) in (list, tuple):
        children = [(GetItemSource(source, i), v) for i, v in enumerate(value)]
    elif type(value) is dict:
        children = [(GetItemSource(source, k), v) for k, v in value.items()]
    elif type(value) is Obj:
        children = [(AttrSource(source, k), v) for k, v in vars(value).items()]
    for child, v in children:
        out += _nodes(child, v, depth + 1)
    return out


def _candidates(source: Source, value: Any) -> list[Callable[..., Any]]:
    """The guard kinds (create_fns) that can be built on ``value``: every registered kind
    that holds on it, so that a new kind is fuzzed the day it is registered."""
    return registry_candidates(source, value)


def _attr_guards(source: Source, value: Any) -> list[Guard]:
    if type(value) is not Obj:
        return []
    present = [AttrSource(source, k).make_guard(GuardBuilder.HASATTR) for k in vars(value)]
    missing = [n for n in ATTR_NAMES if n not in vars(value)][:1]
    return present + [AttrSource(source, k).make_guard(GuardBuilder.NOT_HASATTR) for k in missing]


@st.composite
def guard_sets(draw: st.DrawFn, frame: dict[str, Any]) -> list[Guard]:
    """A random set of guards that all hold on ``frame``."""
    nodes = [n for name in ARG_NAMES for n in _nodes(LocalSource(name), frame[name])]
    guards: list[Guard] = []
    for source, value in nodes:
        if not draw(st.booleans()):
            continue
        for fn in draw(st.lists(st.sampled_from(_candidates(source, value)), max_size=3,
                                unique_by=id)):
            guards.append(source.make_guard(fn))
        if draw(st.booleans()):
            guards += _attr_guards(source, value)
    # Relational guards: pairs holding the same object, and distinct mutable objects.
    by_id: dict[int, list[Source]] = {}
    for source, value in nodes:
        by_id.setdefault(id(value), []).append(source)
    for sources in by_id.values():
        if len(sources) >= 2 and draw(st.booleans()):
            dup = functools.partial(GuardBuilder.DUPLICATE_INPUT, source_b=sources[1])
            guards.append(sources[0].make_guard(dup))
    mutable = [s for s, v in nodes if type(v) in (list, dict, Obj)]
    distinct = list({id(frame_value(frame, s)): s for s in mutable}.values())
    if len(distinct) >= 2 and draw(st.booleans()):
        picked = draw(st.lists(st.sampled_from(distinct), min_size=2, max_size=3, unique=True))
        if len({id(frame_value(frame, s)) for s in picked}) == len(picked):
            no_alias = functools.partial(GuardBuilder.NO_ALIASING, others=tuple(picked[1:]))
            guards.append(picked[0].make_guard(no_alias))
    return guards


def frame_value(frame: dict[str, Any], source: Source) -> Any:
    return source.get_value(frame, {})


# ---- mutations ----------------------------------------------------------------------------

_DELETE = object()


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if type(value) in (list, tuple):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, ("item", i)))
    elif type(value) is dict:
        for k, v in value.items():
            out += _paths(v, (*prefix, ("item", k)))
    elif type(value) is Obj:
        for k, v in vars(value).items():
            out += _paths(v, (*prefix, ("attr", k)))
    return out


def replace_at(value: Any, path: tuple[Any, ...], fn: Callable[[Any], Any]) -> Any:
    """A copy of ``value`` along ``path`` (siblings shared) with the node there replaced by
    ``fn(node)``; ``_DELETE`` removes it from its container."""
    if not path:
        return fn(value)
    kind, key = path[0]
    child = getattr(value, key) if kind == "attr" else value[key]
    new = replace_at(child, path[1:], fn)
    if type(value) is Obj:
        attrs = dict(vars(value))
        if new is _DELETE:
            del attrs[key]
        else:
            attrs[key] = new
        return Obj(**attrs)
    if type(value) is dict:
        d = dict(value)
        if new is _DELETE:
            del d[key]
        else:
            d[key] = new
        return d
    items = list(value)
    if new is _DELETE:
        del items[key]
    else:
        items[key] = new
    return type(value)(items)


def _twist(v: Any) -> Any:
    """A value equal-ish to ``v`` of another type, or a near miss."""
    if type(v) is bool:
        return int(v)
    if type(v) is int:
        return float(v)
    if type(v) is float:
        return v if math.isnan(v) else v + 1.0
    if type(v) is str:
        return v.encode()
    if type(v) is bytes:
        return v + b"!"
    if type(v) is list:
        return tuple(v)
    if type(v) is tuple:
        return list(v)
    if type(v) is dict:
        return dict(reversed(list(v.items())))
    if type(v) is Obj:
        return dict(vars(v))
    return 0


@st.composite
def mutations(draw: st.DrawFn, frame: dict[str, Any]) -> dict[str, Any]:
    """``frame`` with one node changed: replaced, twisted, made hostile or deleted."""
    name = draw(st.sampled_from(ARG_NAMES))
    path = draw(st.sampled_from(_paths(frame[name])))
    how = draw(st.sampled_from(["value", "twist", "hostile", "delete", "copy"]))
    if how == "delete" and path:
        fn: Callable[[Any], Any] = lambda v: _DELETE  # noqa: E731
    elif how == "hostile":
        fn = lambda v: Hostile()  # noqa: E731
    elif how == "twist":
        fn = _twist
    elif how == "copy":
        fn = lambda v: replace_at(v, (), lambda w: w) if not path else v  # noqa: E731
    else:
        new = draw(values)
        fn = lambda v: new  # noqa: E731
    return {**frame, name: replace_at(frame[name], path, fn)}


# ---- the properties -----------------------------------------------------------------------


def both_modes(guards: list[Guard], frame: dict[str, Any]) -> tuple[CheckFunction, CheckFunction]:
    by_map = compile_guards(guards, f_locals=frame, name="by_map")
    by_pos = compile_guards(guards, f_locals=frame, arg_names=ARG_NAMES, name="by_pos")
    return by_map, by_pos


def holds_per_reference(check: CheckFunction, frame: dict[str, Any]) -> bool:
    """Every leaf's ``holds`` is True, reading every source directly (no shared reads)."""
    for leaf in check.leaves:
        try:
            vals = [s.get_value(frame, {}) for s in leaf.sources]
            value = tuple(vals) if leaf.kind.relational else (vals[0] if vals else None)
            if not leaf.kind.holds(value, leaf.params):
                return False
        except Exception:
            return False
    return True


def agree(by_map: CheckFunction, by_pos: CheckFunction, frame: dict[str, Any]) -> bool:
    """Assert compiled (both modes) and reference agree on ``frame``; return the answer."""
    expected = by_map.reference(frame)
    assert by_map.fn(frame) is expected, (by_map.source, frame)
    assert by_pos.fn(*(frame[n] for n in ARG_NAMES)) is expected, (by_pos.source, frame)
    assert (by_map.explain(frame) == []) is expected
    if expected:
        assert holds_per_reference(by_map, frame), (by_map.source, frame)
    return expected


@SETTINGS
@given(st.data(), values, values)
def test_agree_on_build_frame_and_mutations(data: st.DataObject, x: Any, y: Any) -> None:
    """Guards built on a frame accept it; on mutations of it, compiled == reference."""
    frame = {"x": x, "y": y}
    guards = data.draw(guard_sets(frame))
    by_map, by_pos = both_modes(guards, frame)
    assert agree(by_map, by_pos, frame) is True
    for _ in range(4):
        agree(by_map, by_pos, data.draw(mutations(frame)))


@SETTINGS
@given(st.data(), values, values, values, values)
def test_agree_on_unrelated_values(data: st.DataObject, x: Any, y: Any, x2: Any, y2: Any) -> None:
    """On values unrelated to the build frame, compiled == reference."""
    frame = {"x": x, "y": y}
    guards = data.draw(guard_sets(frame))
    by_map, by_pos = both_modes(guards, frame)
    for other in ({"x": x2, "y": y2}, {"x": x2, "y": y}, {"x": x, "y": y2}):
        agree(by_map, by_pos, other)


@SETTINGS
@given(st.data(), values)
def test_agree_on_hostile_values(data: st.DataObject, x: Any) -> None:
    """Values whose every read raises give False in both, never an exception."""
    frame = {"x": x, "y": x}
    guards = data.draw(guard_sets(frame))
    by_map, by_pos = both_modes(guards, frame)
    for other in ({"x": Hostile(), "y": x}, {"x": x, "y": Hostile()}):
        agree(by_map, by_pos, other)


@contextlib.contextmanager
def chunked(size: int) -> Iterator[None]:
    """Checks compiled inside are cut into chunks of ``size`` leaves, however small."""
    saved = chunks.CHUNK_ABOVE, chunks.CHUNK_LEAVES
    chunks.CHUNK_ABOVE, chunks.CHUNK_LEAVES = 0, size
    try:
        yield
    finally:
        chunks.CHUNK_ABOVE, chunks.CHUNK_LEAVES = saved


@SETTINGS
@given(st.data(), values, values, st.sampled_from([1, 2, 3, 7]))
def test_agree_when_chunked(data: st.DataObject, x: Any, y: Any, size: int) -> None:
    """Cut into chunks of a few leaves (values passed between chunks), the check still
    accepts its frame and agrees with the reference on mutations and hostile values."""
    frame = {"x": x, "y": y}
    guards = data.draw(guard_sets(frame))
    with chunked(size):
        by_map, by_pos = both_modes(guards, frame)
    if by_pos.leaves:
        assert "___chunk_0" in by_pos.source and len(by_pos.filenames) > 1
    assert agree(by_map, by_pos, frame) is True
    for _ in range(4):
        agree(by_map, by_pos, data.draw(mutations(frame)))
    for other in ({"x": Hostile(), "y": y}, {"x": x, "y": Hostile()}):
        agree(by_map, by_pos, other)


@SETTINGS
@given(st.data(), values)
def test_sound_when_compiled_says_true(data: st.DataObject, x: Any) -> None:
    """Whenever the compiled check says True, every guard holds per the reference."""
    frame = {"x": x, "y": [x]}
    guards = data.draw(guard_sets(frame))
    check = compile_guards(guards, f_locals=frame, arg_names=ARG_NAMES)
    for _ in range(6):
        other = data.draw(st.one_of(mutations(frame), st.builds(dict, x=values, y=values)))
        if check.fn(other["x"], other["y"]):
            assert holds_per_reference(check, other), (check.source, other)


@SETTINGS
@given(values, values)
def test_equals_match_agrees_with_strict_equal(a: Any, b: Any) -> None:
    """EQUALS_MATCH's compiled test is strict_equal, the reference meaning, on any pair."""
    if not _is_constant(a):
        return
    check = compile_guards([LocalSource("v").make_guard(GuardBuilder.EQUALS_MATCH)],
                           f_locals={"v": a}, arg_names=["v"])
    assert check.fn(b) is strict_equal(b, a) is check.reference(b)
    assert check.fn(a) is True


def _closure_over(n: Any, scale: Any) -> Any:
    def inner() -> Any:
        return n, scale

    return inner


def test_failure_on_a_closure_cell_names_the_variable() -> None:
    """A failed guard on ``F.__closure__[i].cell_contents`` (and on an attribute of it) ends
    with a hint naming the closure variable; format() adds the user stack, one line per
    frame and source line."""
    import traceback

    from jitguard import AttrSource, CellContentsSource, ClosureSource, GetItemSource

    def cell(i: int) -> Any:
        return CellContentsSource(GetItemSource(ClosureSource(LocalSource("f")), i))

    class Box:
        scale = 2

    fn = _closure_over(1, Box())
    assert fn.__code__.co_freevars == ("n", "scale")
    on_n = cell(0).make_guard(GuardBuilder.EQUALS_MATCH)
    on_scale = AttrSource(AttrSource(cell(1), "scale"), "real").make_guard(GuardBuilder.EQUALS_MATCH)
    on_n.user_stack = traceback.StackSummary.from_list([("user.py", 3, "g", "y = n + 1")])
    check = compile_guards([on_n, on_scale], f_locals={"f": fn}, arg_names=["f"])
    other = Box()
    other.scale = 3
    failures = check.explain(_closure_over(5, other))
    assert [f.reason for f in failures] == [
        "L['f'].__closure__[0].cell_contents == 1 failed: got 5 (HINT: guard on \"n\")",
        "L['f'].__closure__[1].cell_contents.scale.real == 2 failed: got 3 "
        "(HINT: guard on \"scale\".scale.real)",
    ]
    assert failures[0].format().splitlines()[1:] == [
        "User stack trace:", '  File "user.py", line 3, in g', "    y = n + 1"]


def test_unreadable_source_below_a_failed_guard_is_no_reason() -> None:
    """A source that cannot be read because a guard on its base failed says nothing more;
    one whose base held is a reason, given once for every guard below it."""
    import jitguard as jg

    class Obj:
        def __init__(self, **kw: Any) -> None:
            self.__dict__.update(kw)

    o = jg.LocalSource("o")
    mods = jg.AttrSource(o, "mods")
    guards = [mods.make_guard(jg.GuardBuilder.LENGTH_CHECK),
              jg.GetItemSource(mods, "2").make_guard(jg.GuardBuilder.ID_MATCH),
              jg.AttrSource(jg.GetItemSource(mods, "2"), "p").make_guard(
                  jg.GuardBuilder.EQUALS_MATCH)]
    three = {"0": 0, "1": 1, "2": Obj(p=1)}
    check = jg.compile_guards(guards, f_locals={"o": Obj(mods=three)})
    failures = check.explain({"o": Obj(mods={"0": 0})})
    assert [f.reason for f in failures] == ["len(L['o'].mods) == 3 failed: got 1"]
    other = {"0": 0, "1": 1, "3": 3}
    reasons = [f.reason for f in check.explain({"o": Obj(mods=other)})]
    assert reasons == ["L['o'].mods['2'] could not be read: KeyError: '2'"]
