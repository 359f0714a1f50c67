"""What ``jitguard.torch.compile`` returns (``CompiledFunction``: the call path with torch's
compile stance) and what it keeps per entry (``EntryInfo``: the capture, torch's trees,
verify mode).

May import: jitguard._src.* (cache, compiler, errors), jitguard._src.torch.adapter.

# [Note: Verify mode]
# With ``verify=True`` (or ``JITGUARD_VERIFY=1``) every capture also builds torch's
# complete guard tree (every guard kept), and:
#   * each call an entry serves is checked against that entry's tree before its program
#     runs: jitguard accepted, so torch must accept too;
#   * each miss first asks every existing entry's tree: jitguard rejected them all, so
#     torch must reject them all too, unless jitguard's only failing guard is its own
#     GLOBAL_STATE (stricter than torch on purpose, [Note: jitguard.torch.compile on
#     Dynamo]).
# A disagreement raises ``GuardMismatchError`` with jitguard's explanation (the failing
# guards of its reference evaluator) and torch's (``check_verbose``'s failing parts).
# This doubles the check cost: it is for tests (tests/torch/conftest.py turns it on).
#
# [Note: Compile stances]
# ``torch.compiler.set_stance`` is read on every call (one attribute read): "force_eager"
# runs the original; "eager_on_recompile" serves existing entries and runs eagerly where
# it would recompile; "fail_on_recompile" raises ``RecompileError`` (a RuntimeError) where
# it would recompile; any other stance compiles as usual.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Optional

from ..cache.reasons import collect_failures
from ..errors import GuardMismatchError
from . import adapter

__all__ = ["CompiledFunction", "EntryInfo"]


class EntryInfo:
    """One entry of ``jitguard.torch.compile``: its capture (None when the capture failed
    and the entry runs eagerly: ``failure`` says why), the guards delegated to torch per
    kind, and torch's trees for it."""

    def __init__(self, compile_id: Any, cap: Optional[adapter.Captured],
                 params: tuple[str, ...], failure: Optional[str] = None) -> None:
        self.compile_id = compile_id
        self.cap = cap
        self.params = params
        self.failure = failure
        self.delegated: Counter[str] = Counter()
        self.conversion: Any = None  # convert.Conversion, when the conversion ran
        self.full_tree = cap.full_tree if cap is not None else None

    @property
    def graph_module(self) -> Any:
        return None if self.cap is None else self.cap.graph_module

    @property
    def dynamic(self) -> bool:
        """Whether the captured graph takes a symbolic size or int."""
        return self.cap is not None and adapter.graph_is_dynamic(self.cap.graph_module)

    def guard_types(self) -> Counter[str]:
        """Every guard Dynamo made for this entry, counted per kind."""
        return Counter(e.guard_type for e in (self.cap.entries if self.cap else ()))

    def _locals(self, values: Sequence[Any]) -> dict[str, Any]:
        assert self.cap is not None
        return adapter.frame_locals(self.cap.freevars, self.cap.closure, self.params, values)

    def tree_accepts(self, *values: Any) -> bool:
        assert self.cap is not None and self.cap.tree is not None
        return adapter.tree_check(self.cap.tree, self._locals(values))

    def tree_explain(self, *values: Any) -> list[str]:
        assert self.cap is not None and self.cap.tree is not None
        return adapter.check_verbose(self.cap.tree, self._locals(values))

    def torch_accepts(self, values: Sequence[Any]) -> bool:
        return adapter.tree_check(self.full_tree, self._locals(values))

    def torch_reasons(self, values: Sequence[Any]) -> list[str]:
        return adapter.check_verbose(self.full_tree, self._locals(values))

    @staticmethod
    def jitguard_reasons(entry: Any, values: Sequence[Any]) -> list[str]:
        return collect_failures([entry], tuple(values))[0].lines()

    def verified(self, where: str, bind: Callable[..., tuple[Any, ...]]) -> Callable[..., Any]:
        """The program, checked first against torch's complete tree ([Note: Verify mode])."""
        assert self.cap is not None
        program = self.cap.fn

        def verified(*args: Any, **kwargs: Any) -> Any:
            values = bind(*args, **kwargs)
            if not self.torch_accepts(values):
                raise GuardMismatchError(
                    f"{where}: jitguard's check accepted entry {self.compile_id} but torch's "
                    f"guard tree for the same capture rejects the call.\n"
                    f"  jitguard: accepts\n"
                    f"  torch: {'; '.join(self.torch_reasons(values))}"
                )
            return program(*args, **kwargs)

        return verified


class CompiledFunction:
    """Builds the callable ``jitguard.torch.compile`` returns ([Note: Compile stances])."""

    @staticmethod
    def make(original: Any, fn: Callable[..., Any], first: Any, cache: Any,
             no_recompiles: Callable[[], Any]) -> Callable[..., Any]:
        dispatch = cache.function
        stance = adapter.stance

        def stanced(values: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            mode = stance()
            if mode == "force_eager":
                return fn(*values, **kwargs)
            if mode == "eager_on_recompile":
                if cache.lookup(*values, **kwargs) is None and cache.entries():
                    return fn(*values, **kwargs)
            elif mode == "fail_on_recompile":
                with no_recompiles():
                    return dispatch(*values, **kwargs)
            return dispatch(*values, **kwargs)

        if first is None:
            def compiled(*args: Any, **kwargs: Any) -> Any:
                if stance() == "default":
                    return dispatch(*args, **kwargs)
                return stanced(args, kwargs)
        else:
            def compiled(*args: Any, **kwargs: Any) -> Any:
                if stance() == "default":
                    return dispatch(first, *args, **kwargs)
                return stanced((first, *args), kwargs)

        # the signature users see: the function's, or the bound forward's / method's
        wrapped = original if first is None else functools.partial(fn, first)
        functools.update_wrapper(compiled, fn)
        compiled.__wrapped__ = wrapped  # type: ignore[attr-defined]
        compiled._orig_mod = original  # type: ignore[attr-defined]
        compiled.cache = cache  # type: ignore[attr-defined]
        compiled.compiler = cache.compiler  # type: ignore[attr-defined]
        return compiled
