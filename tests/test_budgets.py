"""Size budgets of the source: no module over 500 lines, no function over 80 lines unless its
docstring says why ("Over 80 lines: <reason>"), and every module's docstring says what it may
import (tests/test_layering.py holds what the sentence says)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import jitguard

PKG_DIR = Path(jitguard.__file__).resolve().parent
MODULE_LINES = 500
FUNCTION_LINES = 80
REASON = "Over 80 lines:"


def _modules() -> list[Path]:
    return sorted(PKG_DIR.rglob("*.py"))


def long_functions(source: str) -> list[tuple[str, int, int]]:
    """(name, first line, length) of each function of ``source`` over FUNCTION_LINES lines
    whose docstring gives no reason (a sentence starting with REASON)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            doc = ast.get_docstring(node) or ""
            if length > FUNCTION_LINES and REASON not in " ".join(doc.split()):
                out.append((node.name, node.lineno, length))
    return out


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PKG_DIR)))
def test_module_is_within_budget(path: Path) -> None:
    """No module of the package is over 500 lines."""
    lines = path.read_text().count("\n")
    assert lines <= MODULE_LINES, f"{path.relative_to(PKG_DIR)} has {lines} lines"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PKG_DIR)))
def test_functions_are_within_budget(path: Path) -> None:
    """No function is over 80 lines without a reason in its docstring."""
    assert long_functions(path.read_text()) == []


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PKG_DIR)))
def test_module_says_what_it_may_import(path: Path) -> None:
    """Every module's docstring has its "May import:" sentence."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    assert "May import:" in doc, f"{path.relative_to(PKG_DIR)} does not say what it may import"


def test_long_function_check_reads_the_reason() -> None:
    """A long function fails the budget until its docstring says why it is long."""
    body = "".join(f"    x{i} = {i}\n" for i in range(FUNCTION_LINES))
    plain = f"def f():\n    '''Does it.'''\n{body}"
    reasoned = f"def f():\n    '''Does it.\n\n    Over 80 lines: one table.'''\n{body}"
    assert long_functions(plain) == [("f", 1, FUNCTION_LINES + 2)]
    assert long_functions(reasoned) == []
