"""The one home of generated code: ``compile_generated`` compiles a generated text under a
readable file name, registers it in ``linecache``, logs it at DEBUG and reuses compiled code.

May import: nothing from jitguard (the standard library only), so that every layer that
generates code (the guard compiler, the cache's signature and dispatcher, the torch
integration) can use it.

Every piece of code jitguard generates goes through ``compile_generated``:

    filename = generated_filename("check f")      # '<jitguard check f#12>'
    compiled = compile_generated(text, filename, shown=commented_text, owner=holder)
    compiled.run(namespace)                        # exec: defines the text's functions
    fn = compiled.function("___check", namespace, name="check_f")  # or pick one def

``text`` is a module: one or more ``def`` statements. What the function gives:
  * a file name that says what the code is (``<jitguard check f#12>``, ``<jitguard
    dispatch f#3>``), so tracebacks, ``inspect.getsource`` and pdb show the generated lines;
  * ``shown`` (default: ``text``) in ``linecache`` under that name. ``shown`` may add
    comments to ``text`` but must keep it line for line, so that line numbers agree. With
    ``owner``, the linecache entry goes when ``owner`` is collected; without, the caller
    removes it (``forget``);
  * the text at DEBUG on the ``jitguard.codegen`` logger, formatted only when that logger is
    on;
  * [Note: Compiled-code reuse].

Names a generated text makes up must not collide with the names it reads (a parameter may be
called ``Exception``): ``internal_prefix(names)`` gives a prefix none of them starts with, to
begin every made-up name (the guard compiler's check functions take their parameters as
``l_NAME`` and bind every constant as ``___hint_N``, so need none).

# [Note: Compiled-code reuse]
# ``compile()`` is most of the cost of building a large check. The code that is compiled
# holds no constant, source name or comment: constants are names bound in the function's
# namespace, comments are added only to the text shown in linecache (line for line, so line
# numbers agree), and a check function is compiled under a fixed name. So two guard sets with
# the same structure (a recompile after ``L['n'] == 7`` became ``L['n'] == 8``, the same guards
# on another call site) produce the very same code text, and the code compiled for the first
# is reused for the second, with its filename (and, through ``function(name=...)``, its
# name) replaced. Within one large check the same goes for its chunks ([Note: Chunked
# checks]), whose texts also do not depend on the check's parameter names, so checks of
# similar structure share chunk code too. The cache is keyed by the whole code text, so reuse
# is exactly as if the text had been compiled again; it keeps the ``CACHE_SIZE`` most recently
# used texts.
#
# [Note: Code names on 3.13]
# On CPython 3.13, ``code.replace(co_name=...)`` interns the new name for good (measured:
# every 20,000 distinct names grow memory by 415 KB more, never freed; 3.10-3.12 keep none,
# and replacing ``co_filename`` keeps nothing on any version). Every check has a name of its
# own, so a bounded cache whose values never repeat (``maxsize=100``, 5,000 ints) grew 204
# bytes per compile. There (``RENAME_INTERNS``) a function's code keeps the text's fixed
# name (``___check``): its own name is its ``__name__`` and ``__qualname__``, and a
# traceback shows the fixed name in the file whose name says which check it is
# (``<jitguard check f 0/3#6>``, its text in linecache under the own name).
"""

from __future__ import annotations

import itertools
import linecache
import logging
import sys
import threading
import types
import weakref
from collections.abc import Iterable
from typing import Any, Optional

__all__ = [
    "CACHE_SIZE",
    "CompiledText",
    "clear",
    "compile_generated",
    "forget",
    "generated_filename",
    "internal_prefix",
]

log = logging.getLogger("jitguard.codegen")

CACHE_SIZE = 256
_PLACEHOLDER = "<jitguard generated>"
_cache: dict[str, types.CodeType] = {}  # text -> module code compiled under _PLACEHOLDER
_lock = threading.Lock()
_counter = itertools.count()
# [Note: Code names on 3.13]: code.replace(co_name=) interns the name for good there
RENAME_INTERNS = sys.version_info >= (3, 13)


