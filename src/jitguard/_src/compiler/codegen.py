"""Code generation: leaves -> the Python source of a straight-line check function (for a
large check, a top-level function calling straight-line chunks, see ``chunks``).

May import: errors, guards, sources, compiler.builder, compiler.writer, compiler.chunks,
compiler.codecache.

# [Note: Generated check functions]
# The generated function returns True iff every leaf holds:
#   * each source is read once, into a variable, just before the first check that needs it;
#     a chain shares its prefix (``L['m'].layer`` is read once for everything under it); a
#     source only one leaf of a batch reads is read in place (see [Note: Batched leaves]);
#   * checks run shallow before deep (a value's type before what is read through it), cheap
#     before costly within a depth, relational and ambient checks last; the leaves of a
#     batching kind are one test, where the last of them stands ([Note: Batched leaves]);
#   * every constant is a name in the function's own globals (``___key_3``), never text in
#     the source, so no key, attribute name or value can change the code (the one name from
#     a source that appears as code is a plain ASCII identifier: ``v.attr``, or a positional
#     parameter ``l_x``); comments show source names with non-printable characters escaped;
#   * an object guarded by identity is bound by identity (``is``, or ``id()`` for a weakly
#     held one, see [Note: Identity binding]), never through an equal constant;
#   * one ``try`` wraps the body (free in CPython 3.11 when nothing raises): a read or check
#     that raises an Exception makes the function return False (a BaseException such as
#     KeyboardInterrupt propagates);
#   * the source is registered in ``linecache`` under ``<jitguard check NAME#N>``, so
#     tracebacks, ``inspect.getsource`` and pdb show it;
#   * the compiled code is shared by guard sets of the same structure (see
#     [Note: Compiled-code reuse]);
#   * a check of more than ``CHUNK_ABOVE`` leaves is split into chunks (see
#     [Note: Chunked checks]); every point above holds for each chunk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ..sources import LocalSource, is_plain_identifier
from . import chunks, writer
from .builder import Leaf
from .codecache import generated_filename
from .writer import GeneratedCode, OnWeak

__all__ = ["GeneratedCode", "check_function_name", "generate", "leaf_order_key"]


def leaf_order_key(leaf: Leaf) -> tuple[int, int, int]:
    """Shallow before deep, cheap before costly; relational and ambient leaves last."""
    kind, sources = leaf.kind, leaf.sources
    epilogue = 1 if (kind.relational or not kind.reads_value) else 0
    # A source's depth: how many bases it stands on.
    if len(sources) == 1:
        depth = len(sources[0].chain()) - 1
    else:
        depth = max([len(s.chain()) for s in sources], default=1) - 1
    return (epilogue, depth, kind.cost)


def check_function_name(name: str) -> str:
    """The name a check function called ``name`` is shown by: ``check_`` and ``name`` with
    every character but ASCII letters and digits written as ``_``."""
    return "check_" + "".join(c if c.isalnum() and c.isascii() else "_" for c in name)


def generate(
    leaves: Sequence[Leaf],
    *,
    name: str,
    arg_names: Optional[Sequence[str]],
    f_globals: Optional[Mapping[str, Any]],
    on_weak: OnWeak,
) -> GeneratedCode:
    """Generate the check function for ``leaves`` (already in check order).

    With ``arg_names`` the function takes those locals positionally; otherwise it takes one
    mapping of locals. Globals are read from ``f_globals`` at call time.
    """
    values = writer.Values()
    if arg_names is not None:
        params = []
        for i, arg in enumerate(arg_names):
            pname = f"l_{arg}" if is_plain_identifier(arg) else f"l{i}_"
            params.append(pname)
            values.where[LocalSource(arg)] = values.new(-1, pname)
        signature = ", ".join(params)
    else:
        params = ["L"]
        values.mapping = values.new(-1, "L")
        signature = "L"
    fname = check_function_name(name)
    filename = generated_filename(f"check {writer.comment(name)}")
    if len(leaves) > chunks.CHUNK_ABOVE:
        return chunks.generate_chunked(
            leaves, values, params, signature, arg_names=arg_names, f_globals=f_globals,
            on_weak=on_weak, fname=fname, filename=filename,
        )
    code_def = f"def {writer.CODE_NAME}({signature}):"
    shown_def = f"def {fname}({signature}):"
    body = writer.Body(0, writer.Namespace(on_weak), values, arg_names, f_globals, None)
    body.add_all(leaves)
    ns = body.ns.ns
    fn, text = writer.write_function(
        code_def, shown_def, body.code, body.comments, writer.RETURN_TRUE, ns, filename, fname
    )
    ns[fname] = fn
    return GeneratedCode(fn, text, filename, ns)
