"""Tests for jitguard._src.compiler.values: identities of guarded objects and their deaths."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap

from jitguard._src.compiler.values import Ident


class Thing:
    pass


def test_death_callbacks_run_once() -> None:
    """A weakly held object's death runs each callback once."""
    obj = Thing()
    ident = Ident(obj)
    calls: list[int] = []
    ident.on_death(lambda: calls.append(1))
    del obj
    gc.collect()
    assert calls == [1] and not ident.alive


def test_exit_with_live_identity_guards_prints_nothing() -> None:
    """A process that exits while specialized functions still hold identity guards on
    module-level objects prints no "Exception ignored" on the way out."""
    script = textwrap.dedent(
        """
        import jitguard

        class Cfg:
            pass

        CFGS = [Cfg() for _ in range(20)]

        @jitguard.specialize
        def f(c):
            return c

        for c in CFGS:
            f(c)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Exception ignored" not in done.stderr, done.stderr
