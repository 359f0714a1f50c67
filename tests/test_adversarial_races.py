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
