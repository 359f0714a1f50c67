"""Races in the core's shared tables, made deterministic: a table whose read hands control
to a second thread at the worst moment, then checks what the first thread leaves."""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Any

import pytest

from jitguard._src.compiler import array_facts
from jitguard._src.compiler.array_facts import intern_fact


class _Interleaved(dict):  # type: ignore[type-arg]
    """A table whose ``get`` from the dying token's callback runs ``other`` in a second
    thread and waits for it (a little, so that a lock held here does not hang the test)."""

    def __init__(self, rows: Any, other: Any) -> None:
        super().__init__(rows)
        self.other = other
        self.armed = False

    def get(self, key: Any, default: Any = None) -> Any:
        found = super().get(key, default)
        if self.armed and threading.current_thread() is threading.main_thread():
            self.armed = False
            t = threading.Thread(target=self.other)
            t.start()
            t.join(0.2)
            self.thread = t
        return found


def test_a_dying_tokens_row_is_never_taken_from_a_new_token(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A fact's token dies while another thread interns the fact again: the new token's row
    stays, so the next intern of that fact finds the new token (one token per live fact)."""
    fact = ("a fact only this race test makes", object())
    made: list[Any] = []
    table = _Interleaved({}, lambda: made.append(intern_fact(fact)))
    monkeypatch.setattr(array_facts, "_interned", table)
    token = intern_fact(fact)
    ref = weakref.ref(token)
    table.armed = True
    del token  # the callback runs here, and the other thread interns the fact meanwhile
    gc.collect()
    table.thread.join()
    assert ref() is None and len(made) == 1
    assert intern_fact(fact) is made[0]
    assert table[fact]() is made[0]


def test_stats_read_while_threads_evict_never_go_backwards(dispatch_mode: str) -> None:
    """stats() polled while threads call a maxsize=3 cache (evicting all the time): hits and
    misses never go backwards between two snapshots."""
    import itertools

    from jitguard import cache_of, specialize

    def memo(request: Any) -> Any:
        result = request.fn(*request.args)
        return lambda *a: result

    f = specialize(lambda x: x, compiler=memo, maxsize=3, automatic_dynamic=False,
                   recompile_limit=None, global_state=False)
    begun = itertools.count()
    done = threading.Event()
    bad: list[Any] = []

    def work(step: int) -> None:
        for i in range(1500):
            next(begun)
            f((i * step) % 5)

    def poll() -> None:
        last = cache_of(f).stats()
        while not done.is_set():
            now = cache_of(f).stats()
            if now.hits < last.hits or now.misses < last.misses:
                bad.append((last, now))
            last = now

    _race(work, poll, done)
    assert not bad, bad[:2]
    final = cache_of(f).stats()
    assert final.evictions > 0 and final.entries <= 3


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_threads_with_dying_identities_and_eviction_agree_with_the_function(
        dispatch_mode: str) -> None:
    """Threads calling with fresh objects (guarded by identity, dying right after), values
    of confusable types and maxsize=1, while another thread clears the cache: every answer
    is the plain function's, and no weakref callback raises."""

    from jitguard import cache_of, specialize

    class Box:
        def __init__(self, v: Any) -> None:
            self.v = v

    def describe(x: Any) -> Any:
        return (type(x).__name__, x.v if type(x) is Box else repr(x))

    def memo(request: Any) -> Any:
        result = request.fn(*request.args)
        return lambda *a: result

    f = specialize(describe, compiler=memo, maxsize=1, automatic_dynamic=False,
                   recompile_limit=None, global_state=False)
    wrong: list[Any] = []
    done = threading.Event()

    def work(step: int) -> None:
        for i in range(300):
            x = [Box(i), i % 3, float(i % 3), bool(i % 2), str(i % 3)][(i * step) % 5]
            got = f(x)
            if got != describe(x):
                wrong.append((x, got))
            del x

    def clear() -> None:
        while not done.is_set():
            cache_of(f).clear()

    _race(work, clear, done)
    assert not wrong, wrong[:3]


def test_an_object_dying_while_its_check_is_generated(monkeypatch: pytest.MonkeyPatch) -> None:
    """An object a check binds by identity dies while the check's code is being generated
    (a collection, another thread; its death callback is run at that point): no exception
    escapes the callback, and the check fails from then on."""
    import sys

    from jitguard import GuardBuilder, LocalSource, compile_guards
    from jitguard._src.compiler import check as check_mod

    class Obj:
        pass

    obj = Obj()
    real = check_mod.generate

    def generate_then_kill(*args: Any, on_weak: Any, **kwargs: Any) -> Any:
        bound: list[Any] = []

        def spy(ident: Any, *rest: Any) -> None:
            bound.append(ident)
            on_weak(ident, *rest)

        code = real(*args, on_weak=spy, **kwargs)
        for ident in bound:  # what its death runs, at this point of the construction
            ident._died(None)
        return code

    monkeypatch.setattr(check_mod, "generate", generate_then_kill)
    raised: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", raised.append)
    x = LocalSource("x")
    check = compile_guards([x.make_guard(GuardBuilder.ID_MATCH)], f_locals={"x": obj},
                           arg_names=("x",), check_frame=False)
    assert not raised, [r.exc_value for r in raised]
    assert not check.valid and "deallocated" in str(check.invalid_reason)
    assert check.fn(obj) is False and check.fn(Obj()) is False


def _race(work: Any, background: Any, done: threading.Event) -> None:
    """Run ``work(1)``, ``work(2)``, ``work(3)`` in threads with ``background`` in another
    until they end (then ``done`` is set), switching threads as often as CPython allows;
    the first exception any of them raised is raised here."""
    import sys

    raised: list[BaseException] = []

    def running(target: Any, *args: Any) -> None:
        try:
            target(*args)
        except BaseException as e:
            raised.append(e)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        other = threading.Thread(target=running, args=(background,))
        other.start()
        workers = [threading.Thread(target=running, args=(work, s)) for s in (1, 2, 3)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
    finally:
        done.set()
        other.join()
        sys.setswitchinterval(old)
    if raised:
        raise raised[0]
