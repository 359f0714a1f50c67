"""Recompile logs under ``TORCH_LOGS=recompiles`` as short as torch.compile's for the same
calls ([Note: Recompile reasons] in jitguard/_src/cache/reasons.py): each scenario runs under
torch.compile and under jitguard.torch.compile in one process, and the lines each logs are
counted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]

# Runs one scenario under both compilers and prints {compiler: [message, ...]}: every
# message of torch's recompiles artifact and of jitguard's recompile logs, per compiler.
_SCRIPT = r'''
import json, logging, sys
import torch
import jitguard.torch as jgt

sys.path.insert(0, sys.argv[2])
messages = []

class Keep(logging.Handler):
    def emit(self, record):
        messages.append(record.getMessage())

for name in ("torch._dynamo.guards.__recompiles", "torch._dynamo.guards.__recompiles_verbose",
             "jitguard.recompiles", "jitguard.recompiles_verbose"):
    logging.getLogger(name).addHandler(Keep(logging.DEBUG))


def two_models(compile):
    torch.manual_seed(0)
    def make():
        return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    m1, m2 = make(), make()
    c1, c2 = compile(m1), compile(m2)
    for c in (c1, c2):
        c(torch.randn(3, 4)); c(torch.randn(5, 4)); c(torch.randn(7, 4))
    m1.double(); c1(torch.randn(7, 4, dtype=torch.float64))
    with torch.no_grad():
        c1(torch.randn(7, 4, dtype=torch.float64)); c2(torch.randn(7, 4))
    m2.eval(); c2(torch.randn(7, 4))


def gpt2_train(compile):
    from _llm_models import build
    model, kwargs = build("gpt2", layers=2)
    c = compile(model)
    with torch.no_grad():
        c(**kwargs); c(**kwargs)
        model.train()
        c(**kwargs)


scenario = {"two_models": two_models, "gpt2_train": gpt2_train}[sys.argv[1]]
out = {}
for name, compile in (("torch", torch.compile), ("jitguard", jgt.compile)):
    torch._dynamo.reset()
    messages.clear()
    scenario(compile)
    out[name] = list(messages)
print(json.dumps(out))
'''


def _messages(scenario: str, logs: str = "recompiles") -> dict[str, list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_LOGS", "JITGUARD_"))}
    env.update(PYTHONPATH=str(ROOT / "src"), TORCH_LOGS=logs)
    out = subprocess.run([sys.executable, "-c", _SCRIPT, scenario, str(ROOT / "bench")],
                         capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-4000:]
    result: dict[str, list[str]] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _lines(messages: list[str]) -> int:
    return sum(len(m.splitlines()) for m in messages)


def test_two_sequential_models_log_no_more_than_torch() -> None:
    """Two small nn.Sequential models (new batch sizes, .double(), no_grad, .eval()): as many
    recompiles as torch.compile logs, in no more lines, each entry's first failure with no
    user stack into torch's own files and no 'could not be read' line."""
    got = _messages("two_models")
    assert got["torch"] and got["jitguard"], got
    assert _lines(got["jitguard"]) <= _lines(got["torch"]), got
    text = "\n".join(got["jitguard"])
    assert "could not be read" not in text and "container.py\", line" not in text, text
    assert "linear.py" not in text and "tensor 'input' dtype mismatch" in text, text
    assert "L['" not in text, text


def test_gpt2_train_flip_logs_no_more_than_torch() -> None:
    """GPT-2 (2 layers) called in eval mode, then after .train(): one recompile, whose
    message is no longer than torch.compile's, names the first failed training flag and
    how many more failed, and shows user frames only."""
    got = _messages("gpt2_train")
    assert len(got["jitguard"]) == 1 and got["torch"], got
    assert _lines(got["jitguard"]) <= _lines(got["torch"]), got
    text = got["jitguard"][0]
    assert ".training is False failed: got True (+" in text and "more)" in text, text
    assert "torch/nn/modules" not in text and "modeling_gpt2.py" in text, text


def test_verbose_recompiles_give_every_failure() -> None:
    """TORCH_LOGS=recompiles_verbose: the GPT-2 flip lists every failed training flag, once."""
    got = _messages("gpt2_train", "recompiles_verbose")
    text = "\n".join(got["jitguard"])
    reasons = [line for line in text.splitlines() if "failed: got True" in line]
    assert len(reasons) > 1 and len(reasons) == len(set(reasons)), text
    assert "(+" not in text, text