def internal_prefix(names: Iterable[str]) -> str:
    """A prefix for the names a generated text makes up that none of ``names`` (the names
    it must not shadow: parameters, globals it reads) starts with."""
    names = tuple(names)
    prefix = "___j"
    while any(n.startswith(prefix) for n in names):
        prefix += "_"
    return prefix


def generated_filename(what: str) -> str:
    """A fresh file name for generated code: ``<jitguard WHAT#N>``, N counting up."""
    return f"<jitguard {what}#{next(_counter)}>"


class CompiledText:
    """A generated text compiled under ``filename`` (``code`` is its module code)."""

    __slots__ = ("code", "filename")

    def __init__(self, code: types.CodeType, filename: str) -> None:
        self.code = code
        self.filename = filename

    def run(self, namespace: dict[str, Any]) -> None:
        """Execute the text in ``namespace``: its functions become names there."""
        exec(self.code, namespace)

    def function(
        self, def_name: str, namespace: dict[str, Any], *, name: Optional[str] = None
    ) -> types.FunctionType:
        """The function the text defines as ``def_name``, with ``namespace`` as its globals
        and, with ``name``, renamed (``__name__``, and the name tracebacks show)."""
        for const in self.code.co_consts:
            if isinstance(const, types.CodeType) and const.co_name == def_name:
                if name is None or RENAME_INTERNS:  # [Note: Code names on 3.13]
                    fn = types.FunctionType(const, namespace, name or def_name)
                    fn.__qualname__ = name or def_name
                    return fn
                return types.FunctionType(_renamed(const, name), namespace, name)
        raise LookupError(f"{self.filename} defines no function {def_name!r}")


def compile_generated(
    text: str, filename: str, *, shown: Optional[str] = None, owner: Any = None
) -> CompiledText:
    """Compile the generated module ``text`` under ``filename`` (see the module docstring),
    reusing the code compiled for an identical text. A ``SyntaxError`` (a bug in the
    generator, never user input) propagates."""
    shown = text if shown is None else shown
    with _lock:
        cached = _cache.pop(text, None)
        if cached is not None:
            _cache[text] = cached  # most recently used last
    if cached is None:
        cached = compile(text, _PLACEHOLDER, "exec")
        with _lock:
            _cache[text] = cached
            while len(_cache) > CACHE_SIZE:
                del _cache[next(iter(_cache))]
    linecache.cache[filename] = (len(shown), None, shown.splitlines(True), filename)
    if owner is not None:
        weakref.finalize(owner, linecache.cache.pop, filename, None)
    if log.isEnabledFor(logging.DEBUG):
        log.debug("generated %s:\n%s", filename, shown)
    return CompiledText(_with_filename(cached, filename), filename)


def forget(*filenames: str) -> None:
    """Drop generated files from ``linecache`` (for code registered without an owner)."""
    for filename in filenames:
        linecache.cache.pop(filename, None)


def clear() -> None:
    """Empty the compiled-code cache (benchmarks use it to time cold compiles)."""
    with _lock:
        _cache.clear()


def _with_filename(code: types.CodeType, filename: str) -> types.CodeType:
    """``code`` and every code object nested in it, under ``filename``."""
    consts = code.co_consts
    if any(isinstance(c, types.CodeType) for c in consts):
        consts = tuple(
            _with_filename(c, filename) if isinstance(c, types.CodeType) else c for c in consts
        )
        return code.replace(co_filename=filename, co_consts=consts)
    return code.replace(co_filename=filename)


def _renamed(code: types.CodeType, name: str) -> types.CodeType:
    if sys.version_info >= (3, 11):
        return code.replace(co_name=name, co_qualname=name)
    return code.replace(co_name=name)
