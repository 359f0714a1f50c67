"""``compile_guards``: guards, environment expressions and shape guards -> a
``CheckFunction``.

May import: errors, guards, contexts, compiler.*.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Optional

from ..errors import GuardCompileError
from ..guards import Guard, GuardEnvExpr, Source
from . import array_kinds as _array_kinds  # noqa: F401  (registers the kinds)
from . import attr_kinds as _attr_kinds  # noqa: F401  (registers the kinds)
from . import builtin_kinds as _builtin_kinds  # noqa: F401  (registers the kinds)
from . import python_kinds as _python_kinds  # noqa: F401  (registers the kinds)
from . import triton_kinds as _triton_kinds  # noqa: F401  (registers the kinds)
from .builder import GuardBuilder, Leaf
from .codecache import forget
from .codegen import generate, leaf_order_key
from .reference import GuardFailure, evaluate, explain_leaves
from .shape import add_shape_guards
from .values import Ident

__all__ = ["CheckFunction", "CheckResult", "compile_guards"]


class CheckResult:
    """What ``CheckFunction.verbose`` returns: the result and, when False, the failures."""

    __slots__ = ("failures", "result")

    def __init__(self, result: bool, failures: list[GuardFailure]) -> None:
        self.result = result
        self.failures = failures

    def __bool__(self) -> bool:
        return self.result

    def __repr__(self) -> str:
        return f"CheckResult(result={self.result}, failures={[str(f) for f in self.failures]})"


class CheckFunction:
    """A compiled guard check. ``fn`` is the generated function itself (call it on the hot
    path); calling the CheckFunction does the same with one more call layer.

    With ``arg_names`` the check takes those locals positionally, else one mapping of
    locals. ``explain``/``verbose`` take the same arguments as ``fn``.

    When an object held by identity dies, the check becomes invalid: ``fn`` returns False
    from then on (see [Note: Identity binding]), ``valid`` is False, ``invalid_reason`` says
    which source's object died, and callbacks added with ``on_invalidate`` run once.
    """

    def __init__(
        self,
        leaves: list[Leaf],
        guards: list[Guard],
        *,
        name: str,
        arg_names: Optional[tuple[str, ...]],
        f_globals: Optional[Mapping[str, Any]],
    ) -> None:
        self.leaves = leaves
        self.guards = guards
        self.name = name
        self.arg_names = arg_names
        self.f_globals = f_globals
        self.valid = True
        self.invalid_reason: Optional[str] = None
        self._callbacks: list[Callable[[CheckFunction], None]] = []
        # Re-entrant: a collection inside invalidate() can kill another object this check
        # binds, whose weakref callback re-enters invalidate() on the same thread.
        self._lock = threading.RLock()
        self._idents: list[Ident] = []
        # Set once the generated code is bound. An object bound weakly may die while the
        # code is generated (a collection, another thread): ``invalidate`` then only marks
        # the check, and the end of ``__init__`` makes the bound code fail.
        self._namespaces: list[dict[str, Any]] = []
        self._built = False
        self_ref = weakref.ref(self)
        holders: dict[int, list[str]] = {}

        def on_weak(ident: Ident, const_name: str, namespace: dict[str, Any]) -> None:
            # ``namespace`` is the globals of the function (the check or one of its chunks)
            # that binds the id: a death patches it even when this CheckFunction is gone and
            # only its ``fn`` is still in use.
            if not self._idents:
                holders.update(_ident_holders(leaves))
            self._idents.append(ident)
            source_names = holders.get(id(ident), [])
            ident.on_death(lambda: _invalidate(self_ref, namespace, const_name, source_names))

        code = generate(leaves, name=name, arg_names=arg_names, f_globals=f_globals, on_weak=on_weak)
        # The function holds its Idents (and so their death callbacks) itself.
        code.namespace["___weak_idents"] = self._idents
        self.fn: Callable[..., bool] = code.fn
        self.source = code.source
        self.filename = code.filename
        # Every file registered in linecache: the check function's, then its chunks' (see
        # [Note: Chunked checks]); one unless the check is large.
        self.filenames = tuple(f for f, _ in code.parts)
        weakref.finalize(self, forget, *self.filenames)
        with self._lock:
            self._namespaces = code.namespaces
            self._built = True
            if not self.valid:  # an object it binds died while it was being generated
                self._fail_from_now_on()

    def __call__(self, *args: Any) -> bool:
        return self.fn(*args)

    def _frame(self, args: tuple[Any, ...]) -> Any:
        if self.arg_names is None:
            if len(args) != 1:
                raise TypeError(f"{self.name}: this check takes one mapping of locals")
            return args[0]
        if len(args) != len(self.arg_names):
            raise TypeError(
                f"{self.name}: this check takes {len(self.arg_names)} arguments "
                f"{list(self.arg_names)}, got {len(args)}"
            )
        return dict(zip(self.arg_names, args, strict=True))

    def reference(self, *args: Any) -> bool:
        """The reference evaluator's answer for the same arguments (slow; for testing)."""
        if not self.valid:
            return False
        return evaluate(self.leaves, self._frame(args), self.f_globals or {})

    def explain(self, *args: Any, first_only: bool = False) -> list[GuardFailure]:
        """The failing guards for these arguments, with reasons; [] when all hold."""
        failures = []
        if not self.valid:
            failures.append(GuardFailure(str(self.invalid_reason), "INVALIDATED", ()))
            if first_only:
                return failures
        failures += explain_leaves(
            self.leaves, self._frame(args), self.f_globals or {}, first_only=first_only
        )
        return failures

    def verbose(self, *args: Any) -> CheckResult:
        """Run the check; when it fails, also say why."""
        if self.fn(*args):
            return CheckResult(True, [])
        failures = self.explain(*args)
        if not failures:
            failures = [
                GuardFailure(
                    "the check failed but every guard held when re-evaluated: a source read "
                    "or comparison is not deterministic",
                    "NONDETERMINISTIC",
                    (),
                )
            ]
        return CheckResult(False, failures)

    def on_invalidate(self, callback: Callable[[CheckFunction], None]) -> None:
        """Run ``callback(check)`` once, when the check becomes invalid (now, if it is)."""
        with self._lock:
            if self.valid:
                self._callbacks.append(callback)
                return
        callback(self)

    def invalidate(self, reason: str) -> None:
        """Make the check fail from now on (idempotent)."""
        with self._lock:
            if not self.valid:
                return
            self.valid = False
            self.invalid_reason = reason
            if self._built:
                self._fail_from_now_on()
            callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb(self)

    def _fail_from_now_on(self) -> None:
        for namespace in self._namespaces:
            for name, value in list(namespace.items()):
                if name.startswith("___id_") and isinstance(value, int):
                    namespace[name] = -1
        # Whoever took ``check.fn`` before (a cache entry) still calls the generated
        # function: give it a body that fails, whatever it binds by identity.
        self.fn.__code__ = _always_false.__code__
        self.fn = _always_false

    def __repr__(self) -> str:
        state = "valid" if self.valid else f"invalid: {self.invalid_reason}"
        return f"<CheckFunction {self.name} ({len(self.leaves)} checks, {state})>"


