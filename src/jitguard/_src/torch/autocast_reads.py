"""Which autocast dtypes a trace reads, so that an entry whose graph never read one need not
pin it, and whether it sets autocast state other than through ``torch.autocast``.

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
# The device a reader is asked about is normalized (``"cpu:0"`` is ``"cpu"``); a value that
# is no device string counts as every device (``UNKNOWN``).
#
# [Note: Autocast set outside torch.autocast]
# ``torch.autocast`` blocks are recorded in a pre-dispatch graph (their ``__enter__`` calls
# the tracing mode), but a direct ``torch.set_autocast_enabled(...)`` (or a dtype setter) in
# the function changes the state the trace runs under without recording anything: the graph
# would run those ops without autocast. So while tracing, the ``torch.set_autocast_*``
# setters (the cache setter aside, which changes no result) are wrapped too, and a call from
# anywhere but ``torch.amp.autocast_mode`` is recorded; jitguard.torch.compile then treats
# the function as untraceable (it runs eagerly).
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
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch

__all__ = ["UNKNOWN", "AutocastAccess", "autocast_dtype_reads"]

#: Recorded when a reader was called with something other than a device-type string: every
#: device's dtype must then be assumed read.
UNKNOWN = "*"


def _device_type(device: Any) -> str:
    if not isinstance(device, str):
        return UNKNOWN
    try:
        return torch.device(device).type
    except (RuntimeError, ValueError):
        return UNKNOWN


def _device_of_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    return _device_type(args[0] if args else kwargs.get("device_type", UNKNOWN))


# torch attribute -> the device whose dtype it reads from its arguments.
_READERS: dict[str, Callable[[tuple[Any, ...], dict[str, Any]], str]] = {
    "get_autocast_dtype": _device_of_call,
    "get_autocast_cpu_dtype": lambda a, k: "cpu",
    "get_autocast_gpu_dtype": lambda a, k: "cuda",
}
# The setters whose direct use a graph cannot record ([Note: Autocast set outside
# torch.autocast]).
_SETTERS = tuple(
    name for name in dir(torch)
    if name.startswith("set_autocast_") and name != "set_autocast_cache_enabled"
)
_AUTOCAST_MODULE = "torch.amp.autocast_mode"


class AutocastAccess:
    """What a block did with autocast state on this thread: ``dtypes``, the device types
    whose dtype was read (``UNKNOWN``: any), and ``direct_writes``, the setters called from
    outside ``torch.autocast`` (``"torch.set_autocast_enabled from mymodule"``)."""

    def __init__(self) -> None:
        self.dtypes: set[str] = set()
        self.direct_writes: list[str] = []

    def merge(self, other: AutocastAccess) -> None:
        self.dtypes |= other.dtypes
        self.direct_writes += other.direct_writes


_lock = threading.Lock()
_depth = 0
_originals: dict[str, Any] = {}
_tls = threading.local()


def _recording(name: str, original: Any) -> Callable[..., Any]:
    device_of = _READERS[name]

    def reader(*args: Any, **kwargs: Any) -> Any:
        access = getattr(_tls, "access", None)
        if access is not None:
            access.dtypes.add(device_of(args, kwargs))
        return original(*args, **kwargs)

    return _dressed(reader, name, original)


def _watching(name: str, original: Any) -> Callable[..., Any]:
    def setter(*args: Any, **kwargs: Any) -> Any:
        access = getattr(_tls, "access", None)
        if access is not None:
            caller = sys._getframe(1).f_globals.get("__name__", "?")
            if caller != _AUTOCAST_MODULE:
                access.direct_writes.append(f"torch.{name} from {caller}")
        return original(*args, **kwargs)

    return _dressed(setter, name, original)


def _dressed(fn: Any, name: str, original: Any) -> Any:
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = getattr(original, "__doc__", None)
    fn.__wrapped__ = original
    return fn


@contextlib.contextmanager
def autocast_dtype_reads() -> Iterator[AutocastAccess]:
    """Within the block, record on this thread the device types whose autocast dtype is read
    through torch's readers and the autocast setters called from outside ``torch.autocast``;
    yields the record (inner blocks' records count for outer ones)."""
    global _depth
    access = AutocastAccess()
    outer = getattr(_tls, "access", None)
    with _lock:
        if _depth == 0:
            for names, wrap in ((tuple(_READERS), _recording), (_SETTERS, _watching)):
                for name in names:
                    original = getattr(torch, name, None)
                    if original is not None:
                        _originals[name] = original
                        setattr(torch, name, wrap(name, original))
        _depth += 1
    _tls.access = access
    try:
        yield access
    finally:
        _tls.access = outer
        if outer is not None:
            outer.merge(access)
        with _lock:
            _depth -= 1
            if _depth == 0:
                for name, original in _originals.items():
                    setattr(torch, name, original)
                _originals.clear()
