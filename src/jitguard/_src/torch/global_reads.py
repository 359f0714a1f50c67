"""Which code objects of one module ran while a function was traced, so that the globals
they name can be guarded like those of the function itself.

May import: nothing but the standard library.

# [Note: Globals read by helpers]
# A trace bakes in every global that the code it runs reads: the function's own, and those
# of the helpers it calls and of the ``forward`` methods of its modules. Before tracing,
# jitguard.torch.compile guards the globals the function's own code names (it must, to
# watch their attribute reads). While tracing, a profile function records each Python
# function that starts running with the *root globals* (the module dict of the compiled
# function, or of the class that defines a compiled module's ``forward``); after the trace
# the globals each of those code objects names are guarded the same way, through a source
# that reaches that module dict from the entry's arguments (``G[...]``, or
# ``type(L[...]).forward.__globals__[...]``). Helpers defined in other modules (their
# globals are another dict, which no source of the entry reaches) are not covered; nor is
# anything when another profile function that cannot be chained (a C profiler such as
# cProfile) is active: then ``codes_run_with`` yields None and says so at info level.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import types
from collections.abc import Iterator
from typing import Any, Optional

__all__ = ["codes_run_with"]

log = logging.getLogger("jitguard.torch")


@contextlib.contextmanager
def codes_run_with(root: dict[str, Any]) -> Iterator[Optional[set[types.CodeType]]]:
    """Within the block, record on this thread the code of every Python function that
    starts running with ``root`` as its globals; yields that set, or None when another
    profile function is set and cannot be chained (nothing is recorded then)."""
    previous = sys.getprofile()
    if previous is not None and not isinstance(previous, types.FunctionType):
        log.info("a profiler is active: globals read by helpers of the traced function are "
                 "not guarded ([Note: Globals read by helpers])")
        yield None
        return
    seen: set[types.CodeType] = set()

    def profile(frame: types.FrameType, event: str, arg: Any) -> Any:
        if event == "call" and frame.f_globals is root:
            seen.add(frame.f_code)
        if previous is not None:
            previous(frame, event, arg)

    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(previous)
