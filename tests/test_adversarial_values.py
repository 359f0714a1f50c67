"""Adversarial tests of values whose text or JSON form Python refuses: ints past
``sys.get_int_max_str_digits()`` (their decimal ``repr`` raises ValueError), as arguments,
items, dict keys, set members and defaults, in both dispatch modes, with and without the
store. The plain function takes them; the specialized one must too."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from jitguard import CompileRequest, cache_of, explain, specialize
from jitguard._src._util import constant_repr

pytestmark = pytest.mark.usefixtures("dispatch_mode")

BIG = 10 ** (sys.get_int_max_str_digits() + 10) if sys.get_int_max_str_digits() else 0


def memo(request: CompileRequest) -> Callable[..., Any]:
    result = request.fn(*request.args, **request.kwargs)
    return lambda *args, **kwargs: result


def test_constant_repr_writes_long_ints_in_hex() -> None:
    """constant_repr is repr where repr works, and a hex literal of the same value (also
    inside containers) where an int is too long for decimal text."""
    assert constant_repr((1, "a", 2.5)) == repr((1, "a", 2.5))
    with pytest.raises(ValueError):
        repr(BIG)
    for value in [BIG, -BIG, (BIG,), (1, (BIG, 2)), [BIG], frozenset({BIG}), {BIG: BIG},
                  slice(BIG, None), range(BIG)]:
        assert eval(constant_repr(value)) == value


@pytest.mark.parametrize("value", [BIG, -BIG, (BIG,), (1, (2, BIG)), [BIG], {"k": BIG},
                                   {BIG: 1}, {(1, BIG): 1}, frozenset({BIG}), BIG + 1],
                         ids=lambda v: type(v).__name__)
def test_long_ints_are_served(value: Any) -> None:
    """An argument holding an int too long for decimal text compiles, hits, and an equal
    value of another int misses; explain and the reasons do not raise."""
    f = specialize(lambda x: x, compiler=memo, recompile_limit=None, global_state=False)
    assert f(value) == value
    assert f(value) == value
    assert f(1) == 1
    assert cache_of(f).stats().compiles == 2 and cache_of(f).stats().hits == 1
    assert "entries 2" in str(explain(f))
    assert all(isinstance(r, str) for r in cache_of(f).reasons()) and cache_of(f).reasons()


def test_long_int_guard_text_is_hex() -> None:
    """The guard on a long int and its failure reason show it in hex, never raising."""
    f = specialize(lambda x: x, compiler=memo, recompile_limit=None, global_state=False)
    f(BIG)
    f(BIG + 1)
    [reason] = cache_of(f).reasons()
    assert "L['x'] == 0x" in reason and "got 0x" in reason


@pytest.mark.parametrize("value", [BIG, (BIG,), {BIG: 1}], ids=lambda v: type(v).__name__)
def test_long_ints_with_the_store(value: Any, store_dir: Any) -> None:
    """With a store, a guard set holding a long int (a value, a dict key in a source name,
    a default) is not stored, and says why; the call is served."""
    def fn(x: Any, k: int = BIG) -> Any:
        return x

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f = specialize(fn, compiler=None, store=True, global_state=False)
        assert f(value) == value
        assert f(value) == value
    events = cache_of(f).store_events()
    assert events and events[-1].outcome == "not stored"
    assert "JSON" in events[-1].reason


def test_long_int_default_key_is_stable(store_dir: Any) -> None:
    """A function with a long int default gets a store key (in hex) and its entries are
    stored when their guards are portable."""
    def fn(x: Any, k: int = BIG) -> Any:
        return x

    f = specialize(fn, store=True, global_state=False)
    assert f(1, 2) == 1
    assert [e.outcome for e in cache_of(f).store_events()] == ["saved"]


def test_one_json_int_bound_for_store_keys_and_guard_sets(store_dir: Any) -> None:
    """At the smallest ``int_max_str_digits`` Python allows, an int of JSON_INT_BITS bits is
    guarded and stored as a JSON number, one a bit longer is not stored (its guard set says
    why), and a default that long still gets a store key: both sides use the one bound."""
    from jitguard._src._util import JSON_INT_BITS

    edge, over = (1 << JSON_INT_BITS) - 1, 1 << JSON_INT_BITS
    saved = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)
    try:
        def fn(x: Any, k: int = over) -> Any:
            return x

        f = specialize(fn, store=True, global_state=False, automatic_dynamic=False)
        assert cache_of(f).store_key is not None
        assert f(edge, 1) == edge and f(over, 1) == over
        events = cache_of(f).store_events()
        assert [e.outcome for e in events] == ["saved", "not stored"]
        assert "JSON" in events[1].reason
    finally:
        sys.set_int_max_str_digits(saved)


def _nested(depth: int, wrap: Callable[[Any], Any]) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = wrap(value)
    return value


@pytest.mark.parametrize("policy", ["values", "types"])
@pytest.mark.parametrize("wrap", [lambda v: frozenset({v}), lambda v: (v,), lambda v: [v],
                                  lambda v: {"k": v}], ids=["frozenset", "tuple", "list", "dict"])
def test_deeply_nested_arguments(policy: str, wrap: Callable[[Any], Any]) -> None:
    """An argument nested thousands of levels deep is served (guarded as an object past
    the depth limits), never a RecursionError; an equal but distinct one is not confused."""
    deep = _nested(3000, wrap)
    other = _nested(3000, wrap)
    f = specialize(lambda x: id(x), compiler=memo, policy=policy, recompile_limit=None,
                   automatic_dynamic=False, global_state=False)
    assert f(deep) == id(deep) and f(deep) == id(deep)
    assert f(other) == id(other)
    assert "entries" in str(explain(f))


def test_is_constant_is_depth_limited() -> None:
    """A tuple, frozenset or slice nested past MAX_CONSTANT_DEPTH is no constant (so never
    pinned by EQUALS_MATCH, whose comparison recurses); one within it is."""
    from jitguard._src.compiler.constants import MAX_CONSTANT_DEPTH, is_constant

    for wrap in (lambda v: (v,), lambda v: frozenset({v}), lambda v: slice(v, None)):
        assert is_constant(_nested(MAX_CONSTANT_DEPTH, wrap))
        assert not is_constant(_nested(MAX_CONSTANT_DEPTH + 1, wrap))
        assert not is_constant(_nested(5000, wrap))


@pytest.mark.parametrize("index", [(BIG, []), slice(BIG, 1.5)], ids=["tuple", "slice"])
def test_refused_index_with_a_long_int_is_a_source_error(index: Any) -> None:
    """An index refused for its form raises SourceError naming it, not repr's ValueError."""
    from jitguard import GetItemSource, LocalSource, SourceError

    with pytest.raises(SourceError, match="0x"):
        GetItemSource(LocalSource("x"), index)
