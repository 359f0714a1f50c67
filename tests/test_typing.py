"""Typing: mypy sees through ``jitguard.specialize`` (tests/typing/specialize_use.py) and
``jitguard.torch.compile`` (tests/typing/torch_compile_use.py)."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

pytest.importorskip("mypy")

ROOT = pathlib.Path(__file__).resolve().parents[1]
USE = ROOT / "tests" / "typing" / "specialize_use.py"
TORCH_USE = ROOT / "tests" / "typing" / "torch_compile_use.py"


def run_mypy(path: pathlib.Path, tmp_path: pathlib.Path, config: str = "") -> str:
    """mypy's report on ``path``, with jitguard from this tree (``config``: a mypy.ini text)."""
    env = {**os.environ, "MYPYPATH": str(ROOT / "src")}
    ini = tmp_path / "mypy.ini"
    ini.write_text("[mypy]\n" + config)
    proc = subprocess.run(
        [
            sys.executable, "-m", "mypy", f"--config-file={ini}", "--no-incremental",
            "--cache-dir", str(tmp_path / "cache"), "--follow-imports=silent",
            "--python-version", "3.10", "--show-error-codes", str(path),
        ],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )
    return proc.stdout + proc.stderr


def flagged_and_marked(path: pathlib.Path, report: str) -> tuple[set[int], set[int]]:
    """The lines mypy flags in ``path``, and the lines marked ``# wrong`` there."""
    flagged = {int(m.group(1)) for m in re.finditer(rf"{path.name}:(\d+): error", report)}
    lines = path.read_text().splitlines()
    return flagged, {i for i, line in enumerate(lines, 1) if line.endswith("# wrong")}


def test_mypy_flags_exactly_the_wrong_calls(tmp_path: pathlib.Path) -> None:
    """mypy reports an error on every line marked ``# wrong`` and on no other line."""
    report = run_mypy(USE, tmp_path)
    flagged, marked = flagged_and_marked(USE, report)
    assert len(marked) == 5
    assert flagged == marked, report
    assert "scale" in report and 'incompatible type "str"; expected "float"' in report


def test_mypy_flags_wrong_calls_through_torch_compile(tmp_path: pathlib.Path) -> None:
    """``jitguard.torch.compile`` keeps the signature: mypy flags exactly the marked calls
    (torch itself is not followed, so this runs without analysing torch)."""
    report = run_mypy(TORCH_USE, tmp_path, "[mypy-torch.*]\nfollow_imports = skip\n")
    flagged, marked = flagged_and_marked(TORCH_USE, report)
    assert len(marked) == 5
    assert flagged == marked, report


@pytest.mark.skipif(sys.version_info < (3, 11), reason="typing.get_overloads is 3.11+")
def test_typed_overloads_take_the_runtime_options() -> None:
    """Each overload of jitguard.specialize takes exactly the runtime function's keywords."""
    import inspect
    import typing

    import jitguard
    from jitguard._src.cache import decorators as runtime

    def keywords(fn: object) -> list[str]:
        params = inspect.signature(fn).parameters.values()  # type: ignore[arg-type]
        return [p.name for p in params if p.kind is p.KEYWORD_ONLY]

    overloads = typing.get_overloads(jitguard.specialize)
    assert len(overloads) == 2
    for overload in overloads:
        assert keywords(overload) == keywords(runtime.specialize)
    assert jitguard.specialize.__doc__ == runtime.specialize.__doc__
