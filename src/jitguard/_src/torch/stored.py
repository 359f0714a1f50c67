"""A ``jitguard.torch.compile`` entry's artifact as bytes, and back in another process.

May import: jitguard._src.errors, jitguard._src.compiler.schema_homes,
jitguard._src.torch.adapter_stored, jitguard._src.torch.adapter_runtime,
jitguard._src.torch.pinned_inputs, the standard library.

# [Note: Stored captures]
# The bytes of an entry hold torch's own serialized forms: the program's bytecode
# (``SerializedCode``) and the compiled graph (``SerializableCallable``: the FX graph for
# "eager", AOTAutograd's bundled cache entry for "aot_eager" and "inductor"), plus the
# module aliases the bytecode reads as globals, the modules Dynamo bound to globals named
# by their id (its guard on ``type(t)`` reads ``G['_139665382568912_c0'].Tensor``), the
# names Dynamo bound to the module's builtins dict (its guards read builtins through
# them), and a fingerprint of
# every code object Dynamo traced (the function, and each function and method it inlined:
# ``MLP.forward``, ``Linear.forward``, ``ModuleList.__iter__``, ...).
#
# Why the fingerprints: the guards of a stored entry re-bind classes, functions and code
# objects by name ([Note: Re-binding by name]), and Dynamo's guards on an inlined function
# say "the same function object" (ID_MATCH on it or on its ``__code__``), never "the same
# program text". Re-bound by name in a process whose source changed, they would hold for a
# function that does something else than the graph does. So each traced code object must
# be found again by name as the guards' code objects are (``schema_homes.code_home``: the
# module it came from, a frozen one included, then its qualname, through ``__wrapped__``
# chains, or as the one code of its qualname nested in a found function's; code nested in
# a found one is also covered by its parent's fingerprint) and must fingerprint the
# same: bytecode, names, constants (nested code recursively, sets sorted by text),
# argument counts and flags; file names and line numbers are left out, so moving code does
# not matter and changing it does. A traced code that cannot be found by name (a lambda, a
# function made at run time) makes the entry not storable; one that changed makes the
# stored entry unusable, and the error names it.
#
# What is not stored: an entry whose graph holds parameters or buffers of its own (their
# values would come from the writing process; with torch's default of inlining nn.Modules
# they are graph inputs, read from the module on each call), a function with a closure
# whose guards read it through a global of this process only ([Note: The compiled
# function's global]), an entry with delegated guards (torch's guard tree does not
# travel), a capture failure, a backend whose compiled graph torch cannot serialize, an
# entry whose program or guards read a global Dynamo bound by id to an object other than
# a module (found nowhere by name in another process).
#
# [Note: The compiled function's global]
# The guards of a function with a closure (a decorator's wrapper: ``functools.wraps`` over
# the ``func`` it calls, as transformers' ``can_return_tuple`` on ``forward``) read its
# cells through the function itself, bound as a global of its module: "the function being
# compiled". That global is named from the function's ``__module__`` and ``__qualname__``
# (``function_global``), so the guards a stored entry holds name it the same way in every
# process. The name is the function's while it is bound to it: a second function object of
# the same name in the same globals (a class defined twice) gets a name of the process
# instead, and its entries are not stored. Loading refuses an entry whose global is not
# bound to the function it is loaded for. The store key holds the closure of the chain
# (the wrapped function's code), and each cell the guards read is guarded as Dynamo
# guarded it, so the name means in the reading process what it meant when written.
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

from ..compiler.schema_homes import code_home, decode_code, rebind_instances
from ..errors import ArtifactError, GuardSchemaError
from . import adapter_runtime, adapter_stored, pinned_inputs

__all__ = ["FORMAT", "dump", "function_global", "load", "traced_fingerprints"]

FORMAT = 2  # 2: traced code by its home ([Note: Re-binding by name])
_load_ids = itertools.count()

# [Note: Objects found at module level]: Dynamo guards what it reads of a module (its
# dicts' keys, types, hooks, flags) and makes its parameters and buffers graph inputs, so a
# module held by identity may be re-bound by the module-level name it lives at.
rebind_instances(adapter_stored.is_module)


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


def _nested(code: types.CodeType) -> list[types.CodeType]:
    out = []
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out.append(c)
            out.extend(_nested(c))
    return out


def _home_name(home: dict[str, Any]) -> str:
    module, _, qualname = str(home["code"]).partition(":")
    return f"{module}.{home.get('nested') or qualname}"


def traced_fingerprints(traced: tuple[types.CodeType, ...]) -> list[tuple[dict[str, Any], str]]:
    """(home, fingerprint) of each traced code found by name (``schema_homes.code_home``:
    a module's function or method, through ``__wrapped__`` chains, nested in a found
    function); raises ``ArtifactError`` for one that is neither found nor nested in a
    found one."""
    found: list[tuple[dict[str, Any], str]] = []
    covered: set[int] = set()
    homeless = []
    for code in dict.fromkeys(traced):
        home = code_home(code)
        if home is None:
            homeless.append(code)
            continue
        found.append((home, _fingerprint(code)))
        covered.update(id(c) for c in _nested(code))
    for code in homeless:
        if id(code) not in covered:
            raise ArtifactError(
                f"Dynamo traced {getattr(code, 'co_qualname', code.co_name)} "
                f"({code.co_filename}:{code.co_firstlineno}), which cannot be found again by "
                f"name in another process"
            )
    return found


def _check_traced(recorded: list[tuple[dict[str, Any], str]]) -> None:
    for home, fingerprint in recorded:
        try:
            code = decode_code(home, _home_name(home))
        except GuardSchemaError as e:
            raise ArtifactError(
                f"{_home_name(home)}, traced when the entry was stored, is not found in this "
                f"process: {e}"
            ) from None
        if _fingerprint(code) != fingerprint:
            raise ArtifactError(
                f"the code of {_home_name(home)} changed since the entry was stored"
            )


def function_global(fn: types.FunctionType) -> str:
    """The global a function with a closure is read through by its guards, the same in
    every process ([Note: The compiled function's global])."""
    text = f"{fn.__module__}:{fn.__qualname__}"
    return f"__jitguard_fn_{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def dump(saved: adapter_stored.SavedCapture, fn: types.FunctionType,
         fn_global: str | None = None) -> bytes:
    """The bytes of one capture ([Note: Stored captures]); ``fn_global``: the global the
    guards read ``fn`` through, for a function with a closure."""
    if fn.__closure__:
        portable = function_global(fn)
        if fn_global != portable or fn.__globals__.get(portable) is not fn:
            raise ArtifactError(
                f"{fn.__qualname__} has a closure, and its guards read the cells through "
                f"{fn_global}, a global of this process only (another function of its name "
                f"holds {portable}: [Note: The compiled function's global])"
            )
    state = {
        "format": FORMAT,
        "function": f"{fn.__module__}.{fn.__qualname__}",
        "bytecode": adapter_stored.dump_code(saved.bytecode),
        "import_sources": dict(saved.import_sources),
        "module_globals": dict(saved.module_globals),
        "builtins_names": list(saved.builtins_names),
        "backend_id": saved.backend_id,
        "compiled": adapter_stored.dump_compiled(saved.compiled),
        "traced": traced_fingerprints(saved.traced_code),
        "function_global": function_global(fn) if fn.__closure__ else None,
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
    name = state.get("function_global")
    if name is not None and g.get(name) is not fn:
        raise ArtifactError(f"the global {name} of {fn.__module__} is not this "
                            f"{fn.__qualname__} ([Note: The compiled function's global])")
    for alias, module_name in {**state["import_sources"], **state["module_globals"]}.items():
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
    pinned_inputs.remember(program, program, (new,))  # [Note: Inputs read from the pins]
    return program
