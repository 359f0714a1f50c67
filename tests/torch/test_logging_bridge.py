"""jitguard._src.torch.logging_bridge: jitguard's logs and trace inside torch's logging
([Note: jitguard in torch's logging]); one test per torch internal it uses, then the whole
thing through TORCH_LOGS / TORCH_TRACE in a fresh process."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import jitguard as jg  # noqa: E402
from jitguard._src import logs, structured  # noqa: E402
from jitguard._src.torch import logging_bridge  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_LOGS", "TORCH_TRACE",
                                                                      "JITGUARD_"))}
    full.update(PYTHONPATH=str(ROOT / "src"), **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full, timeout=300, cwd=ROOT)


# ---- one test per torch internal ---------------------------------------------------------


def test_internal_register_log() -> None:
    """torch._logging._internal.register_log: installing makes 'jitguard' a torch log."""
    from torch._logging import _internal

    import jitguard.torch  # noqa: F401  (loads the integration, which installs the bridge)

    logging_bridge.install()
    assert _internal.log_registry.is_log("jitguard")
    assert _internal.log_registry.log_alias_to_log_qnames["jitguard"] == ["jitguard"]


def test_internal_log_state_artifacts() -> None:
    """torch._logging._internal.log_state.is_artifact_enabled answers for an artifact name."""
    from torch._logging import _internal

    state = _internal._get_log_state()
    try:
        _internal._set_log_state(_internal.LogState())
        assert logging_bridge.torch_artifact_enabled("recompiles") is False
        _internal.log_state.enable_artifact("recompiles")
        assert logging_bridge.torch_artifact_enabled("recompiles") is True
    finally:
        _internal._set_log_state(state)


def test_internal_default_formatter() -> None:
    """torch._logging._internal.DEFAULT_FORMATTER formats a jitguard record in torch's form."""
    from torch._logging import _internal

    record = logging.LogRecord("jitguard.recompiles", logging.INFO, __file__, 7, "a\nb", None, None)
    text = _internal.DEFAULT_FORMATTER.format(record)
    lines = text.splitlines()
    assert len(lines) == 2 and lines[0].startswith("I") and lines[0].endswith("] a")
    assert ":7] " in lines[0] and lines[1].endswith("] b")


def test_internal_trace_log_and_its_formatter(tmp_path: Path) -> None:
    """torch._logging._internal.trace_log: a handler with root_dir says where torch traces,
    and debug() with metadata/payload extras is written as a trace record."""
    from torch._logging import _internal

    assert logging_bridge.torch_trace_dir() is None or isinstance(
        logging_bridge.torch_trace_dir(), str)
    handler = _internal.LazyTraceHandler(str(tmp_path))
    handler.setFormatter(_internal.TorchLogsFormatter(trace=True))
    _internal.trace_log.addHandler(handler)
    try:
        assert logging_bridge.torch_trace_dir() == str(tmp_path)
        sink = logging_bridge.TorchTraceSink()
        sink.write({"jitguard_test": {}, "frame_id": 5, "frame_compile_id": 0, "attempt": 0},
                   "x\ny", "w.py:1")
    finally:
        _internal.trace_log.removeHandler(handler)
        handler.close()
    (path,) = tmp_path.iterdir()
    lines = path.read_text().splitlines()
    record = next(line for line in lines if "jitguard_test" in line)
    i = lines.index(record)
    assert json.loads(record.split("] ", 1)[1]) == {
        "jitguard_test": {}, "frame_id": 5, "frame_compile_id": 0, "attempt": 0}
    assert lines[i + 1:i + 3] == ["\tx", "\ty"]


def test_internal_intern_string() -> None:
    """torch._logging.structured.intern_string: one index per string, stable."""
    sink = logging_bridge.TorchTraceSink()
    a = sink.intern("/jitguard/test/a.py")
    assert sink.intern("/jitguard/test/a.py") == a
    assert sink.intern("/jitguard/test/b.py") != a


# ---- the whole thing ---------------------------------------------------------------------

_PROGRAM = """
import torch, jitguard as jg

@torch.compile(backend="eager")
def g(x):
    return x + 1

g(torch.ones(2))

@jg.specialize
def f(x, n):
    return x * n

f(torch.ones(3), 2)
f(torch.ones(3), 3)
f(torch.ones(4, 2), 3)
"""


def test_torch_logs_recompiles_and_jitguard() -> None:
    """TORCH_LOGS="recompiles,jitguard" shows jitguard's recompile reasons and other logs."""
    out = _run(_PROGRAM, TORCH_LOGS="recompiles,jitguard")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Recompiling function f in " in out.stderr
    assert "- 0/0: L['n'] == 2 failed: got 3" in out.stderr
    assert "tensor 'L['x']' rank mismatch. expected 1, actual 2" in out.stderr
    assert "jitguard/_src/cache/miss.py" in out.stderr  # torch's prefix: the log call's file


