"""Typing: mypy sees through ``jitguard.specialize`` (tests/typing/specialize_use.py)."""

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


def test_mypy_flags_exactly_the_wrong_calls(tmp_path: pathlib.Path) -> None:
    """mypy reports an error on every line marked ``# wrong`` and on no other line."""
    env = {**os.environ, "MYPYPATH": str(ROOT / "src")}
    proc = subprocess.run(
        [
            sys.executable, "-m", "mypy", "--config-file=", "--no-incremental",
            "--cache-dir", str(tmp_path / "cache"), "--follow-imports=silent",
            "--python-version", "3.10", "--show-error-codes", str(USE),
        ],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )
    flagged = {int(m.group(1)) for m in re.finditer(r"specialize_use\.py:(\d+): error", proc.stdout)}
    lines = USE.read_text().splitlines()
    marked = {i for i, line in enumerate(lines, 1) if line.endswith("# wrong")}
    assert len(marked) == 5
    assert flagged == marked, proc.stdout + proc.stderr
    assert "scale" in proc.stdout and 'incompatible type "str"; expected "float"' in proc.stdout


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
