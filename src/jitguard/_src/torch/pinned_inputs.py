"""A program that takes its compiled graph's inputs from what the front check pinned
([Note: Inputs read from the pins]): ``remember`` keeps the name of a program's compiled
graph, ``bind`` (the torch compiler's ``pin_inputs``) rewrites the program once its entry's
check has a front check.

May import: jitguard._src.env, jitguard._src.compiler.codecache (the reader's code),
jitguard._src.torch.adapter_fast (the bytecode), the
standard library.

# [Note: Inputs read from the pins]
# A hit's program first reads each input of the compiled graph from the frame, through the
# chain Dynamo recorded (``L['self']._modules['model']._modules['layers']._modules['0']...
# ._parameters['weight']``): on a 36-layer Qwen3, 400 chains, ~1,400 item and attribute
# reads, ~30 us per call, each ``._modules`` a slow attribute read (``nn.Module`` has a
# ``__getattr__``, which CPython 3.11 does not specialize). The front check
# ([Note: Skipping structure guards by version tags]) has just proved, for most of those
# chains, that they read the very objects it pinned (``Pins``): the volatile leaves on the
# parameters (their TENSOR_MATCH) take them as its extra arguments. So the program is
# rewritten (``adapter_fast.pregraph``, CPython 3.11) to take the graph's inputs from one
# call, ``reader(*params)``: a pinned input (one whose chain of reads is named as a pinned
# source is) is the pinned value; any other is read by the same chain as before.
# Why it is sound: the program runs after its entry's check held, and that check is the
# front check. Either the snapshot held, and each pinned source reads its pinned value (the
# argument of [Note: Skipping structure guards by version tags]); or the full check held,
# after which the front check took its snapshot again (the pins are then those of this
# call's objects), or turned itself off for good, which empties the pins: ``reader`` sees
# that and reads every input by its chain, and the program gets Dynamo's bytecode back
# (``Pins.on_disarm``). Where one tensor is reached by two chains, Dynamo passes it once
# and guards that they are one object (DUPLICATE_INPUT); the reader follows the chain the
# bytecode follows. A pinned value is held strongly, so it is never a freed
# object. The values the graph gets are the objects the volatile check just checked (its
# TENSOR_MATCH ran on the pinned values themselves), where Dynamo's reads would read again
# whatever the check's own user code (a config's ``__getattribute__``) left there.
# A pinned source and a chain agree when they are named alike and every item read along
# the chain is of an exact dict, OrderedDict, tuple or list (the container's own item read,
# which is how a pinned source reads it; the snapshot pins those exact types, and an
# attribute read is pinned only where it is the instance dict's or a plain class value).
# ``bind`` refuses (the program stays as it was) unless the bytecode has the shape
# ``pregraph`` knows (each input a chain of constant item and plain attribute reads from a
# parameter or a global), at least ``MIN_PINNED`` inputs are pinned, every other one starts
# at a parameter, and on the call that made the entry the item reads are of exact
# containers and the reader returns exactly (``is``) what the chains read. Each time the
# snapshot is taken again the same is checked on that call, and the program gets its own
# reads back if it fails. ``JITGUARD_PINNED_INPUTS=0`` turns it off.
"""

from __future__ import annotations

import operator
import types
import weakref
from collections.abc import Callable
from typing import Any, Optional

from .. import env
from ..compiler.codecache import compile_generated, forget, generated_filename
from . import adapter_fast

__all__ = ["ENV_VAR", "MIN_PINNED", "bind", "enabled", "remember"]

ENV_VAR = "JITGUARD_PINNED_INPUTS"
#: A program with fewer pinned inputs keeps Dynamo's reads.
MIN_PINNED = 4

enabled = env.flag(ENV_VAR, default=True)

# artifact -> (the program it runs, the global name of the compiled graph that calls)
_graphs: weakref.WeakKeyDictionary[Any, tuple[types.FunctionType, str]] = (
    weakref.WeakKeyDictionary())


