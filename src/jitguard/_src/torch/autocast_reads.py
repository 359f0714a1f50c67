"""Which autocast dtypes a trace reads, so that an entry whose graph never read one need not
pin it.

May import: torch.

# [Note: Autocast dtypes a trace did not read]
# GLOBAL_STATE pins the CPU and CUDA autocast dtypes even while autocast is off, because a
# graph that enters ``torch.autocast(device)`` bakes in the dtype that was current when it
# was traced (torch's own GlobalStateGuard compares a dtype only while its autocast is on,
# so a torch.compile graph can go stale there). Reading the two dtypes costs ~0.3 us a check.
# A graph depends on a device's autocast dtype only if (a) that device's autocast was on
# while tracing (C++ autocast kernels read the dtype), or (b) Python code read it while
# tracing: ``torch.autocast`` reads it on entry (as the default dtype in ``__init__`` and
# to restore it in ``__enter__``), and so do user code and torch's own Python code that call
# ``torch.get_autocast_dtype`` and its deprecated per-device forms. So while a trace runs,
# those readers (the attributes of the ``torch`` module) are replaced by recording wrappers;
# for each device that was not read, jitguard.torch.compile asks the cache to guard
# ``autocast_<device>_dtype_while_enabled`` (the dtype while autocast is on, else None) in
# place of the dtype ([Note: Global states a compiler leaves out]). (a) is covered by that
# weaker state, (b) by the recording.
#
# What it cannot see: code that called through a reference to the reader taken before the
# trace began (``from torch import get_autocast_dtype`` at import time) or through
# ``torch._C`` directly. Such code should enter ``torch.autocast`` with an explicit dtype or
# take the dtype as an argument. The wrappers are in place only while some thread traces;
# a read by another thread in that time is not recorded for this one (recording is
# per thread) and is answered by the real reader.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch

__all__ = ["UNKNOWN", "autocast_dtype_reads"]

#: Recorded when a reader was called with something other than a device-type string: every
#: device's dtype must then be assumed read.
UNKNOWN = "*"


def _device_of_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    device = args[0] if args else kwargs.get("device_type", UNKNOWN)
    return device if isinstance(device, str) else UNKNOWN


# torch attribute -> the device whose dtype it reads from its arguments.
_READERS: dict[str, Callable[[tuple[Any, ...], dict[str, Any]], str]] = {
    "get_autocast_dtype": _device_of_call,
    "get_autocast_cpu_dtype": lambda a, k: "cpu",
    "get_autocast_gpu_dtype": lambda a, k: "cuda",
}

_lock = threading.Lock()
_depth = 0
_originals: dict[str, Any] = {}
_tls = threading.local()


def _recording(name: str, original: Any) -> Callable[..., Any]:
    device_of = _READERS[name]

    def reader(*args: Any, **kwargs: Any) -> Any:
        seen = getattr(_tls, "seen", None)
        if seen is not None:
            seen.add(device_of(args, kwargs))
        return original(*args, **kwargs)

    reader.__name__ = reader.__qualname__ = name
    reader.__doc__ = getattr(original, "__doc__", None)
    reader.__wrapped__ = original  # type: ignore[attr-defined]
    return reader


@contextlib.contextmanager
def autocast_dtype_reads() -> Iterator[set[str]]:
    """Within the block, record on this thread the device types whose autocast dtype is read
    through torch's readers (``UNKNOWN`` if one was called with a non-string); yields the
    set."""
    global _depth
    seen: set[str] = set()
    outer = getattr(_tls, "seen", None)
    with _lock:
        if _depth == 0:
            for name in _READERS:
                original = getattr(torch, name, None)
                if original is not None:
                    _originals[name] = original
                    setattr(torch, name, _recording(name, original))
        _depth += 1
    _tls.seen = seen
    try:
        yield seen
    finally:
        _tls.seen = outer
        if outer is not None:
            outer.update(seen)
        with _lock:
            _depth -= 1
            if _depth == 0:
                for name, original in _originals.items():
                    setattr(torch, name, original)
                _originals.clear()
