"""The benchmark scripts' command line: every bench/bench_*.py takes --quick and --json (read
from their argparse calls, without running them: some need torch and take minutes)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from _helpers import torch_installed

BENCH = Path(__file__).resolve().parent.parent / "bench"
SCRIPTS = sorted(BENCH.glob("bench_*.py"))


def options(path: Path) -> set[str]:
    """The option strings a script passes to ``add_argument``."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            out.update(a.value for a in node.args
                       if isinstance(a, ast.Constant) and isinstance(a.value, str))
    return out


def test_there_are_bench_scripts() -> None:
    """The folder holds the benchmarks this test reads."""
    assert len(SCRIPTS) >= 4, SCRIPTS


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_script_takes_quick_and_json(path: Path) -> None:
    """Each bench script accepts --quick (a short run) and --json (one JSON line at the end),
    and says so in its docstring."""
    assert {"--quick", "--json"} <= options(path)
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    assert "--quick" in doc and "--json" in doc, f"{path.name}: document --quick and --json"


def test_scripts_cite_only_files_that_exist() -> None:
    """A bench/... path named in a script exists."""
    import re

    for path in SCRIPTS:
        for cited in re.findall(r"bench/[\w./-]+\.py", path.read_text()):
            assert (BENCH.parent / cited).is_file(), f"{path.name} cites {cited}"


def test_bench_llm_runs_at_a_tiny_depth() -> None:
    """bench_llm.py --quick --json on GPT-2 at 1 layer prints every variant's overhead, the
    guard counts and the ratios, with jitguard's output checked against eager's."""
    import json
    import os
    import subprocess
    import sys

    if not torch_installed():  # importorskip would take tests/torch for torch
        pytest.skip("torch is not installed")
    pytest.importorskip("transformers")
    proc = subprocess.run(
        [sys.executable, str(BENCH / "bench_llm.py"), "--quick", "--json", "--models", "gpt2",
         "--layers", "1"],
        capture_output=True, text=True, timeout=600, env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (r,) = json.loads(proc.stdout.strip().splitlines()[-1])["models"]
    assert r["model"] == "gpt2" and r["layers"] == 1
    assert set(r["us"]) == {"eager", "torch", "torch_tags", "floor", "jg_c", "jg_py", "jg_noskip"}
    assert all(v > 0 for v in r["us"].values()), r["us"]
    assert r["torch_guards"] > 0 and r["jg_leaves"] > 0 and r["delegated"] >= 0
    assert {"jg_c/torch", "jg_c/floor", "jg_py/torch", "jg_py/floor"} <= set(r["ratios"])
    assert "TENSOR_MATCH" in r["torch_kinds"] and "TENSOR_MATCH" in r["jg_kinds"]
