"""The runtime side of the torch adapter: torch's guard tree (checking it, its reasons),
the locals it reads, torch's function-mode stack around a program, nn.Module's global
hooks, whether a graph is dynamic, and ``torch._dynamo.reset``. tests/torch/test_adapter.py
pins each internal used here.

May import: torch (its private modules too), the standard library. Nothing from jitguard.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Optional

import torch
import torch._dynamo

__all__ = [
    "ATTRS_PAST_MODES",
    "check_verbose",
    "mark_for_torch_tools",
    "frame_locals",
    "function_modes_active",
    "graph_is_dynamic",
    "mode_blind",
    "mode_stack_len",
    "module_call_hooks",
    "on_reset",
    "read_attr_past_modes",
    "read_past_modes",
    "tree_check",
    "without_function_modes",
]

def function_modes_active() -> bool:
    """Whether torch's function-mode stack holds a mode now."""
    return bool(_len_modes())



_reset_callbacks: list[Callable[[], None]] = []


def on_reset(callback: Callable[[], None]) -> None:
    """Call ``callback`` after every ``torch._dynamo.reset()`` (which has no hook of its own:
    the first registration wraps ``torch._dynamo.reset``, so code that calls it through the
    module attribute, as tests do, also clears jitguard's entries)."""
    if not _reset_callbacks:
        original = torch._dynamo.reset

        @functools.wraps(original)
        def reset() -> None:
            original()
            for cb in list(_reset_callbacks):
                cb()

        torch._dynamo.reset = reset
    _reset_callbacks.append(callback)


def frame_locals(freevars: tuple[str, ...], closure: tuple[Any, ...], params: tuple[str, ...],
                 values: Sequence[Any]) -> dict[str, Any]:
    """The locals torch's guard tree reads: the free variables' cell contents (an empty
    cell is left out), then the parameters."""
    out: dict[str, Any] = {}
    for name, cell in zip(freevars, closure, strict=True):
        try:
            out[name] = cell.cell_contents
        except ValueError:
            pass
    out.update(zip(params, values, strict=True))
    return out


def tree_check(tree: Any, f_locals: dict[str, Any]) -> bool:
    """Evaluate torch's guard tree (a ``GuardManagerWrapper``) on a frame's locals."""
    return bool(tree.check(f_locals))


def check_verbose(tree: Any, f_locals: dict[str, Any]) -> list[str]:
    """The failing parts of torch's guard tree, as torch words them (empty: it holds)."""
    info = tree.check_verbose(f_locals)
    if info.result:
        return []
    return [str(part) for part in info.verbose_code_parts] or ["(torch gave no reason)"]


def guard_count(tree: Any) -> int:
    """How many guards a capture made in all (for display)."""
    return len(getattr(tree, "code_parts", ()) or ())


def graph_is_dynamic(gm: Optional[torch.fx.GraphModule]) -> bool:
    """Whether a captured graph takes a symbolic size or int (Dynamo's placeholders carry
    their fake value in ``meta["example_value"]``)."""
    if gm is None:
        return False
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        value = node.meta.get("example_value")
        if isinstance(value, torch.SymInt):
            return True
        if isinstance(value, torch.Tensor) and any(not isinstance(s, int) for s in value.shape):
            return True
    return False


_len_modes = torch._C._len_torch_function_stack
#: how many torch function modes are on the stack now (torch's C function, for hot paths)
mode_stack_len = _len_modes
_pop_mode = torch._C._pop_torch_function_stack
_push_mode = torch._C._push_on_torch_function_stack


def without_function_modes(program: Callable[..., Any]) -> Callable[..., Any]:
    """``program`` run with torch's function-mode stack set aside, as torch runs compiled
    code: Dynamo traced the modes active at capture time into the graph (and guarded the
    stack), so a mode still active while the graph runs would apply twice."""

    def run(*args: Any, **kwargs: Any) -> Any:
        n = _len_modes()
        if not n:
            return program(*args, **kwargs)
        saved = [_pop_mode() for _ in range(n)]
        try:
            return program(*args, **kwargs)
        finally:
            for mode in reversed(saved):
                _push_mode(mode)

    run.__wrapped__ = program  # type: ignore[attr-defined]
    return run


_no_torch_function = torch._C.DisableTorchFunction


def mode_blind(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` run with torch-function dispatch off while a function mode is active:
    jitguard's own reads of a tensor's metadata (sizes, strides, flags) stand for torch's
    C++ checker's, which no mode sees. Read through Python under a mode, each would be a
    call of the user's mode: a counting mode would count them, and one whose counter
    Dynamo guarded would make a new entry fail its own guards."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        if not _len_modes():
            return fn(*args, **kwargs)
        with _no_torch_function():
            return fn(*args, **kwargs)

    return run


def read_past_modes(tensor: Any, method: str) -> Any:
    """``tensor.<method>()`` (``size``, ``stride``, ``storage_offset``) with torch-function
    dispatch off: [Note: Tensor properties past function modes]."""
    with _no_torch_function():
        return getattr(tensor, method)()


def read_attr_past_modes(value: Any, name: str) -> Any:
    """``getattr(value, name)`` with torch-function dispatch off (a tensor's ``_base``,
    ``grad``, ``is_leaf``): [Note: Tensor properties past function modes]."""
    with _no_torch_function():
        return getattr(value, name)


#: the tensor attributes jitguard's guards read past function modes
ATTRS_PAST_MODES = frozenset({"_base", "grad", "is_leaf"})


def module_call_hooks() -> tuple[dict[Any, Any], ...]:
    """nn.Module's global hook dicts that ``Module.__call__`` runs (forward, pre-forward,
    backward, pre-backward)."""
    import torch.nn.modules.module as mm

    return (mm._global_forward_hooks, mm._global_forward_pre_hooks,
            mm._global_backward_hooks, mm._global_backward_pre_hooks)


def mark_for_torch_tools(wrapper: Any, original: Any, inline: Any) -> None:
    """Let torch's tools see through a jitguard wrapper ([Note: torch's tools]): torch's
    ``innermost_fn`` (``torch._dynamo.explain``, ``torch.compile`` of the wrapper) unwraps
    ``_torchdynamo_orig_callable`` when ``_torchdynamo_wrapper_id`` is the wrapper's id, and
    Dynamo, tracing a call of the wrapper, inlines ``_torchdynamo_inline`` instead of
    tracing into jitguard's dispatcher."""
    wrapper._torchdynamo_orig_callable = original
    wrapper._torchdynamo_wrapper_id = id(wrapper)
    wrapper._torchdynamo_inline = inline