def test_torch_logs_recompiles_alone_turns_jitguards_on() -> None:
    """TORCH_LOGS=recompiles alone also shows jitguard's recompile reasons (not its other
    logs)."""
    out = _run(_PROGRAM, TORCH_LOGS="recompiles")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "- 0/0: L['n'] == 2 failed: got 3" in out.stderr
    assert "miss:" not in out.stderr


def test_torch_logs_without_recompiles_shows_nothing_of_jitguard() -> None:
    """Without a TORCH_LOGS that names them, jitguard's logs stay off."""
    out = _run(_PROGRAM, TORCH_LOGS="dynamo")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Recompiling function f" not in out.stderr


def test_torch_trace_holds_jitguard_events_beside_torchs(tmp_path: Path) -> None:
    """Under TORCH_TRACE, jitguard's compile events go into torch's own trace file, which
    real tlparse renders with both."""
    out = _run(_PROGRAM, TORCH_TRACE=str(tmp_path / "trace"))
    assert out.returncode == 0, out.stderr[-3000:]
    (log_file,) = (tmp_path / "trace").iterdir()
    text = log_file.read_text()
    assert '"dynamo_output_graph"' in text  # torch's own
    assert '"jitguard_check_source"' in text and text.count('"recompile_reasons"') == 2
    tlparse = shutil.which("tlparse") or str(Path(sys.executable).parent / "tlparse")
    if not Path(tlparse).is_file():
        pytest.skip("tlparse is not installed (it is in the dev extras)")
    done = subprocess.run([tlparse, str(log_file), "-o", str(tmp_path / "out"), "--no-browser",
                           "--strict"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    directory: dict[str, Any] = json.loads((tmp_path / "out" / "compile_directory.json").read_text())
    names = {k: [a["name"].rsplit("_", 1)[0] for a in v["artifacts"]] for k, v in directory.items()}
    assert "recompile_reasons" in names["[0/1]"] and "recompile_reasons" in names["[0/2]"]
    assert "dynamo_output_graph" in names["[0/0]"] and "jitguard_check_source" in names["[0/0]"]


def test_install_adds_no_sink_without_torch_trace() -> None:
    """In a process without TORCH_TRACE the torch sink is not among the trace sinks."""
    if logging_bridge.torch_trace_dir() is None:
        assert all(not isinstance(s, logging_bridge.TorchTraceSink) for s in structured.sinks())
    assert "recompiles" not in logs.turned_on() or logging_bridge.torch_artifact_enabled(
        "recompiles")


# ---- tensor detail -----------------------------------------------------------------------


def test_tensor_match_detail() -> None:
    """TENSOR_MATCH's detail: type, dtype, device, sizes, strides (None where dynamic),
    requires_grad, layout, dispatch keys."""
    from jitguard._src.torch.tensor_match import TensorMatch

    x = torch.zeros(3, 4, requires_grad=True).t()
    guard = jg.LocalSource("x").make_guard(jg.GuardBuilder.TENSOR_MATCH)
    params = TensorMatch().expect(x, guard, dynamic_dims=(1,))
    detail = TensorMatch().detail(params)
    assert detail["type"] == "Tensor" and detail["dtype"] == "torch.float32"
    assert detail["device"] == "cpu" and detail["requires_grad"] is True
    assert detail["sizes"] == [4, None] and detail["strides"] == [1, 4]
    assert detail["layout"] == "torch.strided" and detail["dispatch_keys"].startswith("DispatchKeySet(")


def test_explain_reports_tensor_details() -> None:
    """explain(f) of a function of tensors shows each tensor guard's dtype, device, sizes,
    strides and requires_grad on one line."""

    @jg.specialize
    def f(x: Any, w: Any) -> Any:
        return x.double() @ w

    f(torch.ones(2, 3), torch.ones(3, 5, dtype=torch.float64))
    text = str(jg.explain(f))
    assert ("    TENSOR_MATCH L['w']: type=Tensor dtype=torch.float64 device=cpu sizes=[3, 5] "
            "strides=[5, 1] requires_grad=False layout=torch.strided") in text
    guards = jg.explain(f).entries[0]["guards"]
    x = next(g for g in guards if g["sources"] == ["L['x']"])
    assert x["detail"]["sizes"] == [2, 3] and x["detail"]["dtype"] == "torch.float32"


def test_tensors_match_detail_per_source() -> None:
    """TENSORS_MATCH reports one tensor detail per source, in source order."""
    import functools

    from jitguard._src.torch.batched import TensorsMatch

    a, b = torch.ones(2), torch.zeros(3, dtype=torch.int64)
    guard = jg.LocalSource("a").make_guard(
        functools.partial(jg.GuardBuilder.TENSORS_MATCH, others=(jg.LocalSource("b"),)))
    params = TensorsMatch().expect((a, b), guard)
    per = TensorsMatch().detail(params)["per_source"]
    assert [(d["dtype"], d["sizes"]) for d in per] == [("torch.float32", [2]), ("torch.int64", [3])]
