"""Differential checking of converted guards against torch's own guard tree.

``capture(fn, *args)`` compiles ``fn`` with ``torch.compile(backend="eager",
fullgraph=True)`` keeping every guard (so torch's tree checks all of them) and records the
``GuardFilterEntry``s; it converts them and compiles jitguard's check over the same frame.
``Captured.agree(*args)`` runs torch's tree, jitguard's generated check and jitguard's
reference evaluator on new arguments and asserts the three answers are equal.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list

from jitguard import LocalSource, compile_guards
from jitguard._src.torch.convert import Conversion, convert_guards


class Captured:
    def __init__(
        self, fn: Callable[..., Any], entries: list[Any], guard_manager: Any,
        conversion: Conversion, check: Any, names: list[str],
    ) -> None:
        self.fn = fn
        self.entries = entries
        self.guard_manager = guard_manager
        self.conversion = conversion
        self.check = check
        self.names = names

    def kinds(self) -> set[str]:
        """The Dynamo guard kinds of the capture."""
        return {e.guard_type for e in self.entries}

    def frame(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        bound = inspect.signature(self.fn).bind(*args, **kwargs)
        bound.apply_defaults()
        return dict(bound.arguments)

    def torch_ok(self, *args: Any, **kwargs: Any) -> bool:
        frame = self.frame(*args, **kwargs)
        # Dynamo's frame also holds the closure variables (read from their cells).
        cells = self.fn.__closure__ or ()
        frame.update(zip(self.fn.__code__.co_freevars, (c.cell_contents for c in cells), strict=True))
        return bool(self.guard_manager.check(frame))

    def values(self, *args: Any, **kwargs: Any) -> list[Any]:
        frame = {**self.frame(*args, **kwargs), FN: self.fn}
        return [frame[n] for n in self.names]

    def jitguard_ok(self, *args: Any, **kwargs: Any) -> bool:
        values = self.values(*args, **kwargs)
        compiled = bool(self.check(*values))
        reference = bool(self.check.reference(*values))
        assert compiled == reference, (
            f"generated check says {compiled}, reference says {reference}: "
            f"{[str(f) for f in self.check.explain(*values)]}"
        )
        return compiled

    def agree(self, *args: Any, **kwargs: Any) -> bool:
        """Both answers, asserted equal; returns the answer."""
        t = self.torch_ok(*args, **kwargs)
        j = self.jitguard_ok(*args, **kwargs)
        if t != j:
            values = self.values(*args, **kwargs)
            why = [str(f.reason) for f in self.check.explain(*values)]
            torch_why = self.guard_manager.check_verbose(self.frame(*args, **kwargs))
            raise AssertionError(f"torch says {t}, jitguard says {j}: {why} / {torch_why}")
        return t

    def reasons(self, *args: Any, **kwargs: Any) -> list[str]:
        values = self.values(*args, **kwargs)
        return [f.reason for f in self.check.explain(*values)]


FN = "__fn__"  # the jitguard frame's name for the compiled function (closure reads)


def capture(fn: Callable[..., Any], *args: Any, dynamic: Any = None, **kwargs: Any) -> Captured:
    """Compile ``fn`` on ``args`` with torch (every guard kept; ``dynamic`` as
    torch.compile's) and with jitguard."""
    torch._dynamo.reset()
    entries: list[Any] = []

    def keep_all(got: Any) -> list[bool]:
        entries.extend(got)
        return [True] * len(got)

    compiled = torch.compile(
        fn, backend="eager", fullgraph=True, dynamic=dynamic,
        options={"guard_filter_fn": keep_all},
    )
    compiled(*args, **kwargs)
    cache = _debug_get_cache_entry_list(fn.__code__)
    assert len(cache) == 1, f"expected one cache entry, got {len(cache)}"
    conversion = convert_guards(entries, function=fn, function_source=LocalSource(FN))
    assert not conversion.unconverted, [str(u) for u in conversion.unconverted]
    sig = inspect.signature(fn)
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    frame = {**bound.arguments, FN: fn}
    names = list(frame)
    check = compile_guards(
        conversion.guards,
        shape_guards=conversion.shape_guards,
        symbol_sources=conversion.symbol_sources,
        f_locals=frame,
        f_globals=fn.__globals__,
        arg_names=names,
        name=getattr(fn, "__name__", "fn"),
    )
    captured = Captured(fn, entries, cache[0].guard_manager, conversion, check, names)
    assert captured.agree(*args, **kwargs), "both must accept the captured frame"
    return captured
