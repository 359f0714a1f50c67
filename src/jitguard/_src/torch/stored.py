"""A ``jitguard.torch.compile`` entry's artifact as bytes, and back in another process.

May import: jitguard._src.errors, jitguard._src.torch.adapter_stored,
jitguard._src.torch.adapter_runtime, the standard library.

# [Note: Stored captures]
# The bytes of an entry hold torch's own serialized forms: the program's bytecode
# (``SerializedCode``) and the compiled graph (``SerializableCallable``: the FX graph for
# "eager", AOTAutograd's bundled cache entry for "aot_eager" and "inductor"), plus the
# module aliases the bytecode reads as globals, the names Dynamo bound to the module's
# builtins dict (its guards read builtins through them), and a fingerprint of
# every code object Dynamo traced (the function, and each function and method it inlined:
# ``MLP.forward``, ``Linear.forward``, ``ModuleList.__iter__``, ...).
#
# Why the fingerprints: the guards of a stored entry re-bind classes, functions and code
# objects by name ([Note: Re-binding by name]), and Dynamo's guards on an inlined function
# say "the same function object" (ID_MATCH on it or on its ``__code__``), never "the same
# program text". Re-bound by name in a process whose source changed, they would hold for a
# function that does something else than the graph does. So each traced code object must
# be found again by name (the module whose file it came from, then its qualname; code
# nested in a found one is covered by its parent's fingerprint) and must fingerprint the
# same: bytecode, names, constants (nested code recursively, sets sorted by text),
# argument counts and flags; file names and line numbers are left out, so moving code does
# not matter and changing it does. A traced code that cannot be found by name (a lambda, a
# function made at run time) makes the entry not storable; one that changed makes the
# stored entry unusable, and the error names it.
#
# What is not stored: an entry whose graph holds parameters or buffers of its own (their
# values would come from the writing process; with torch's default of inlining nn.Modules
# they are graph inputs, read from the module on each call), a function with a closure
# (its guards read the cells through a global of the writing process), an entry with
# delegated guards (torch's guard tree does not travel), a capture failure, a backend
# whose compiled graph torch cannot serialize.
#
# Loading installs, in the function's module globals, the module aliases and the builtins
# dict names (refusing a name bound to another object; Dynamo's name counter is moved past
# them, so its later captures here never reuse one), and the compiled graph under
# a name of this process (the bytecode is renamed to match, so two loads of one entry never
# share a global).
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import pickle
import sys
import types
from collections.abc import Callable
from typing import Any

from ..errors import ArtifactError
from . import adapter_runtime, adapter_stored

__all__ = ["FORMAT", "dump", "load", "traced_fingerprints"]

FORMAT = 1
_load_ids = itertools.count()


def _const_text(value: Any) -> Any:
    if isinstance(value, types.CodeType):
        return ("code", _fingerprint(value))
    if isinstance(value, (frozenset, set)):
        return ("set", sorted(repr(_const_text(v)) for v in value))
    if isinstance(value, tuple):
        return ("tuple", [_const_text(v) for v in value])
    return (type(value).__qualname__, repr(value))


def _fingerprint(code: types.CodeType) -> str:
    parts = [
        code.co_code, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
        code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags,
        code.co_name, getattr(code, "co_qualname", code.co_name),
        getattr(code, "co_exceptiontable", b""), [_const_text(c) for c in code.co_consts],
    ]
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def _home(code: types.CodeType) -> tuple[str, str] | None:
    """(module, qualname) where a function whose ``__code__`` is ``code`` lives, or None."""
    qualname = getattr(code, "co_qualname", code.co_name)
    if "<" in qualname:
        return None
    for name, mod in list(sys.modules.items()):
        if getattr(mod, "__file__", None) != code.co_filename:
            continue
        fn = _find(name, qualname)
        if getattr(fn, "__code__", None) is code:
            return name, qualname
    return None


def _find(module: str, qualname: str) -> Any:
    current: Any = sys.modules.get(module)
    for part in qualname.split("."):
        if current is None:
            return None
        try:
            current = vars(current).get(part)
        except TypeError:
            return None
    # a staticmethod/classmethod in a class dict wraps the function
    return getattr(current, "__func__", current)


def _nested(code: types.CodeType) -> list[types.CodeType]:
    out = []
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out.append(c)
            out.extend(_nested(c))
    return out


def traced_fingerprints(traced: tuple[types.CodeType, ...]) -> list[tuple[str, str, str]]:
    """(module, qualname, fingerprint) of each traced code found by name; raises
    ``ArtifactError`` for one that is neither found nor nested in a found one."""
    found: list[tuple[str, str, str]] = []
    covered: set[int] = set()
    homeless = []
    for code in dict.fromkeys(traced):
        home = _home(code)
        if home is None:
            homeless.append(code)
            continue
        found.append((home[0], home[1], _fingerprint(code)))
        covered.update(id(c) for c in _nested(code))
    for code in homeless:
        if id(code) not in covered:
            raise ArtifactError(
                f"Dynamo traced {getattr(code, 'co_qualname', code.co_name)} "
                f"({code.co_filename}:{code.co_firstlineno}), which cannot be found again by "
                f"name in another process"
            )
    return found


def _check_traced(recorded: list[tuple[str, str, str]]) -> None:
    for module, qualname, fingerprint in recorded:
        fn = _find(module, qualname)
        code = getattr(fn, "__code__", None)
        if not isinstance(code, types.CodeType):
            raise ArtifactError(
                f"{module}.{qualname}, traced when the entry was stored, is not found in this "
                f"process"
            )
        if _fingerprint(code) != fingerprint:
            raise ArtifactError(
                f"the code of {module}.{qualname} changed since the entry was stored"
            )


def dump(saved: adapter_stored.SavedCapture, fn: types.FunctionType) -> bytes:
    """The bytes of one capture ([Note: Stored captures])."""
    if fn.__closure__:
        raise ArtifactError(
            f"{fn.__qualname__} has a closure: its guards read the cells through this process"
        )
    state = {
        "format": FORMAT,
        "function": f"{fn.__module__}.{fn.__qualname__}",
        "bytecode": adapter_stored.dump_code(saved.bytecode),
        "import_sources": dict(saved.import_sources),
        "builtins_names": list(saved.builtins_names),
        "backend_id": saved.backend_id,
        "compiled": adapter_stored.dump_compiled(saved.compiled),
        "traced": traced_fingerprints(saved.traced_code),
    }
    return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)


def load(data: bytes, fn: types.FunctionType, installed: list[str]) -> Callable[..., Any]:
    """The program ``dump`` stored, over ``fn``'s live module globals; the names it installs
    there for the compiled graph are appended to ``installed``. Raises ``ArtifactError``
    when it cannot be used here. ``data`` must be authenticated (it is unpickled)."""
    state = pickle.loads(data)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ArtifactError("a stored torch entry of another format")
    here = f"{fn.__module__}.{fn.__qualname__}"
    if state["function"] != here:
        raise ArtifactError(f"the stored entry is for {state['function']}, not {here}")
    _check_traced(state["traced"])
    g = fn.__globals__
    for alias, module_name in state["import_sources"].items():
        module = sys.modules.get(module_name) or importlib.import_module(module_name)
        if g.setdefault(alias, module) is not module:
            raise ArtifactError(f"the global {alias} of {fn.__module__} is not {module_name}")
    scope_builtins = adapter_stored.builtins_dict(g)
    adapter_stored.reserve_unique_ids(state["builtins_names"])
    for name in state["builtins_names"]:
        if g.setdefault(name, scope_builtins) is not scope_builtins:
            raise ArtifactError(f"the global {name} of {fn.__module__} is not its builtins")
    bytecode = adapter_stored.load_code(state["bytecode"])
    old = state["backend_id"]
    new = f"{old}_load{next(_load_ids)}"
    bytecode = bytecode.replace(co_names=tuple(new if n == old else n for n in bytecode.co_names))
    # [Note: A hit's cost]: under a function mode (GLOBAL_STATE pins it to the one of the
    # capture), the graph, which has the modes traced in, runs with them set aside
    compiled = adapter_runtime.without_function_modes(
        adapter_stored.load_compiled(*state["compiled"]))
    g[new] = compiled
    installed.append(new)
    program = types.FunctionType(bytecode, g, fn.__name__, fn.__defaults__, fn.__closure__)
    if fn.__kwdefaults__:
        program.__kwdefaults__ = dict(fn.__kwdefaults__)
    program.__qualname__ = fn.__qualname__
    return program