def remember(artifact: Any, program: Any, graph_names: tuple[str, ...]) -> None:
    """Keep, for an entry's ``artifact``, the ``program`` it runs (itself, or the one verify
    mode wraps) and the name of the one compiled graph that calls (nothing when there is
    not exactly one)."""
    if enabled and len(graph_names) == 1 and isinstance(program, types.FunctionType):
        _graphs[artifact] = (program, graph_names[0])


def bind(artifact: Any, pins: Any, values: tuple[Any, ...]) -> bool:
    """Rewrite the program ``artifact`` runs to take its graph inputs from ``pins`` (a front
    check's ``Pins``); ``values`` are the arguments of the call that made the entry, which
    its check just held on. Returns whether it did."""
    got = _graphs.pop(artifact, None) if enabled else None
    if got is None:
        return False
    program, graph = got
    code = program.__code__
    try:
        pg = adapter_fast.pregraph(code, graph)
        if pg is None:
            return False
        reader = _reader(pg, pins, program.__globals__)
        if reader is None or not _agrees(pg, reader, values, program.__globals__):
            return False
        new = pg.rewrite(reader)
    except Exception:  # anything unexpected: the program keeps Dynamo's reads
        return False
    if new is None:
        return False
    program.__code__ = new

    def restore() -> None:
        if program.__code__ is new:
            program.__code__ = code

    def retaken(args: tuple[Any, ...]) -> None:
        # the pins were taken again, on a call whose full check held: they must still be
        # what the chains read, item reads of exact containers, else Dynamo's reads return
        try:
            ok = _agrees(pg, reader, args, program.__globals__)
        except Exception:
            ok = False
        if not ok:
            restore()

    pins.on_rearm(retaken)
    pins.on_disarm(restore)
    return True


def _agrees(pg: adapter_fast.Pregraph, reader: Callable[..., tuple[Any, ...]],
            values: tuple[Any, ...], f_globals: dict[str, Any]) -> bool:
    """Whether ``reader`` returns, for ``values``, exactly (``is``) what the chains read,
    every item read along them from an exact container."""
    want = pg.read_exact(values, f_globals) if len(values) == len(pg.params) else None
    if want is None:
        return False
    have = reader(*values)
    return len(have) == len(want) and all(a is b for a, b in zip(have, want, strict=True))


def _reader(pg: adapter_fast.Pregraph, pins: Any,
            f_globals: dict[str, Any]) -> Optional[Callable[..., tuple[Any, ...]]]:
    """``reader(*params)``: the graph's inputs, the pinned ones from ``pins``, the others
    by their chains; None when too few are pinned or one starts at a global."""
    at = {s.name(): k for k, s in enumerate(pins.sources)}
    where = [at.get(name) for name in pg.names]
    if sum(k is not None for k in where) < MIN_PINNED:
        return None
    names = tuple(f"p{i}" for i in range(len(pg.params)))
    ns: dict[str, Any] = {"___state": pins.state, "___n": len(pins.sources),
                          "___read": pg.read, "___G": f_globals, "___count": len(pg.paths)}
    parts: list[str] = []
    run: list[int] = []

    def flush() -> None:
        if len(run) > 1:
            ns[f"___get{len(parts)}"] = operator.itemgetter(*run)
            parts.append(f"*___get{len(parts)}(pins)")
        elif run:
            parts.append(f"pins[{run[0]}]")
        run.clear()

    for i, k in enumerate(where):
        if k is None:
            flush()
            expr = pg.expression(i, names)
            if expr is None:
                return None
            parts.append(expr)
        else:
            run.append(k)
    flush()
    args = ", ".join(names)
    body = [f"def read_graph_inputs({args}):",
            "    pins = ___state[1]",
            "    if len(pins) != ___n:  # the front check is off for good: read every input",
            f"        return tuple(___read(i, ({args},), ___G) for i in range(___count))",
            f"    return ({', '.join(parts)},)"]
    compiled = compile_generated("\n".join(body) + "\n", generated_filename("graph inputs"))
    fn = compiled.function("read_graph_inputs", ns)
    # readable in tracebacks and debuggers, for as long as the reader lives
    weakref.finalize(fn, forget, compiled.filename)
    return fn
