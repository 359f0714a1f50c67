"""The part of the torch adapter that makes a capture's program cheaper to run on a hit
([Note: A hit's cost]): ``fast_helpers`` gives Dynamo's bytecode its own reads of
``torch._dynamo.utils``; ``pregraph`` reads how it reads the compiled graph's inputs, and
can have it take them from one call instead ([Note: Inputs read from the pins]).

May import: torch (its private modules too), the standard library. Nothing from jitguard.
"""

from __future__ import annotations

import collections
import dis
import sys
import types
from collections.abc import Callable
from typing import Any, NamedTuple, Optional

import torch._dynamo.utils as _dynamo_utils

__all__ = ["FAST_UTILS_NAME", "UTILS_ALIAS", "Pregraph", "fast_helpers", "pregraph"]


# [Note: A hit's cost]
# A hit runs the transformed bytecode, which reads the graph's inputs from the frame and
# calls the backend's compiled graph. Two things torch.compile's bytecode does there cost
# more than the reads themselves (~0.6-1 us each, measured with a no-op graph), and jitguard
# leaves them out, soundly:
#   * ``record_runtime_overhead`` (Dynamo's config, on by default) brackets the reads with a
#     profiler record ("Pregraph bytecode"), two Python calls even while no profiler runs:
#     the capture turns it off, so a profile of a jitguard hit has no such record;
#   * symbolic sizes, strides and storage offsets are read through
#     ``torch._dynamo.utils.call_size``/``call_stride``/``call_storage_offset``, wrapped
#     in ``torch._disable_dynamo`` so that Dynamo does not trace them (a Python wrapper
#     and an eval-frame switch per read). jitguard's program never runs under Dynamo's
#     frame hook, so the bytecode is given its own name for that module (the code's
#     ``co_names`` entry renamed, which is the same in every Python version), bound in the
#     function's globals to ``_FAST_UTILS``: the three reads done directly
#     (``x.size(i)``: the same call on the same tensor, ``__torch_function__`` included),
#     every other name forwarded to the module itself.
# The function-mode stack is set aside around the compiled graph (Dynamo traced the modes
# into it) only for a capture made while a mode was active (``without_function_modes``):
# GLOBAL_STATE, which every entry checks, pins the stack, so an entry captured with an
# empty stack is only ever hit with one. The bytecode around the graph runs with the stack
# in place: it replays the side effects Dynamo recorded on a mode (a counter the mode
# bumps) through the stack itself.


class _FastDynamoUtils:
    """``torch._dynamo.utils`` as a jitguard program reads it ([Note: A hit's cost])."""

    __slots__ = ()

    @staticmethod
    def call_size(x: Any, i: int) -> int:
        return x.size(i)

    @staticmethod
    def call_stride(x: Any, i: int) -> int:
        return x.stride(i)

    @staticmethod
    def call_storage_offset(x: Any) -> int:
        return x.storage_offset()

    def __getattr__(self, name: str) -> Any:
        return getattr(_dynamo_utils, name)


_FAST_UTILS = _FastDynamoUtils()
#: The global name Dynamo's bytecode reads ``torch._dynamo.utils`` by (its import alias).
UTILS_ALIAS = "__import_" + _dynamo_utils.__name__.replace(".", "_dot_")
#: The name jitguard's programs read it by instead.
FAST_UTILS_NAME = "__jitguard_fast_dynamo_utils"


def fast_helpers(code: types.CodeType, f_globals: dict[str, Any]) -> types.CodeType:
    """``code`` reading ``torch._dynamo.utils`` as ``_FAST_UTILS`` ([Note: A hit's cost]),
    in this code object and the ones nested in it."""
    names = code.co_names
    consts = code.co_consts
    if any(isinstance(c, types.CodeType) for c in consts):
        consts = tuple(fast_helpers(c, f_globals) if isinstance(c, types.CodeType) else c
                       for c in consts)
    if UTILS_ALIAS in names:
        f_globals[FAST_UTILS_NAME] = _FAST_UTILS
        names = tuple(FAST_UTILS_NAME if n == UTILS_ALIAS else n for n in names)
    if names is code.co_names and consts is code.co_consts:
        return code
    return code.replace(co_names=names, co_consts=consts)



# A read of the graph's inputs, as ``pregraph`` follows it: a root (``("L", name)``, a
# parameter; ``("G", name)``, a global), then steps (``("item", key)``, a constant str or
# int key; ``("attr", name)``).
Path = tuple[Any, ...]


