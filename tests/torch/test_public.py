"""The public face of the torch integration: ``jitguard.torch`` and the lazy hook that makes
torch's guard kinds ``GuardBuilder`` attributes once torch is imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

import jitguard  # noqa: E402
import jitguard.torch as jgt  # noqa: E402


def run_python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_public_names_exist() -> None:
    """Every name in jitguard.torch.__all__ is defined."""
    missing = [n for n in jgt.__all__ if not hasattr(jgt, n)]
    assert missing == []


def test_kinds_are_guard_builder_attributes() -> None:
    """The torch kinds are GuardBuilder attributes, the same objects as jitguard.torch's."""
    for name in ("TENSOR_MATCH", "TENSORS_MATCH", "NO_TENSOR_ALIASING", "NN_MODULE_STATE",
                 "NN_MODULE_GLOBAL_HOOKS"):
        assert getattr(jitguard.GuardBuilder, name) is getattr(jgt, name)
    assert "STORAGE_OVERLAP" in jitguard.guard_kinds()


def test_guard_builder_attribute_loads_torch_integration_lazily() -> None:
    """import jitguard; import torch; GuardBuilder.TENSOR_MATCH works without jitguard.torch."""
    out = run_python(
        """
        import sys
        import jitguard
        assert "torch" not in sys.modules
        try:
            jitguard.GuardBuilder.TENSOR_MATCH
        except AttributeError:
            pass
        else:
            raise AssertionError("TENSOR_MATCH without torch")
        import torch
        assert jitguard.GuardBuilder.TENSOR_MATCH.__name__ == "TENSOR_MATCH"
        assert "jitguard.torch" not in sys.modules
        print("ok")
        """
    )
    assert out.strip() == "ok"
