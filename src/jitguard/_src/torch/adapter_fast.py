"""The part of the torch adapter that makes a capture's program cheaper to run on a hit
([Note: A hit's cost]): ``fast_helpers`` gives Dynamo's bytecode its own reads of
``torch._dynamo.utils``.

May import: torch (its private modules too), the standard library. Nothing from jitguard.
"""

from __future__ import annotations

import types
from typing import Any

import torch._dynamo.utils as _dynamo_utils

__all__ = ["FAST_UTILS_NAME", "UTILS_ALIAS", "fast_helpers"]


# [Note: A hit's cost]
# A hit runs the transformed bytecode, which reads the graph's inputs from the frame and
# calls the backend's compiled graph. Two things torch.compile's bytecode does there cost
# more than the reads themselves (~0.6-1 us each, measured with a no-op graph), and jitguard
# leaves them out, soundly:
#   * ``record_runtime_overhead`` (Dynamo's config, on by default) brackets the reads with a
#     profiler record ("Pregraph bytecode"), two Python calls even while no profiler runs:
#     the capture turns it off, so a profile of a jitguard hit has no such record;
#   * symbolic sizes, strides and storage offsets are read through
#     ``torch._dynamo.utils.call_size``/``call_stride``/``call_storage_offset``, wrapped
#     in ``torch._disable_dynamo`` so that Dynamo does not trace them (a Python wrapper
#     and an eval-frame switch per read). jitguard's program never runs under Dynamo's
#     frame hook, so the bytecode is given its own name for that module (the code's
#     ``co_names`` entry renamed, which is the same in every Python version), bound in the
#     function's globals to ``_FAST_UTILS``: the three reads done directly
#     (``x.size(i)``: the same call on the same tensor, ``__torch_function__`` included),
#     every other name forwarded to the module itself.
# The function-mode stack is set aside around the compiled graph (Dynamo traced the modes
# into it) only for a capture made while a mode was active (``without_function_modes``):
# GLOBAL_STATE, which every entry checks, pins the stack, so an entry captured with an
# empty stack is only ever hit with one. The bytecode around the graph runs with the stack
# in place: it replays the side effects Dynamo recorded on a mode (a counter the mode
# bumps) through the stack itself.


class _FastDynamoUtils:
    """``torch._dynamo.utils`` as a jitguard program reads it ([Note: A hit's cost])."""

    __slots__ = ()

    @staticmethod
    def call_size(x: Any, i: int) -> int:
        return x.size(i)

    @staticmethod
    def call_stride(x: Any, i: int) -> int:
        return x.stride(i)

    @staticmethod
    def call_storage_offset(x: Any) -> int:
        return x.storage_offset()

    def __getattr__(self, name: str) -> Any:
        return getattr(_dynamo_utils, name)


_FAST_UTILS = _FastDynamoUtils()
#: The global name Dynamo's bytecode reads ``torch._dynamo.utils`` by (its import alias).
UTILS_ALIAS = "__import_" + _dynamo_utils.__name__.replace(".", "_dot_")
#: The name jitguard's programs read it by instead.
FAST_UTILS_NAME = "__jitguard_fast_dynamo_utils"


def fast_helpers(code: types.CodeType, f_globals: dict[str, Any]) -> types.CodeType:
    """``code`` reading ``torch._dynamo.utils`` as ``_FAST_UTILS`` ([Note: A hit's cost]),
    in this code object and the ones nested in it."""
    names = code.co_names
    consts = code.co_consts
    if any(isinstance(c, types.CodeType) for c in consts):
        consts = tuple(fast_helpers(c, f_globals) if isinstance(c, types.CodeType) else c
                       for c in consts)
    if UTILS_ALIAS in names:
        f_globals[FAST_UTILS_NAME] = _FAST_UTILS
        names = tuple(FAST_UTILS_NAME if n == UTILS_ALIAS else n for n in names)
    if names is code.co_names and consts is code.co_consts:
        return code
    return code.replace(co_names=names, co_consts=consts)