class Pregraph:
    """How a program reads its compiled graph's inputs (``paths``, one per input, in the
    order it passes them; ``names``, each as a source names it: ``L['self']._modules['a']``)
    and where in its bytecode (``rewrite``)."""

    def __init__(self, code: types.CodeType, paths: list[Path], begin: int, end: int,
                 params: tuple[str, ...]) -> None:
        self.code = code
        self.paths = paths
        self.names = [_render(p) for p in paths]
        self.params = params
        self._begin, self._end = begin, end

    def read(self, index: int, values: tuple[Any, ...], f_globals: dict[str, Any]) -> Any:
        """Input ``index`` read as the bytecode reads it, from the parameters' ``values``."""
        return self._follow(self.paths[index], values, f_globals, exact=False)

    def read_exact(self, values: tuple[Any, ...],
                   f_globals: dict[str, Any]) -> Optional[list[Any]]:
        """Every input read as ``read`` reads it; None where an item is read from anything
        but an exact dict, OrderedDict, tuple or list (whose item read is the container's
        own, as a pinned source reads it)."""
        out = []
        for path in self.paths:
            got = self._follow(path, values, f_globals, exact=True)
            if got is _INEXACT:
                return None
            out.append(got)
        return out

    def _follow(self, path: Path, values: tuple[Any, ...], f_globals: dict[str, Any], *,
                exact: bool) -> Any:
        value = values[self.params.index(path[1])] if path[0] == "L" else f_globals[path[1]]
        for kind, key in path[2:]:
            if kind == "item":
                if exact and type(value) not in _EXACT_ITEMS:
                    return _INEXACT
                value = value[key]
            else:
                value = getattr(value, key)
        return value

    def expression(self, index: int, param_names: tuple[str, ...]) -> Optional[str]:
        """Input ``index`` as a Python expression over ``param_names`` (the parameters
        renamed); None for a global root."""
        path = self.paths[index]
        if path[0] != "L":
            return None
        return _render(path, param_names[self.params.index(path[1])])

    def rewrite(self, reader: Callable[..., tuple[Any, ...]]) -> Optional[types.CodeType]:
        """The code with the reads replaced by one call ``reader(*params)`` whose tuple is
        the graph's arguments (then a jump over the rest of the span, padded with NOPs:
        offsets, the line table and the exception table stay as they were); None when the
        call does not fit."""
        ops, caches = dis.opmap, dis._inline_cache_entries  # type: ignore[attr-defined]
        code = self.code
        new = bytearray()

        def emit(name: str, arg: int = 0) -> None:
            op = ops[name]
            if arg > 255:
                new.extend((ops["EXTENDED_ARG"], arg >> 8))
            new.extend((op, arg & 0xFF))
            new.extend(b"\0\0" * caches[op])

        emit("PUSH_NULL")
        emit("LOAD_CONST", len(code.co_consts))
        for i in range(len(self.params)):
            emit("LOAD_FAST", i)
        emit("PRECALL", len(self.params))
        emit("CALL", len(self.params))
        emit("CALL_FUNCTION_EX", 0)
        span = self._end - self._begin
        if len(new) > span:
            return None
        # The rest of the span is NOPs, jumped over: the interpreter would dispatch each one
        # on every call (thousands on a deep model, where each parameter read was ~20
        # instructions). A jump into the span lands on NOPs that fall through to its end,
        # as before.
        rest = (span - len(new)) // 2  # code units left in the span
        if 2 < rest <= 0xFFFF:
            skip = rest - 1  # all but the jump itself
            emit("JUMP_FORWARD", skip if skip <= 255 else skip - 1)  # less its EXTENDED_ARG
        new.extend(bytes((ops["NOP"], 0)) * ((span - len(new)) // 2))
        co_code = code.co_code[:self._begin] + bytes(new) + code.co_code[self._end:]
        extra = max(0, 2 + len(self.params) - len(self.paths))
        return code.replace(co_code=co_code, co_consts=(*code.co_consts, reader),
                            co_stacksize=code.co_stacksize + extra)


_EXACT_ITEMS = (dict, collections.OrderedDict, tuple, list)
_INEXACT: Any = object()


def _render(path: Path, root: Optional[str] = None) -> str:
    """``path`` as a source names it (``L['self']._modules['a']``), or with its root
    written as ``root``."""
    out = root if root is not None else f"{path[0]}[{path[1]!r}]"
    for kind, key in path[2:]:
        out += f"[{key!r}]" if kind == "item" else f".{key}"
    return out


class _Ins(NamedTuple):
    """One instruction, as much of ``dis.Instruction`` as ``pregraph`` reads."""

    offset: int
    opname: str
    arg: Optional[int]
    argval: Any


def _instructions(code: types.CodeType) -> list[_Ins]:
    """``dis.get_instructions(code)`` (CPython 3.11) as far as ``pregraph`` reads it: the
    offset, name, argument and, for a constant, name or local, its value; without the line
    numbers, positions, labels and reprs ``dis`` also builds (about 3x faster here)."""
    names, consts = code.co_names, code.co_consts
    local = code._varname_from_oparg  # type: ignore[attr-defined]
    opname, hasconst, hasname = dis.opname, dis.hasconst, dis.hasname
    locals_ = set(dis.haslocal) | set(dis.hasfree)
    load_global = dis.opmap["LOAD_GLOBAL"]
    out = []
    for offset, op, arg in dis._unpack_opargs(code.co_code):  # type: ignore[attr-defined]
        deop = dis._deoptop(op)  # type: ignore[attr-defined]
        argval: Any = arg
        if arg is not None:
            if deop in hasconst:
                argval = consts[arg]
            elif deop == load_global:
                argval = names[arg >> 1]
            elif deop in hasname:
                argval = names[arg]
            elif deop in locals_:
                argval = local(arg)
        out.append(_Ins(offset, opname[deop], arg, argval))
    return out


def pregraph(code: types.CodeType, graph_name: str) -> Optional[Pregraph]:
    """How ``code`` (Dynamo's transformed bytecode, CPython 3.11) reads the inputs of the
    compiled graph it calls by the global ``graph_name``: each a chain of constant item and
    plain attribute reads from a parameter or a global (Dynamo's ``make_call_generated_code``,
    its temporaries included). None where the bytecode is anything else."""
    if sys.version_info[:2] != (3, 11) or not hasattr(dis, "_inline_cache_entries"):
        return None
    n = (code.co_argcount + code.co_kwonlyargcount
         + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08))
    params = tuple(code.co_varnames[:n])
    if n > 255 or any(p in code.co_cellvars for p in params):
        return None
    ins = _instructions(code)
    starts = [i for i, x in enumerate(ins) if x.opname == "LOAD_GLOBAL"
              and x.argval == graph_name and (x.arg or 0) & 1]
    if len(starts) != 1:
        return None
    stack: list[Any] = []
    temps: dict[str, Any] = {}
    j = starts[0] + 1
    while j + 1 < len(ins):
        x = ins[j]
        if x.opname == "PRECALL":
            break
        if x.opname == "LOAD_FAST":
            if x.argval in temps:
                stack.append(temps[x.argval])
            elif x.argval in params:
                stack.append(("L", x.argval))
            else:
                return None
        elif x.opname == "LOAD_CONST":
            stack.append(("const", x.argval))
        elif x.opname == "LOAD_GLOBAL" and not (x.arg or 0) & 1:
            stack.append(("G", x.argval))
        elif x.opname == "LOAD_ATTR" and stack and stack[-1][0] in ("L", "G"):
            stack.append((*stack.pop(), ("attr", x.argval)))
        elif x.opname == "BINARY_SUBSCR" and len(stack) >= 2:
            key, base = stack.pop(), stack.pop()
            if (key[0] != "const" or type(key[1]) not in (str, int)
                    or base[0] not in ("L", "G")):
                return None
            stack.append((*base, ("item", key[1])))
        elif x.opname == "COPY" and x.arg and len(stack) >= x.arg:
            stack.append(stack[-x.arg])
        elif x.opname == "STORE_FAST" and stack and x.argval not in params:
            temps[x.argval] = stack.pop()
        elif x.opname not in ("EXTENDED_ARG", "NOP"):
            return None
        j += 1
    else:
        return None
    call = j + 1
    while call < len(ins) and ins[call].opname == "EXTENDED_ARG":
        call += 1
    if (ins[j].arg != len(stack) or call == len(ins) or ins[call].opname != "CALL"
            or ins[call].arg != len(stack) or any(v[0] == "const" for v in stack)):
        return None
    k = call + 1  # past the call; then the temporaries' deletions (``clear_tempvars``),
    while k < len(ins):  # each with its EXTENDED_ARG past the 256th local
        d = k
        while d < len(ins) and ins[d].opname == "EXTENDED_ARG":
            d += 1
        if d == len(ins) or ins[d].opname != "DELETE_FAST" or ins[d].argval not in temps:
            break
        k = d + 1
    begin = ins[starts[0] + 1].offset
    end = ins[k].offset if k < len(ins) else len(code.co_code)
    if any(x.argval in temps for x in ins[:starts[0] + 1] + ins[k:]
           if x.opname in ("LOAD_FAST", "STORE_FAST", "DELETE_FAST")):
        return None  # a temporary read after the call
    if any(begin <= t < end for t in dis.findlabels(code.co_code)):
        return None
    if code.co_exceptiontable:
        table = getattr(dis, "_parse_exception_table", None)
        if table is None or any(e.start < end and begin < e.end for e in table(code)):
            return None
    return Pregraph(code, stack, begin, end, params)