def _always_false(*args: Any) -> bool:
    return False


def _ident_holders(leaves: list[Leaf]) -> dict[int, list[str]]:
    """For each Ident in the leaves' params (by id), the names of the sources guarded by it.
    One walk over all leaves, so binding many objects weakly stays linear."""
    holders: dict[int, list[str]] = {}
    for leaf in leaves:
        stack = [leaf.params]
        while stack:
            p = stack.pop()
            if isinstance(p, Ident):
                holders.setdefault(id(p), []).append(
                    leaf.sources[0].name() if leaf.sources else "?"
                )
            elif isinstance(p, (tuple, list)):
                stack.extend(p)
    return holders


def _invalidate(
    ref: Any, namespace: dict[str, Any], const_name: str, source_names: list[str]
) -> None:
    namespace[const_name] = -1
    check = ref()
    if check is None:
        return
    what = " and ".join(dict.fromkeys(source_names)) or const_name
    check.invalidate(f"Cache line invalidated because {what} got deallocated")


def compile_guards(
    guards: Iterable[Guard] = (),
    *,
    env_exprs: Iterable[GuardEnvExpr] = (),
    shape_guards: Iterable[Any] = (),
    symbol_sources: Optional[Mapping[Any, Source]] = None,
    f_locals: Optional[Mapping[str, Any]] = None,
    f_globals: Optional[Mapping[str, Any]] = None,
    arg_names: Optional[Sequence[str]] = None,
    name: str = "guards",
    check_frame: bool = True,
) -> CheckFunction:
    """Compile guards into a ``CheckFunction``.

    The guards are built against the frame ``f_locals``/``f_globals`` (kinds read the current
    values to know what to expect). ``arg_names`` makes the check take those locals
    positionally (fastest); otherwise it takes one mapping of locals. ``f_globals`` is also
    where globals are read at check time. ``shape_guards`` (``ShapeGuard``s or sympy
    booleans) need ``symbol_sources``, mapping each symbol to its source.

    With ``check_frame`` (default) the new check must accept the frame it was built from;
    ``GuardCompileError`` says which guard did not.
    """
    with _gc_paused():
        return _compile_guards(
            guards, env_exprs, shape_guards, symbol_sources, f_locals, f_globals, arg_names,
            name, check_frame,
        )


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic collection while a check is built: it allocates many objects that all live
    as long as the check, and a full collection triggered meanwhile (it happens about once
    per 10,000 guards) walks the whole heap for nothing, often costing as much as the build."""
    was_enabled = gc.isenabled()
    if was_enabled:
        gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _compile_guards(
    guards: Iterable[Guard],
    env_exprs: Iterable[GuardEnvExpr],
    shape_guards: Iterable[Any],
    symbol_sources: Optional[Mapping[Any, Source]],
    f_locals: Optional[Mapping[str, Any]],
    f_globals: Optional[Mapping[str, Any]],
    arg_names: Optional[Sequence[str]],
    name: str,
    check_frame: bool,
) -> CheckFunction:
    if isinstance(guards, (str, bytes)) or not hasattr(guards, "__iter__"):
        raise TypeError(
            f"compile_guards takes an iterable of Guards (source.make_guard(GuardBuilder.KIND)), "
            f"got {type(guards).__name__} {guards!r}")
    guards = list(guards)
    for i, guard in enumerate(guards):
        if not isinstance(guard, Guard):
            raise TypeError(
                f"compile_guards: guards[{i}] is {type(guard).__name__} {guard!r}, not a Guard "
                f"(make one with source.make_guard(GuardBuilder.KIND))")
    if arg_names is not None and len(set(arg_names)) != len(arg_names):
        raise GuardCompileError(f"{name}: arg_names has duplicates: {list(arg_names)}")
    builder = GuardBuilder(f_locals, f_globals)
    # dict.fromkeys, not set: equal guards collapse, ties in sort_key keep the caller's
    # order, so the same guards give the same check function in every process.
    ordered = sorted(dict.fromkeys(guards), key=Guard.sort_key)
    for guard in ordered:
        builder.add_guard(guard)
    for expr in env_exprs:
        builder.add_env_expr(expr)
    shape_guards = list(shape_guards)
    if shape_guards:
        add_shape_guards(builder, shape_guards, symbol_sources or {})
    leaves = sorted(builder.leaves, key=leaf_order_key)
    args = tuple(arg_names) if arg_names is not None else None
    check = CheckFunction(leaves, ordered, name=name, arg_names=args, f_globals=f_globals)
    if check_frame and f_locals is not None:
        frame_args = (
            (f_locals,) if args is None else tuple(f_locals[a] for a in args if a in f_locals)
        )
        if len(frame_args) == (1 if args is None else len(args)) and not check.fn(*frame_args):
            reasons = [str(f) for f in check.explain(*frame_args)] or [
                "(no guard failed on re-evaluation)"
            ]
            raise GuardCompileError(
                f"{name}: the compiled guards reject the frame they were built from:\n"
                + "\n".join(f"  - {r}" for r in reasons)
            )
    return check
