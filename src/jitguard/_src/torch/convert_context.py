"""What guard conversion's parts share: the result types (``Conversion``, ``Unconverted``),
the state of one conversion passed to every kind converter (``Context``), and the registry
of kind converters keyed by Dynamo's guard kind name ([Note: Converting guard kinds], in
``convert``).

May import: jitguard._src.compiler.*, jitguard._src.guards, jitguard._src.sources,
jitguard._src.torch.* (adapter_sources, convert_sources).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple, Optional

from ..guards import Guard, ShapeGuard, Source
from . import adapter_sources as adapter
from .convert_sources import SourceConverter

__all__ = [
    "GLOBALS_SELF",
    "Context",
    "Conversion",
    "KindFn",
    "TensorSeen",
    "Unconverted",
    "converter_for",
    "kind_converters",
    "register_kind_converter",
]

#: The name the conversion binds a function's globals dict to, in that dict
#: ([Note: Builtins a global may shadow]).
GLOBALS_SELF = "__jitguard_globals__"


class Unconverted(NamedTuple):
    """A Dynamo guard left to torch's guard tree: the entry, its kind, its source's name and
    why it was not converted."""

    entry: Any
    guard_type: str
    name: str
    reason: str

    def __str__(self) -> str:
        return f"{self.guard_type} on {self.name or '(global)'}: {self.reason}"


@dataclasses.dataclass
class Conversion:
    """What ``convert_guards`` returns; see the docstring of ``convert``."""

    guards: list[Guard] = dataclasses.field(default_factory=list)
    shape_guards: list[ShapeGuard] = dataclasses.field(default_factory=list)
    symbol_sources: dict[str, Source] = dataclasses.field(default_factory=dict)
    unconverted: list[Unconverted] = dataclasses.field(default_factory=list)
    converted: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    stricter: list[str] = dataclasses.field(default_factory=list)
    # floats the capture kept symbolic while they were a zero, whose sign a symbolic trace
    # loses: capture again with floats specialized ([Note: Float facts a symbolic guard
    # cannot see])
    symbolic_zeros: list[str] = dataclasses.field(default_factory=list)
    # builtins the capture read from the builtins dict; their names must stay absent from
    # the function's globals ([Note: Builtins a global may shadow])
    shadowable_builtins: tuple[str, ...] = ()

    @property
    def delegated(self) -> collections.Counter[str]:
        return collections.Counter(u.guard_type for u in self.unconverted)

    @property
    def complete(self) -> bool:
        """True when every entry was converted (nothing to delegate)."""
        return not self.unconverted

    def add_to(self, request: Any) -> None:
        """Add the guards and shape guards to a ``CompileRequest``."""
        guards = request.tracing_context.guards_context.dynamo_guards
        for g in self.guards:
            guards.add(g, collect_debug_stack=False)
        if self.shape_guards:
            request.add_shape_guards(self.shape_guards, self.symbol_sources)


class Context:
    """The state of one conversion, passed to every kind converter."""

    def __init__(self, sources: SourceConverter, dispatch_keys: str, batch_tensors: bool) -> None:
        self.sources = sources
        self.dispatch_keys = dispatch_keys
        self.batch_tensors = batch_tensors
        self.tensors: list[TensorSeen] = []
        self.out = Conversion()
        self.shape_checked: set[str] = set()
        self.aliasing: list[Source] = []
        self.not_present: dict[Source, tuple[list[str], Any]] = {}
        self.class_attrs: dict[Source, list[str]] = {}
        # dicts whose type Dynamo pinned, with their keys at capture
        # ([Note: Dict keys a length stands for])
        self.typed_dicts: dict[Source, tuple[Any, bool]] = {}  # (user stack, constant keys)
        # the id of each mutable object a guard reached ([Note: Mutable objects that alias])
        self.objects: dict[Source, int] = {}
        # objects whose class has a Python __getattr__
        # ([Note: Attributes a class __getattr__ gives])
        self.getattr_objects: dict[Source, tuple[Any, bool]] = {}  # (user stack, has __dict__)
        self.class_types: dict[Source, type] = {}
        # the value each converted source had when captured (from entries that carry one)
        self.values: dict[Source, Any] = {}
        self.builtins: list[str] = []
        self.f_globals: Optional[dict[str, Any]] = None  # the function's, when given
        self.global_state = False
        self.global_hooks = False  # a source read torch's global module hook dicts

    def add(self, source: Source, create_fn: Callable[..., Any], user_stack: Any = None) -> None:
        guard = source.make_guard(create_fn)
        if user_stack is not None:
            guard.user_stack = user_stack
        self.out.guards.append(guard)


class TensorSeen(NamedTuple):
    """A tensor TENSOR_MATCH guards, its static sizes and strides (None: the shape guards
    decide that one)."""

    source: Source
    sizes: tuple[Optional[int], ...]
    strides: Optional[tuple[Optional[int], ...]]  # None: not strided
    user_stack: Any


KindFn = Callable[[Context, adapter.EntryParts, Source], None]
_kind_converters: dict[str, KindFn] = {}


def register_kind_converter(*guard_types: str) -> Callable[[KindFn], KindFn]:
    """Register ``fn(context, parts, source)`` for Dynamo guard kinds; it adds guards
    through ``context.add`` or raises ``Unconvertible``."""

    def deco(fn: KindFn) -> KindFn:
        for name in guard_types:
            _kind_converters[name] = fn
        return fn

    return deco


def kind_converters() -> dict[str, KindFn]:
    return dict(_kind_converters)


def converter_for(guard_type: str) -> Optional[KindFn]:
    """The converter registered for a Dynamo guard kind, None when there is none."""
    return _kind_converters.get(guard_type)
