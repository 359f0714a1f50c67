"""jitguard without torch: importing it never imports torch, and it works when torch cannot
be imported at all. Each check runs in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from _helpers import requires_torch


def run_python(code: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc.stdout


def test_import_does_not_import_torch() -> None:
    """import jitguard (and using its core) leaves torch out of sys.modules."""
    out = run_python(
        """
        import sys
        import jitguard
        assert "torch" not in sys.modules, "import jitguard imported torch"
        from jitguard import (
            GlobalContext, GuardsSet, LocalSource, AttrSource, TracingContext, tracing,
            CompileContext, CompileId, compile_context, detect_fake_mode, active_fake_mode,
            HopDispatchSetCache, global_states,
        )
        def EQUALS_MATCH(b, g): pass
        with compile_context(CompileContext(CompileId(frame_id=0, frame_compile_id=0))):
            with tracing(TracingContext(None)) as tc:
                tc.guards_context.dynamo_guards.add(AttrSource(LocalSource("x"), "a").make_guard(EQUALS_MATCH))
                assert detect_fake_mode() is None and active_fake_mode() is None
                GlobalContext().save()
                global_states.states()
        assert "torch" not in sys.modules, sorted(m for m in sys.modules if m.startswith("torch"))
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_works_when_torch_is_unimportable() -> None:
    """With sys.modules['torch'] = None, jitguard imports and its torch-facing parts degrade."""
    out = run_python(
        """
        import sys
        sys.modules["torch"] = None
        try:
            import torch
        except ImportError:
            pass
        else:
            raise AssertionError("torch should be unimportable here")

        import jitguard
        from jitguard import (
            GlobalContext, HopDispatchSetCache, TracingContext, active_fake_mode,
            detect_fake_mode, global_states, register_global_state, tracing,
        )
        assert detect_fake_mode() is None
        assert detect_fake_mode([1, (2, 3)]) is None
        assert active_fake_mode() is None
        assert HopDispatchSetCache().hop_cache_map == {}
        assert HopDispatchSetCache().get_cache(object()) is None
        assert global_states.states() == (), global_states.states()
        assert GlobalContext._supported_global_states == frozenset()

        knob = {"v": "saved", "writes": []}
        def write(v):
            knob["writes"].append(v)
            knob["v"] = v
        register_global_state("knob", lambda: knob["v"], write=write)
        assert GlobalContext._supported_global_states == {"knob"}

        ctx = GlobalContext()
        ctx.save()
        snap = ctx.copy_graphstate()
        knob["v"] = "changed"
        ctx.restore_graphstate(snap)
        assert knob["v"] == "saved" and knob["writes"] == ["saved"], knob

        fm = object()
        with tracing(TracingContext(fm)) as tc:
            assert detect_fake_mode() is fm
            tc.global_context.save()
            assert set(tc.global_context.global_state) == {"knob"}
        assert sys.modules["torch"] is None
        print("ok")
        """
    )
    assert out.strip() == "ok"


@requires_torch
def test_torch_states_join_once_torch_is_imported() -> None:
    """Importing torch after jitguard adds torch's states (the specification's six among
    them) to the registry lazily."""
    out = run_python(
        """
        import sys
        import jitguard
        assert jitguard.global_states.states() == ()
        import torch
        names = {s.name for s in jitguard.global_states.restorable()}
        assert names >= {
            "grad_enabled", "autocast_enabled", "autocast_cpu_enabled",
            "autocast_gpu_dtype", "autocast_cpu_dtype", "autocast_cache_enabled",
        }, names
        print("ok")
        """
    )
    assert out.strip() == "ok"
