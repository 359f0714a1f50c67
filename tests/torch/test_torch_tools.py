"""torch's tools on jitguard-compiled functions: ``torch._dynamo.explain`` and torch.compile
see the user's function through a jitguard wrapper; under ``TORCH_TRACE`` a function's
recompiles keep one frame id; ``JITGUARD_TRACE`` holds each captured graph as torch's
``dynamo_output_graph`` record, which real tlparse renders ([Note: torch's tools])."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch._dynamo.testing import CompileCounter  # noqa: E402

import jitguard.torch as jgt  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

SRC = str(Path(jgt.__file__).resolve().parents[2])


def _breaks(x: Any) -> Any:
    y = x.sin()
    print("", end="")
    return y.cos()


def test_dynamo_explain_reports_the_users_graphs() -> None:
    """torch._dynamo.explain of a jitguard wrapper: the user's graphs and break, no error."""
    cf = jgt.compile(_breaks)
    report = torch._dynamo.explain(cf)(torch.randn(3))
    want = torch._dynamo.explain(_breaks)(torch.randn(3))
    assert report.graph_count == want.graph_count == 2
    assert report.graph_break_count == want.graph_break_count == 1
    ops = [n.target for g in report.graphs for n in g.graph.nodes if n.op == "call_method"]
    assert "sin" in ops and "cos" in ops


def test_dynamo_explain_of_a_compiled_module() -> None:
    """explain of a jitguard-compiled module reports the module's graph."""
    m = torch.nn.Linear(3, 2)
    report = torch._dynamo.explain(jgt.compile(m))(torch.randn(4, 3))
    assert report.graph_count == 1 and report.graph_break_count == 0


def test_torch_compile_inlines_a_jitguard_wrapper_it_calls() -> None:
    """A torch.compile'd function calling a jitguard wrapper traces the user's function
    into its own graph (never jitguard's dispatcher), with eager's result."""
    inner = jgt.compile(lambda x: x.sin() * 2)

    def outer(x: Any) -> Any:
        return inner(x) + 1

    cnt = CompileCounter()
    x = torch.randn(3)
    torch.testing.assert_close(torch.compile(outer, backend=cnt, fullgraph=True)(x),
                               x.sin() * 2 + 1)
    assert cnt.frame_count == 1 and cnt.op_count >= 3


def test_wrapper_still_dispatches_through_jitguard() -> None:
    """The marks for torch's tools do not change a plain call: jitguard's cache serves it."""
    cf = jgt.compile(lambda x: x + 1)
    cf(torch.randn(2))
    cf(torch.randn(2))
    assert cf.cache.stats().hits == 1


SCRIPT = textwrap.dedent('''
    import torch, jitguard.torch as jgt
    def f(x, n):
        return x.sin() * n
    cf = jgt.compile(f, dynamic=False)
    cf(torch.randn(3), 2)
    cf(torch.randn(3), 3)
    cf(torch.randn(3), 4)
''')


def _records(directory: Path) -> list[str]:
    return [line for path in sorted(directory.glob("*.log")) for line in path.read_text().splitlines()]


def _run(tmp_path: Path, **env: str) -> None:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    subprocess.run([sys.executable, str(script)], check=True, timeout=300, cwd=tmp_path,
                   env={**os.environ, "PYTHONPATH": SRC, "JITGUARD_VERIFY": "0", **env})


def _frames(lines: list[str], event: str) -> list[tuple[int, int]]:
    import json

    out = []
    for line in lines:
        if f'{{"{event}"' in line:
            record = json.loads(line[line.index("] ") + 2:])
            if "frame_id" in record:  # torch writes some records outside a compile
                out.append((record["frame_id"], record["frame_compile_id"]))
    return out


def test_torch_trace_keeps_one_frame_id_across_recompiles(tmp_path: Path) -> None:
    """TORCH_TRACE: torch's graph records and jitguard's compile records of one function's
    three compiles share one frame id, compile ids 0, 1, 2."""
    trace = tmp_path / "trace"
    _run(tmp_path, TORCH_TRACE=str(trace))
    lines = _records(trace)
    graphs = _frames(lines, "dynamo_output_graph")
    metrics = _frames(lines, "compilation_metrics")
    assert len(graphs) == 3 and sorted(graphs) == sorted(metrics)
    assert len({f for f, _ in graphs}) == 1 and sorted(c for _, c in graphs) == [0, 1, 2]


def test_jitguard_trace_holds_the_graphs_and_tlparse_renders_them(tmp_path: Path) -> None:
    """JITGUARD_TRACE: one dynamo_output_graph record per capture, beside the compile's
    other records; real tlparse renders the file, a graph page per compile."""
    trace = tmp_path / "trace"
    _run(tmp_path, JITGUARD_TRACE=str(trace))
    lines = _records(trace)
    graphs = _frames(lines, "dynamo_output_graph")
    assert len(graphs) == 3 and sorted(graphs) == sorted(_frames(lines, "compilation_metrics"))
    assert any("class GraphModule" in line for line in lines)
    tlparse = shutil.which("tlparse") or os.path.join(os.path.dirname(sys.executable), "tlparse")
    if not os.path.exists(tlparse):
        pytest.skip("tlparse is not installed")
    (latest,) = sorted(glob.glob(str(trace / "*.log")), key=os.path.getmtime)[-1:]
    out = tmp_path / "tl_out"
    subprocess.run([tlparse, latest, "-o", str(out), "--no-browser", "--strict"], check=True,
                   timeout=120, capture_output=True)
    pages = sorted(out.glob("*/dynamo_output_graph*.txt"))
    assert len(pages) == 3 and all("sin" in p.read_text() for p in pages)
