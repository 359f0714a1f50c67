"""jitguard's logs and structured trace inside torch's logging (``TORCH_LOGS``,
``TORCH_TRACE``). Every torch-logging internal jitguard uses is here.

May import: jitguard._src.logs, jitguard._src.structured, torch.

# [Note: jitguard in torch's logging]
# torch parses ``TORCH_LOGS`` when it is imported, before jitguard's integration can
# register anything; ``jitguard`` is accepted there as a module name, and torch then sets
# the level of the ``jitguard`` logger tree and gives it torch's handler. So
# ``TORCH_LOGS="recompiles,jitguard"`` shows torch's recompiles and every jitguard log at
# INFO (``+jitguard``: DEBUG). On ``install`` this module also:
#   * registers ``jitguard`` as a torch log, so torch's ``TORCH_LOGS=help`` lists it and
#     torch's own re-configuration (``torch._logging.set_logs``) treats it as one of its own;
#   * turns jitguard's ``recompiles`` log on when torch's ``recompiles`` artifact is on (at
#     DEBUG, every failing guard, when ``TORCH_LOGS`` says ``+recompiles``),
#     ``recompiles_verbose`` when torch's ``recompiles_verbose`` is, and ``guards`` when
#     torch's ``guards`` is, in torch's format, unless jitguard's own switch already set
#     them: a program compiled by ``jitguard.torch.compile`` shows its recompile reasons
#     under ``TORCH_LOGS=recompiles``;
#   * when torch writes a structured trace (``TORCH_TRACE``, ``TORCH_DTRACE``,
#     ``TORCH_COMPILE_DEBUG``), adds a sink that writes jitguard's compile events into
#     torch's own stream, through torch's trace logger and torch's table of interned file
#     names, so tlparse shows them beside torch's events ([Note: Structured trace]).
#     jitguard's compile ids are its own: a function that both torch and jitguard compile
#     under the same frame id shares a tlparse folder.
# The torch internals used, each with a test in tests/torch/test_logging_bridge.py:
# ``torch._logging._internal.register_log``, ``log_state`` (``is_artifact_enabled``),
# ``DEFAULT_FORMATTER``, ``trace_log`` (its handlers' ``root_dir``, and ``debug`` with
# ``metadata``/``payload`` extras, which torch's trace formatter writes), and
# ``torch._logging.structured.intern_string``.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Optional

from torch._logging import _internal as _torch_logging
from torch._logging import structured as _torch_structured

from .. import logs, structured

__all__ = ["TorchTraceSink", "install", "torch_trace_dir"]

# torch artifact -> the jitguard log it turns on
_ARTIFACTS = {"recompiles": "recompiles", "recompiles_verbose": "recompiles_verbose",
              "guards": "guards"}

_installed = False


class TorchTraceSink:
    """Writes jitguard's structured records into torch's trace stream."""

    #: records torch writes itself are not written again here (``structured.emit``)
    torch_stream = True

    def intern(self, text: str) -> int:
        return int(_torch_structured.intern_string(text))

    def write(self, record: dict[str, Any], payload: Optional[str], where: str) -> None:
        _torch_logging.trace_log.debug("", extra={"metadata": record, "payload": payload})

    def __repr__(self) -> str:
        return f"<TorchTraceSink {torch_trace_dir()}>"


_SINK = TorchTraceSink()


def torch_trace_dir() -> Optional[str]:
    """The directory torch writes its structured trace to, or None when it writes none."""
    for handler in _torch_logging.trace_log.handlers:
        root = getattr(handler, "root_dir", None)
        if root is not None:
            return str(root)
    return None


def torch_artifact_enabled(name: str) -> bool:
    return bool(_torch_logging.log_state.is_artifact_enabled(name))


def _plus(artifact: str) -> bool:
    """Whether ``TORCH_LOGS`` names ``+artifact`` (torch keeps no level for an artifact, so
    ``+recompiles`` is read from the variable itself: jitguard's verbose recompiles)."""
    items = [item.strip() for item in os.environ.get("TORCH_LOGS", "").split(",")]
    return f"+{artifact}" in items


def install() -> None:
    """Plug jitguard's logs and trace into torch's logging (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    _torch_logging.register_log("jitguard", ["jitguard"])
    mine = logs.turned_on()
    for artifact, name in _ARTIFACTS.items():
        if name not in mine and torch_artifact_enabled(artifact):
            level = logging.DEBUG if _plus(artifact) else logging.INFO
            logs.enable(name, level, _torch_logging.DEFAULT_FORMATTER)
            mine[name] = level
    if torch_trace_dir() is not None:
        structured.add_sink(_SINK)
