"""Values the test modules share (imported as ``_helpers``: pytest puts ``tests/`` on
``sys.path``, as the folder of the rootdir conftest and of the test modules in it)."""

from __future__ import annotations

import importlib.util
import socket
import warnings
from typing import Any

import pytest

from jitguard._src.compiler import codecache


def torch_installed() -> bool:
    """Whether the real torch can be imported. Without it, ``import torch`` finds tests/torch
    itself (a namespace package, tests/ being on sys.path): only a package with an
    ``__init__`` file counts."""
    spec = importlib.util.find_spec("torch")
    return spec is not None and spec.origin not in (None, "namespace")


requires_torch = pytest.mark.skipif(not torch_installed(), reason="torch is not installed")


def record_compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Empty the code cache of generated code and record the text of every ``compile()`` it
    calls from now on (until ``monkeypatch`` undoes it); the list it records into."""
    calls: list[str] = []
    real_compile = compile

    def counting(text: str, *args: Any) -> Any:
        calls.append(text)
        return real_compile(text, *args)

    monkeypatch.setattr(codecache, "compile", counting, raising=False)
    monkeypatch.setattr(codecache, "_cache", {})
    return calls


class Obj:
    """A plain object (module level: TYPE_MATCH binds the class strongly)."""

    def __init__(self, **attrs: Any) -> None:
        self.__dict__.update(attrs)


class Counted:
    """Counts how often each of its attributes is read."""

    reads: dict[str, int]

    def __init__(self, **values: Any) -> None:
        object.__setattr__(self, "reads", {})
        object.__setattr__(self, "values", values)

    def __getattr__(self, name: str) -> Any:
        values = object.__getattribute__(self, "values")
        if name not in values:
            raise AttributeError(name)
        self.reads[name] = self.reads.get(name, 0) + 1
        return values[name]


class Boom(Exception):
    pass


class Hostile:
    """Every way of looking at it raises: attributes, items, len, ==, hash, truth."""

    def __getattr__(self, name: str) -> Any:
        raise Boom(f"getattr {name}")

    def __getitem__(self, key: Any) -> Any:
        raise Boom("getitem")

    def __len__(self) -> int:
        raise Boom("len")

    def __eq__(self, other: object) -> bool:
        raise Boom("eq")

    def __hash__(self) -> int:
        raise Boom("hash")

    def __bool__(self) -> bool:
        raise Boom("bool")

    def __repr__(self) -> str:
        return "Hostile()"


def registry_candidates(source: Any, value: Any) -> list[Any]:
    """Every registered guard kind that can guard ``value`` at ``source`` (as a create_fn, with
    each option set its ``sample_options`` gives), in name order: the differential fuzz
    draws from these, so a kind is fuzzed the day it is registered. Relational kinds, kinds
    that read no frame value or read their source's base are left to the fuzz's own
    builders; a kind whose ``expect`` raises on the value, or whose guard does not hold on
    it, is not a candidate."""
    import functools

    from jitguard._src.compiler.kinds import create_fn_for, guard_kinds

    out: list[Any] = []
    for name, kind in sorted(guard_kinds().items()):
        if kind.relational or not kind.reads_value or kind.on_base:
            continue
        for options in kind.sample_options(value):
            fn = create_fn_for(name)
            if options:
                fn = functools.partial(fn, **options)
            try:
                chosen = kind.resolve(value, dict(options))
                params = chosen.expect(value, source.make_guard(fn), **options)
                if not chosen.holds(value, params):
                    continue
            except Exception:
                continue
            out.append(fn)
    return out


def redis_test_url() -> str:
    """The Redis the store tests use: ``JITGUARD_TEST_REDIS_URL``, else 127.0.0.1:6379."""
    import os

    return os.environ.get("JITGUARD_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def redis_or_skip() -> str:
    """The test Redis URL when a server answers there; else skip the test, or fail it when
    ``JITGUARD_REQUIRE_REDIS=1`` (CI sets it: a missing Redis is a failure there)."""
    import os

    url = redis_test_url()
    try:
        import redis

        redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1).ping()
    except Exception as e:
        if os.environ.get("JITGUARD_REQUIRE_REDIS") == "1":
            pytest.fail(f"JITGUARD_REQUIRE_REDIS=1 but no Redis answers at {url}: {e}")
        pytest.skip(f"no Redis at {url}: {e}")
    return url


def closed_port() -> int:
    """A local TCP port with nothing listening on it (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def reason(check: Any, value: Any) -> str:
    """The one failure reason of a compiled check that rejects ``value`` (the check and the
    reference evaluator both reject it)."""
    assert check.fn(value) is False and check.reference(value) is False
    (failure,) = check.explain(value)
    return str(failure.reason)


def accepts(check: Any, value: Any) -> bool:
    """The compiled check's verdict on one value, asserted equal to the reference's."""
    got = check.fn(value)
    assert got is check.reference(value)
    return bool(got)


def check_of(create_fn: Any, value: Any, source: Any = None) -> Any:
    """The compiled check of one guard made by ``create_fn`` on ``source`` (``L['x']`` by
    default), built on the frame ``{"x": value}``."""
    from jitguard import LocalSource, compile_guards

    src = LocalSource("x") if source is None else source
    return compile_guards([src.make_guard(create_fn)], f_locals={"x": value}, arg_names=["x"])


def memo(request: Any) -> Any:
    """A compiler whose artifact returns what the function returned on the compiling call."""
    result = request.fn(*request.args, **request.kwargs)
    return lambda *args, **kwargs: result


def preset(fn: Any, policy: str) -> Any:
    """``fn`` specialized under the named policy preset, with ``memo`` as its compiler, no
    recompile limit, no automatic dynamic and no global-state guard."""
    from jitguard import specialize

    return specialize(fn, compiler=memo, policy=policy, recompile_limit=None,
                      automatic_dynamic=False, global_state=False)


def set_in_place(array: Any, **attrs: Any) -> None:
    """Set a numpy array's ``shape`` or ``dtype`` in place. numpy 2.5 deprecates it (a
    DeprecationWarning, an error in CI) but still does it, and such a change after a hit is
    exactly what the array guards must catch."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for name, value in attrs.items():
            setattr(array, name, value)


def counting_mode() -> Any:
    """A TorchFunctionMode class counting the torch calls it sees (``Counting.calls``)."""
    from torch.overrides import TorchFunctionMode

    class Counting(TorchFunctionMode):
        calls = 0

        def __torch_function__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            Counting.calls += 1
            return func(*args, **(kwargs or {}))

    return Counting
