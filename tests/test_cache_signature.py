"""Tests for jitguard._src.cache.signature: parameter values, binders and forwarders."""

from __future__ import annotations

import linecache

import pytest

from jitguard._src.cache.signature import Signature, internal_prefix, register_source


def full(a, b=2, /, c=3, *args, d, e=5, **kw):  # type: ignore[no-untyped-def]
    return (a, b, c, args, d, e, kw)


def test_params_in_signature_order() -> None:
    """Parameters are listed in signature order, variadics included."""
    sig = Signature(full)
    assert sig.params == ("a", "b", "c", "args", "d", "e", "kw")
    assert sig.var_positional == "args" and sig.var_keyword == "kw"
    assert sig.positional == ("a", "b", "c") and sig.keyword_only == ("d", "e")


def test_bind_applies_defaults_like_python() -> None:
    """bind() gives the values Python's own binding would, defaults applied."""
    sig = Signature(full)
    assert sig.bind(1, d=4) == (1, 2, 3, (), 4, 5, {})
    assert sig.bind(1, 9, 8, 7, 6, d=4, z=0) == (1, 9, 8, (7, 6), 4, 5, {"z": 0})


def test_bind_rejects_what_fn_rejects() -> None:
    """bind() raises TypeError for calls the function itself would reject."""
    sig = Signature(full)
    with pytest.raises(TypeError):
        sig.bind(1)  # d is required
    with pytest.raises(TypeError):
        sig.bind(a=1, d=2)  # a is positional-only


def test_forward_calls_target_with_same_arguments() -> None:
    """forward(target, *values) calls target as the original call did."""
    sig = Signature(full)
    values = sig.bind(1, 9, 8, 7, d=4, z=0)
    assert sig.forward(full, *values) == full(1, 9, 8, 7, d=4, z=0)


def test_split_rebuilds_args_and_kwargs() -> None:
    """split() turns values back into (args, kwargs) for an ordinary call."""
    sig = Signature(full)
    args, kwargs = sig.split(sig.bind(1, 9, 8, 7, d=4, z=0))
    assert args == (1, 9, 8, 7) and kwargs == {"d": 4, "e": 5, "z": 0}
    assert full(*args, **kwargs) == full(1, 9, 8, 7, d=4, z=0)


def test_fresh_names_the_variadics() -> None:
    """fresh() names *args and **kwargs, whose objects are new on every call."""
    assert Signature(full).fresh() == {"args", "kw"}
    assert Signature(lambda x: x).fresh() == frozenset()


def test_single_and_zero_parameters() -> None:
    """One-parameter and no-parameter functions bind to 1- and 0-tuples."""
    assert Signature(lambda x: x).bind(3) == (3,)
    assert Signature(lambda: 0).bind() == ()


def test_keyword_only_without_varargs() -> None:
    """A keyword-only parameter without *args gets a bare * in the header."""
    def g(a, *, k):  # type: ignore[no-untyped-def]
        return (a, k)

    sig = Signature(g)
    assert "*" in sig.header
    assert sig.forward(g, *sig.bind(1, k=2)) == (1, 2)


def test_prefix_avoids_parameter_names() -> None:
    """Generated names never start like a parameter name."""
    assert internal_prefix(("a", "b")) == "___j"
    prefix = internal_prefix(("___jx",))
    assert not "___jx".startswith(prefix)
    def g(___jt, ___jd0=1):  # type: ignore[no-untyped-def]
        return ___jt + ___jd0

    sig = Signature(g)
    assert sig.forward(g, *sig.bind(1)) == 2


def test_callable_without_signature_is_refused() -> None:
    """A callable with no Python signature cannot be specialized."""
    class NoSig:
        __signature__ = "not a signature"

        def __call__(self) -> None: ...

    with pytest.raises(TypeError, match="no Python signature"):
        Signature(NoSig())


def test_register_source_feeds_linecache() -> None:
    """Generated source is readable through linecache under its filename."""
    name = register_source("x = 1\n", "test")
    assert linecache.getlines(name) == ["x = 1\n"]
