"""Loading the C extension ([Note: Loading the extension]): one decision for the dispatcher's
hot path and the generated checks' batch helpers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jitguard
from jitguard._src import native
from jitguard._src.compiler import bulk

SRC = str(Path(jitguard.__file__).resolve().parents[1])

PROBE = """
import sys, types
if {fake_abi} is not None:
    fake = types.ModuleType("jitguard._src._speedups.ext")
    fake.ABI = {fake_abi}
    fake.dicts_lack = lambda *a: "the fake's"
    fake.set_slot_type = lambda cls: None
    sys.modules["jitguard._src._speedups.ext"] = fake
from jitguard._src import native
from jitguard._src.dispatch import fast
from jitguard._src.compiler import bulk
print(native.module is None, fast.speedups_enabled(), bulk.dicts_lack is bulk.dicts_lack_py)
print(fast.why_not())
"""


def probe(fake_abi: object, **env: str) -> list[str]:
    full = {k: v for k, v in os.environ.items() if k != "JITGUARD_PURE_PYTHON"}
    full.update(PYTHONPATH=SRC, **env)
    out = subprocess.run([sys.executable, "-c", PROBE.format(fake_abi=fake_abi)], env=full,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return [*out.stdout.splitlines(), out.stderr]


def test_a_stale_build_is_refused_everywhere() -> None:
    """An extension of another ABI is used by neither the dispatcher nor the batch helpers;
    the reason names the stale build and the rebuild command, once, on the log."""
    flags, reason, stderr = probe(native.ABI - 1)
    assert flags == "True False True"
    assert reason == (f"the extension jitguard._src._speedups.ext is a stale build (ABI "
                      f"{native.ABI - 1}, expected {native.ABI}): rebuild it with "
                      f"`python setup.py build_ext --inplace`")
    assert stderr.count("stale build") == 1


def test_pure_python_turns_both_off() -> None:
    """JITGUARD_PURE_PYTHON=1: no extension use at all, even where a current build exists."""
    flags, reason, _ = probe(native.ABI, JITGUARD_PURE_PYTHON="1")
    assert flags == "True False True" and reason == "JITGUARD_PURE_PYTHON=1"


def test_a_current_build_serves_both() -> None:
    """An extension of this ABI is what the batch helpers call (here a stand-in module)."""
    flags, reason, _ = probe(native.ABI)
    assert flags == "False True False" and reason == "None"


def test_batch_helpers_follow_this_process() -> None:
    """In this process the batch helper is C exactly when the extension is in use."""
    assert (bulk.dicts_lack is bulk.dicts_lack_py) == (native.module is None)
