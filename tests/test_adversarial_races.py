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
    import sys

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

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        poller = threading.Thread(target=poll)
        poller.start()
        workers = [threading.Thread(target=work, args=(s,)) for s in (1, 2, 3)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
    finally:
        done.set()
        poller.join()
        sys.setswitchinterval(old)
    assert not bad, bad[:2]
    final = cache_of(f).stats()
    assert final.evictions > 0 and final.entries <= 3
