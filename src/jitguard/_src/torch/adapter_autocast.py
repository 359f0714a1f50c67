"""The part of the torch adapter that sees whether a capture read an autocast dtype
([Note: Autocast dtypes a capture did not read]): ``recording_folds`` records what Dynamo
constant-folded while capturing, ``reads_autocast`` says whether that or the graph names
autocast.

May import: torch (its private modules too), the standard library. Nothing from jitguard.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Optional

import torch
import torch._dynamo.variables.torch as _dynamo_torch_vars

__all__ = ["reads_autocast", "recording_folds"]


# [Note: Autocast dtypes a capture did not read]
# Dynamo folds ``torch.get_autocast_dtype(...)`` (and the other autocast readers) to a
# constant while tracing, without a guard, and a ``torch.autocast(device)`` entered in the
# function bakes the dtype of that moment into the graph (an ``_enter_autocast`` node);
# torch's GlobalStateGuard compares a device's autocast dtype only while its autocast is
# on. So jitguard pins the CPU and CUDA autocast dtypes (two ~0.15 us reads a check) only
# for a capture that could have baked one in: while capturing, Dynamo's table of
# constant-folded functions is replaced by a recording copy (every function Dynamo asks
# it about is seen), and the graph (with its nested graphs) is searched for a call whose
# target names autocast. Either sets ``Captured.reads_autocast``; any function whose name
# contains "autocast" counts, read or not (conservative). Otherwise the entry's
# GLOBAL_STATE guards each dtype only while that device's autocast is on, which is what
# the graph can observe of it.


class _RecordingFolds(dict[Any, Any]):
    """Dynamo's constant-fold table, noting each function it is asked about."""

    def __init__(self, table: dict[Any, Any], seen: list[Any]) -> None:
        super().__init__(table)
        self.seen = seen

    def __contains__(self, fn: object) -> bool:
        self.seen.append(fn)
        return dict.__contains__(self, fn)


_FOLDS = "constant_fold_functions"


@contextlib.contextmanager
def recording_folds(seen: list[Any]) -> Iterator[None]:
    table: dict[Any, Any] = getattr(_dynamo_torch_vars, _FOLDS)
    setattr(_dynamo_torch_vars, _FOLDS, _RecordingFolds(table, seen))
    try:
        yield
    finally:
        setattr(_dynamo_torch_vars, _FOLDS, table)


def _names_autocast(obj: Any) -> bool:
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or repr(obj)
    return "autocast" in str(name).lower()


def _graph_names_autocast(gm: Optional[torch.fx.GraphModule]) -> bool:
    if gm is None:
        return False
    for sub in gm.modules():
        graph = getattr(sub, "graph", None)
        if isinstance(graph, torch.fx.Graph):
            for node in graph.nodes:
                if node.op in ("call_function", "call_method") and (
                    _names_autocast(node.target) or "autocast" in str(node.target).lower()
                ):
                    return True
    return False


def reads_autocast(folded: list[Any], gm: Optional[torch.fx.GraphModule]) -> bool:
    """Whether the capture read an autocast dtype: a folded function or the graph names one."""
    return any(_names_autocast(f) for f in folded) or _graph_names_autocast(gm)
