"""What a trace read of its inputs: tensor metadata the guards do not pin, and instance
attributes of the argument objects.

May import: jitguard._src.guards, jitguard._src.torch.module, torch.

``MetadataReads`` is the torch-function mode of [Note: What a trace assumes] (``trace``).

# [Note: Watching attribute reads]
# A trace bakes in every plain attribute the function reads from an argument object
# (``self.eps``, ``cfg.scale``): those must be guarded by value, and only those (a module
# has many constant attributes, ``in_features``, ``_is_full_backward_hook``, that its
# ``forward`` never reads, and each guard costs a check on every call). While the function
# is traced, the class of each watched object gets a ``__getattribute__`` that records the
# reads of watched objects on this thread (other instances, other threads: unchanged), and
# loses it afterwards, also on error; the objects keep their class, so ``type(obj)`` is
# what eager code sees. The watched objects are the plain objects among the arguments and
# every module (and submodule) of an ``nn.Module`` argument, each with the source it is
# reached by. A read of ``__dict__`` (which exposes every attribute) counts as a read of
# all of them, except the reads ``nn.Module``'s own methods make to find parameters and
# submodules. An object whose class cannot take the attribute (a built-in or extension
# type) is reported as unwatched, and the caller guards all its constant attributes.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ..guards import Source
from .module import submodule_source

__all__ = ["ALL", "AttributeReads", "MetadataReads", "watch_attributes"]

ALL = "*"  # recorded when ``__dict__`` itself is read

# nn.Module's own methods read ``self.__dict__`` to find parameters, buffers and submodules
# (``Module.__getattr__``); those reads expose nothing the function sees.
_MODULE_FILE = torch.nn.Module.__getattr__.__code__.co_filename
_lock = threading.Lock()
_active = threading.local()
# class -> [times patched, what its own __dict__ had under __getattribute__ (or _NONE)]
_patched: dict[type, list[Any]] = {}
_NONE = object()


def _patch(cls: type) -> None:
    """Make ``cls`` record attribute reads of watched objects (nested and thread-safe: the
    first patch installs, the last unpatch restores)."""
    with _lock:
        entry = _patched.get(cls)
        if entry is not None:
            entry[0] += 1
            return
        own = cls.__dict__.get("__getattribute__", _NONE)
        base_get = cls.__getattribute__

        def __getattribute__(self: Any, name: str) -> Any:
            reads = getattr(_active, "reads", None)
            if reads is not None:
                names = reads.get(id(self))
                if names is not None:
                    if name != "__dict__":
                        names.add(name)
                    elif sys._getframe(1).f_code.co_filename != _MODULE_FILE:
                        names.add(ALL)
            return base_get(self, name)  # type: ignore[call-arg]

        setattr(cls, "__getattribute__", __getattribute__)
        _patched[cls] = [1, own]


def _unpatch(cls: type) -> None:
    with _lock:
        entry = _patched[cls]
        entry[0] -= 1
        if entry[0]:
            return
        del _patched[cls]
        if entry[1] is _NONE:
            delattr(cls, "__getattribute__")
        else:
            setattr(cls, "__getattribute__", entry[1])


class AttributeReads:
    """The result: per watched source, the attribute names read; ``unwatched`` sources
    could not be watched."""

    def __init__(self) -> None:
        self.by_source: dict[Source, set[str]] = {}
        self.unwatched: list[Source] = []
        self.objects: dict[Source, Any] = {}


def _targets(leaves: Any) -> list[tuple[Source, Any]]:
    out: list[tuple[Source, Any]] = []
    seen: set[int] = set()
    for source, value in leaves:
        if isinstance(value, torch.nn.Module):
            stack = [(source, value)]
            while stack:
                src, m = stack.pop()
                if id(m) in seen:
                    continue
                seen.add(id(m))
                out.append((src, m))
                for name, child in m._modules.items():
                    if child is not None:
                        stack.append((submodule_source(src, name), child))
        elif id(value) not in seen:
            seen.add(id(value))
            out.append((source, value))
    return out


@contextlib.contextmanager
def watch_attributes(leaves: Any) -> Iterator[AttributeReads]:
    """Record attribute reads of the objects in ``leaves`` ((source, object) pairs) on this
    thread for the duration of the block (see [Note: Watching attribute reads])."""
    result = AttributeReads()
    reads: dict[int, set[str]] = {}
    patched: list[type] = []
    try:
        for source, obj in _targets(leaves):
            result.objects[source] = obj
            cls = type(obj)
            if cls not in patched:
                try:
                    _patch(cls)
                except (TypeError, AttributeError):  # a built-in or otherwise fixed type
                    result.unwatched.append(source)
                    continue
                patched.append(cls)
            names: set[str] = set()
            reads[id(obj)] = names
            result.by_source[source] = names
        previous = getattr(_active, "reads", None)
        _active.reads = reads
        try:
            yield result
        finally:
            _active.reads = previous
    finally:
        for cls in patched:
            _unpatch(cls)


# Tensor metadata that TENSOR_MATCH does not pin. A trace that reads one of these of an
# input has baked the value in: the storage offset gets a guard of its own, the rest make
# the function untraceable (it then runs eagerly).
_UNPINNED = frozenset({
    "_is_view", "_base", "is_leaf", "grad", "grad_fn", "_version", "untyped_storage",
    "storage", "data_ptr", "is_set_to", "_cdata", "is_shared", "is_pinned", "names",
    "_typed_storage", "output_nr",
})


class MetadataReads(TorchFunctionMode):
    """Innermost torch-function mode while the function runs under ``make_fx``: records
    reads of the input fakes' metadata that the guards would not pin, whoever reads them
    (the function or a Python decomposition in torch)."""

    def __init__(self, inputs: dict[int, Source]) -> None:
        super().__init__()
        self.inputs = inputs
        self.offsets: set[Source] = set()
        self.unguarded: list[tuple[str, Source]] = []
        self.inference = torch.is_inference_mode_enabled()
        self.enters_inference = False

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if torch.is_inference_mode_enabled() != self.inference:
            # make_fx does not record inference_mode blocks: the graph would run the op
            # outside it (grad mode and autocast blocks are recorded, pre_dispatch=True)
            self.enters_inference = True
        name = getattr(func, "__name__", "")
        if name == "__get__":
            name = getattr(getattr(func, "__self__", None), "__name__", "")
        if args and (name == "storage_offset" or name in _UNPINNED):
            source = self.inputs.get(id(args[0]))
            if source is not None:
                if name == "storage_offset":
                    self.offsets.add(source)
                else:
                    self.unguarded.append((name, source))
        return func(*args, **(kwargs or {}))
