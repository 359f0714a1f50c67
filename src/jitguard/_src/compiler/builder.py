"""``GuardBuilder``: what a guard's ``create_fn`` is called with. It reads each guarded
source's value in the frame being compiled, lets the kind decide its params, and collects
the resulting leaves for code generation.

May import: errors, guards, sources, compiler.kinds, compiler.builtin_kinds, compiler.identity_kinds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Optional

from ..errors import GuardCompileError, GuardKindError, UnreadableSourceError
from ..guards import ChainedSource, DuplicateInputs, Guard, GuardBuilderBase, GuardEnvExpr, Source
from .identity_kinds import DuplicateInput
from .kinds import GuardKind, RelationalKind, create_fn_for, get_guard_kind

__all__ = ["GuardBuilder", "Leaf", "register_env_expr_handler"]


@dataclasses.dataclass(eq=False)
class Leaf:
    """One check to generate: ``kind`` over the values of ``sources`` with ``params``.

    ``guard`` is the Guard it came from (None for environment expressions and shape guards);
    ``sloc`` says where a shape guard came from.
    """

    kind: GuardKind
    sources: tuple[Source, ...]
    params: Any
    guard: Optional[Guard] = None
    sloc: Optional[Any] = None
    _code: Optional[str] = dataclasses.field(default=None, init=False, repr=False)

    def names(self) -> Any:
        """What ``kind.code``/``kind.reason`` get as the name: one name, or a tuple of names
        for a relational kind."""
        if self.kind.relational:
            return tuple([s.name() for s in self.sources])
        return self.sources[0].name() if self.sources else ""

    def code(self) -> str:
        """What the leaf checks, as text (computed once: export info and the generated
        code's comments both use it)."""
        if self._code is None:
            self._code = self.kind.code(self.names(), self.params)
        return self._code

    @property
    def user_stack(self) -> Any:
        return self.guard.user_stack if self.guard is not None else None


_MISSING = object()

EnvHandler = Callable[["GuardBuilder", Any], None]
_env_handlers: dict[type, EnvHandler] = {}


def register_env_expr_handler(expr_type: type, handler: EnvHandler) -> None:
    """Say how a ``GuardEnvExpr`` subclass becomes leaves (``handler(builder, expr)``)."""
    _env_handlers[expr_type] = handler


class _BuilderType(type):
    """Makes every registered guard kind a class attribute: ``GuardBuilder.TYPE_MATCH``."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return create_fn_for(name)

    def __dir__(cls) -> list[str]:
        from .kinds import guard_kinds

        return sorted({*super().__dir__(), *guard_kinds()})


class GuardBuilder(GuardBuilderBase, metaclass=_BuilderType):
    """Builds the leaves of one check function from the values in one frame."""

    def __init__(self, f_locals: Any, f_globals: Any) -> None:
        self.f_locals = f_locals if f_locals is not None else {}
        self.f_globals = f_globals if f_globals is not None else {}
        self._has_globals = f_globals is not None
        self.leaves: list[Leaf] = []
        self._values: dict[Source, Any] = {}

    def get(self, source: Source) -> Any:
        """The value of ``source`` in the build frame (read once, then cached)."""
        value = self._values.get(source, _MISSING)
        if value is not _MISSING:
            return value
        try:
            if isinstance(source, ChainedSource):
                value = source.access(self.get(source.base))
            else:
                slot = source.frame_slot()
                if slot is not None and not self._has_globals and slot[0] == "G":
                    raise GuardCompileError(
                        f"{source.name()} reads a global but no f_globals was given"
                    )
                value = source.get_value(self.f_locals, self.f_globals)
        except GuardCompileError:
            raise
        except UnreadableSourceError as e:
            raise GuardCompileError(f"cannot guard on {source.name()}: {e}") from e
        except Exception as e:
            raise GuardCompileError(
                f"cannot read {source.name()} in the frame being compiled: "
                f"{type(e).__name__}: {e}"
            ) from e
        self._values[source] = value
        return value

    def install(self, kind: GuardKind, guard: Guard, options: dict[str, Any]) -> None:
        """Called by a kind's create_fn: turn ``guard`` into a leaf."""
        source = guard.originating_source
        if kind.relational:
            if not isinstance(kind, RelationalKind):
                raise GuardKindError(f"{kind.name} is relational but not a RelationalKind")
            sources: tuple[Source, ...] = (source, *kind.extra_sources(guard, **options))
            value: Any = tuple(self.get(s) for s in sources)
        elif not kind.reads_value:
            sources, value = (), None
        else:
            if kind.on_base:
                if not isinstance(source, ChainedSource):
                    raise GuardCompileError(
                        f"{kind.name} on {source.name()} needs a chained source (it tests the base)"
                    )
                source = source.base
            sources = (source,)
            value = self.get(source)
            kind = kind.resolve(value, options)
        params = kind.expect(value, guard, **options)
        leaf = Leaf(kind, sources, params, guard)
        self.leaves.append(leaf)
        guarded_class, obj_ref = kind.export(params)
        guard.set_export_info(kind.name, guarded_class, [leaf.code()], obj_ref)

    def add_guard(self, guard: Guard) -> None:
        """Install one guard through its create_fn. A create_fn that is not a registered
        kind must install at least one leaf (through ``install``/``add_leaf``): a guard that
        checks nothing would be a silent hole."""
        fn = guard.create_fn
        if not callable(fn):  # the specification's Guard takes any object: refused here
            hint = f" (write GuardBuilder.{fn})" if isinstance(fn, str) and fn.isidentifier() else ""
            raise TypeError(
                f"the guard on {guard.name!r} needs a create_fn such as "
                f"GuardBuilder.EQUALS_MATCH, got {type(fn).__name__} {fn!r}{hint}"
            )
        before = len(self.leaves)
        guard.create(self)
        if len(self.leaves) == before:
            try:
                get_guard_kind(guard.create_fn)
            except Exception as e:
                raise GuardCompileError(
                    f"the guard on {guard.name!r} installed no check: its create_fn "
                    f"{guard.create_fn!r} is not a registered guard kind ({e})"
                ) from None

    def add_leaf(self, leaf: Leaf) -> None:
        self.leaves.append(leaf)

    def add_env_expr(self, expr: GuardEnvExpr) -> None:
        for tp in type(expr).__mro__:
            handler = _env_handlers.get(tp)
            if handler is not None:
                handler(self, expr)
                return
        raise GuardCompileError(
            f"no handler for the environment expression {type(expr).__name__}; register one "
            f"with register_env_expr_handler (the torch integration handles StorageOverlap)"
        )


def _duplicate_inputs(builder: GuardBuilder, expr: DuplicateInputs) -> None:
    kind, _ = get_guard_kind(create_fn_for(DuplicateInput.name))
    sources = (expr.input_source_a, expr.input_source_b)
    for s in sources:
        builder.get(s)
    builder.add_leaf(Leaf(kind, sources, None))


register_env_expr_handler(DuplicateInputs, _duplicate_inputs)
