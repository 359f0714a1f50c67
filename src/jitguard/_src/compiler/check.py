"""``compile_guards``: guards, environment expressions and shape guards -> a
``CheckFunction``.

May import: errors, guards, contexts, compiler.*.
"""

from __future__ import annotations

import contextlib
import functools
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
from .codecache import compile_generated, forget, generated_filename
from .codegen import check_function_name, generate, leaf_order_key
from .reference import GuardFailure, evaluate, explain_leaves
from .shape import add_shape_guards
from .values import Ident
from .writer import check_root

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

    With ``deferred=True`` the code is generated when first needed (``build()``, the first
    call of ``fn``, or reading ``source``); ``accepts(*args)`` answers for one call without
    generating it ([Note: Deferred check code]).
    """

    def __init__(
        self,
        leaves: list[Leaf],
        guards: list[Guard],
        *,
        name: str,
        arg_names: Optional[tuple[str, ...]],
        f_globals: Optional[Mapping[str, Any]],
        deferred: bool = False,
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
        # the check, and the end of ``build`` makes the bound code fail.
        self._namespaces: list[dict[str, Any]] = []
        self._built = False
        self._generated: Any = None
        self._stub: Optional[Callable[..., bool]] = None
        self.fn: Callable[..., bool]
        if deferred:
            self._defer()
        else:
            self.build()

    def _defer(self) -> None:
        """[Note: Deferred check code]: ``fn`` is a stub that generates the code when first
        called; the objects held by identity are watched from now on."""
        roots = {leaf_source.chain()[-1] for leaf in self.leaves for leaf_source in leaf.sources}
        for root in roots:  # what generating would refuse is refused now, not at first use
            check_root(root, self.arg_names, self.f_globals)
        ns: dict[str, Any] = {"___build": self._build_or_fail}
        compiled = compile_generated(
            _DEFERRED, generated_filename("deferred check"), owner=self)
        self._stub = self.fn = compiled.function(
            "___deferred", ns, name="deferred_" + check_function_name(self.name))
        self_ref = weakref.ref(self)
        for ident, sources in _ident_holders(self.leaves).values():
            if ident.is_weak and ident.alive:
                ident.on_death(functools.partial(_invalidate_unbuilt, self_ref, sources))

    def _build_or_fail(self) -> Callable[..., bool]:
        """The stub's build: code that cannot be generated makes the check invalid (and
        fail from then on), never an exception out of a check."""
        try:
            return self.build()
        except Exception as e:
            self.invalidate(f"its deferred code could not be generated: "
                            f"{type(e).__name__}: {e}")
            return _always_false

    def build(self) -> Callable[..., bool]:
        """Generate the code now if it was deferred (idempotent); returns the generated
        check function (which ``fn`` is, unless a front check replaced ``fn``)."""
        if self._built:
            return self._generated
        with self._lock:
            if self._built:
                return self._generated
            self._generate()
            return self._generated

    def _generate(self) -> None:
        leaves, name = self.leaves, self.name
        self_ref = weakref.ref(self)
        holders: dict[int, tuple[Ident, list[Optional[Source]]]] = {}

        def on_weak(ident: Ident, const_name: str, namespace: dict[str, Any]) -> None:
            # ``namespace`` is the globals of the function (the check or one of its chunks)
            # that binds the id: a death patches it even when this CheckFunction is gone and
            # only its ``fn`` is still in use.
            if not self._idents:
                holders.update(_ident_holders(leaves))
            self._idents.append(ident)
            sources = holders.get(id(ident), (ident, []))[1]
            ident.on_death(lambda: _invalidate(self_ref, namespace, const_name, sources))

        code = generate(leaves, name=name, arg_names=self.arg_names, f_globals=self.f_globals,
                        on_weak=on_weak)
        # The function holds its Idents (and so their death callbacks) itself.
        code.namespace["___weak_idents"] = self._idents
        self._generated = code.fn
        if self._stub is None or self.fn is self._stub:
            self.fn = code.fn
        self._source = code.source
        self._filename = code.filename
        # Every file registered in linecache: the check function's, then its chunks' (see
        # [Note: Chunked checks]); one unless the check is large.
        self._filenames = tuple(f for f, _ in code.parts)
        weakref.finalize(self, forget, *self._filenames)
        self._namespaces = code.namespaces
        self._built = True
        if not self.valid:  # an object it binds died while it was being generated
            self._fail_from_now_on()

    @property
    def deferred(self) -> bool:
        """Whether the code is still to be generated ([Note: Deferred check code])."""
        return not self._built

    @property
    def source(self) -> str:
        """The generated source (generated now if it was deferred)."""
        self.build()
        return self._source

    @property
    def filename(self) -> str:
        self.build()
        return self._filename

    @property
    def filenames(self) -> tuple[str, ...]:
        self.build()
        return self._filenames

    def accepts(self, *args: Any) -> bool:
        """Whether every guard holds for ``args``, without generating deferred code (the
        reference evaluator answers then, once)."""
        if self._built:
            return bool(self.build()(*args))
        if not self.valid:
            return False
        return evaluate(self.leaves, self._frame(args), self.f_globals or {})

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
            if self._built or self._stub is not None:
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
        if self._stub is not None:
            self._stub.__code__ = _always_false.__code__
        if self._generated is not None:
            self._generated.__code__ = _always_false.__code__
        self.fn = self._generated = _always_false

    def __repr__(self) -> str:
        state = "valid" if self.valid else f"invalid: {self.invalid_reason}"
        return f"<CheckFunction {self.name} ({len(self.leaves)} checks, {state})>"


def _always_false(*args: Any) -> bool:
    return False


# [Note: Deferred check code]
# A check re-bound from the store may never need its full generated code: when it gets a
# front check ([Note: Skipping structure guards by version tags]) the full check runs only
# after a structure change. So ``compile_guard_records(..., deferred=True)`` makes a
# ``CheckFunction`` whose ``fn`` is a stub that generates the code on its first call (under
# the check's lock, once), and ``accepts`` answers for one call with the reference
# evaluator instead. Nothing else changes: ``source``, ``filename`` and ``filenames``
# generate on access; an object held weakly by identity that dies invalidates the check at
# once (the leaves' Idents are watched from the start, not from generation); an invalid
# check's stub, like its generated function, fails from then on. The generated function
# and the stub take the same arguments and give the same verdicts (the reference evaluator
# is tested against generated code on random guards). ``snapshot.install`` answers for
# the call that installs a front check from what ``plan`` resolved instead: each covered
# leaf's kind on its resolved values (the values its reads give, which is what lets the
# front check skip it), and the volatile check, generated, on the call and the pins.
_DEFERRED = '''\
def ___deferred(*args):
    return ___build()(*args)
'''


def _invalidate_unbuilt(ref: Any, sources: list[Optional[Source]]) -> None:
    check = ref()
    if check is not None:
        check.invalidate(_died(sources, "an object it holds by identity"))


def _ident_holders(leaves: list[Leaf]) -> dict[int, tuple[Ident, list[Optional[Source]]]]:
    """For each Ident in the leaves' params (by id), the Ident and the sources guarded by
    it. One walk over all leaves, so binding many objects weakly stays linear."""
    holders: dict[int, tuple[Ident, list[Optional[Source]]]] = {}
    for leaf in leaves:
        if not isinstance(leaf.params, (Ident, tuple, list)):
            continue  # most params hold no Ident: one test, not a walk
        stack = [leaf.params]
        while stack:
            p = stack.pop()
            if isinstance(p, Ident):
                holders.setdefault(id(p), (p, []))[1].append(
                    leaf.sources[0] if leaf.sources else None)
            elif isinstance(p, (tuple, list)):
                stack.extend(p)
    return holders


def _died(sources: list[Optional[Source]], fallback: str) -> str:
    """The reason a check is invalid once the object guarding ``sources`` died (names
    built only then: naming thousands of sources up front costs)."""
    names = dict.fromkeys(s.name() if s is not None else "?" for s in sources)
    return f"Cache line invalidated because {' and '.join(names) or fallback} got deallocated"


def _invalidate(
    ref: Any, namespace: dict[str, Any], const_name: str, sources: list[Optional[Source]]
) -> None:
    namespace[const_name] = -1
    check = ref()
    if check is not None:
        check.invalidate(_died(sources, const_name))


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
