"""Large checks cut into chunks: [Note: Chunked checks].

May import: compiler.builder, compiler.writer.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

from .builder import Leaf
from .writer import (
    CODE_NAME,
    RETURN_TRUE,
    Body,
    GeneratedCode,
    Namespace,
    OnWeak,
    Values,
    comment,
    write_function,
)

__all__ = ["CHUNK_ABOVE", "CHUNK_LEAVES", "generate_chunked"]


# [Note: Chunked checks]
# ``compile()`` costs 30-50 us per leaf, more per leaf as a function grows: a check of 10,000
# leaves as one function took half a second to compile. A check that large is mostly a few
# shapes of code over and over (the same guards on each of 2,000 records, on each layer of a
# model), so above ``CHUNK_ABOVE`` leaves the leaves are cut, in check order, into chunks of
# at most ``CHUNK_LEAVES``, and each chunk is a straight-line function of its own, with its
# own namespace whose names are numbered from 0. Two chunks of the same structure then have
# the same code text, and [Note: Compiled-code reuse] compiles it once: ``compile()`` runs
# once per distinct chunk shape (bench_compiler's 10,000 guards: 43 chunks, 8 shapes).
# For that, a chunk's text says nothing a repeat of the structure would change:
#   * its namespace binds every use of an object under its own name (a lone function shares
#     one name per object; in a chunk, which uses share a type would show in the text);
#   * what it needs from outside (the check's parameters, values read by earlier chunks)
#     arrives as parameters ``a0, a1, ...``, numbered in order of first use, whatever their
#     names elsewhere (several come as one list ``p``, unpacked on the chunk's first line);
#     it returns the values it read that later chunks need (a non-empty tuple, so truthy;
#     True when it returns none; False when a check fails).
# The check function only calls the chunks, in order, keeping the values passed between
# them in one list ``s`` (its parameters first, then what each chunk returned); a chunk's
# argument is a slice of ``s``, as values read in check order are needed in that order:
#
#     s = [l_records]
#     t = ___chunk_0(s[___at_0])  # check_NAME_chunk0: checks 0-239
#     if not t:
#         return False
#     s += t  # s[1:240] = L['records'][0], ..., L['records'][238]
#     ...
#     if not ___chunk_9(s[___at_9]):  # check_NAME_chunk9: checks 2001-2240
#         return False
#
# where ``___at_9`` is ``slice(1, 241)`` (a list display such as ``[s[___at_3],
# *s[___at_4]]`` when the values are not consecutive): positions are bound names too, so no
# generated text holds a literal. So each source is still read once, in check order, and
# the check function's text depends only on how many chunks take how many values.
# A chunk ends early, once a quarter full, where the kind's cost changes between consecutive
# leaves (a new group in check order), so chunks start at the same place in a repeated
# structure; 240 divides evenly by the small repeat counts (2, 3, 4, 5, 6, 8, 10, 12, 15,
# 16). Each chunk call costs
# about a microsecond on the hot path: on 10,000 leaves, chunks of 240 measured within a few
# percent of one function, chunks of 60 about 12% slower (for 10 ms less compiling).
# Each chunk ``check_NAME_chunkK`` is registered in linecache as ``<jitguard check NAME#N
# chunk K>``, its text commenting what each parameter holds; ``CheckFunction.filenames``
# lists the files and ``CheckFunction.source`` is the check function's text followed by
# every chunk's (the same guards still give the same text). Identity constants live in the
# chunk that binds them: ``on_weak`` gets that chunk's namespace, which a death patches
# (-1), and ``invalidate`` patches every namespace.
# Checks of up to ``CHUNK_ABOVE`` leaves, by far the most common, stay one function: no
# call, no argument passing (bench_compiler's scenarios (a)-(e) are all below it).
CHUNK_ABOVE = 1024
CHUNK_LEAVES = 240


def _split(leaves: Sequence[Leaf]) -> list[tuple[int, int]]:
    """(start, stop) of each chunk of ``leaves``."""
    bounds = []
    start = 0
    early = max(1, CHUNK_LEAVES // 4)
    cost = None
    for i, leaf in enumerate(leaves):
        c = leaf.kind.cost
        n = i - start
        if n >= CHUNK_LEAVES or (n >= early and c != cost):
            bounds.append((start, i))
            start = i
        cost = c
    if start < len(leaves):
        bounds.append((start, len(leaves)))
    return bounds


def generate_chunked(
    leaves: Sequence[Leaf],
    values: Values,
    params: list[str],
    signature: str,
    *,
    arg_names: Optional[Sequence[str]],
    f_globals: Optional[Mapping[str, Any]],
    on_weak: OnWeak,
    fname: str,
    filename: str,
) -> GeneratedCode:
    """The check function for ``leaves`` cut into chunks (see [Note: Chunked checks]);
    ``values`` holds the check's parameters ``params`` (``signature`` joined), ``fname`` and
    ``filename`` are the check function's name and file.

    Over 80 lines: one generated module's text, written top to bottom as it reads."""
    code_def = f"def {CODE_NAME}({signature}):"
    shown_def = f"def {fname}({signature}):"
    chunks: list[Body] = []
    for k, (start, stop) in enumerate(_split(leaves)):
        body = Body(k, Namespace(on_weak, share=False), values, arg_names, f_globals, chunks)
        body.first_leaf, body.last_leaf = start, stop - 1
        chunks.append(body)
        body.add_all(leaves[start:stop])

    # The check function keeps every value a chunk needs from outside in one list ``s``:
    # the check's parameters, then what each chunk returns, in order. A chunk's arguments
    # are slices of it (values read in check order are mostly needed in that order too).
    top_ns: dict[str, Any] = {"__builtins__": __builtins__}
    top_code = [f"        s = [{signature}]"]
    top_comments = [""]
    position = {value: value for value in range(len(params))}  # value -> its index in s
    # Positions in ``s`` are bound names too (``s[___at_3]``), so that the check function's
    # text holds no literal at all and depends only on how many chunks take how many values.
    at_names = itertools.count()

    def at(index: Any) -> str:
        name = f"___at_{next(at_names)}"
        top_ns[name] = index
        return name

    parts: list[tuple[str, str]] = []
    namespaces = [top_ns]
    for body in chunks:
        k = body.index
        cname = f"{fname}_chunk{k}"
        cfile = f"{filename[:-1]} chunk {k}>"
        exports = sorted(body.exports)
        ret = RETURN_TRUE
        if exports:
            ret = f"        return {_tuple([values.name[v] for v in exports])}"
        shown = comment("; ".join(f"a{i}: {s}" for i, s in enumerate(body.param_shown)))
        picks = [position[v] for v in body.params]
        code, comments = body.code, body.comments
        if len(picks) > 1:
            # One list argument, unpacked: a plain call (no ``*args``), one copy of the values.
            cparams, arg, def_comment = "p", _picks(picks, at), ""
            code = [f"        {_tuple(list(body.params.values()))} = p", *code]
            comments = [shown, *comments]
        else:
            cparams, arg, def_comment = ("a0", f"s[{at(picks[0])}]", f"  # {shown}") if picks else (
                "", "", "")
        fn, text = write_function(
            f"def {CODE_NAME}({cparams}):", f"def {cname}({cparams}):{def_comment}",
            code, comments, ret, body.ns.ns, cfile, cname,
        )
        parts.append((cfile, text))
        namespaces.append(body.ns.ns)
        top_ns[f"___chunk_{k}"] = fn
        call = f"___chunk_{k}({arg})"
        about = f"{cname}: checks {body.first_leaf}-{body.last_leaf}"
        if exports:
            first = len(position)
            for v in exports:
                position[v] = len(position)
            top_code += (f"        t = {call}", "        if not t:", "            return False",
                         "        s += t")
            shown = ", ".join(body.exports[v] for v in exports)
            top_comments += (about, "", "", comment(f"s[{first}:{len(position)}] = {shown}"))
        else:
            top_code += (f"        if not {call}:", "            return False")
            top_comments += (about, "")
    fn, text = write_function(
        code_def, shown_def, top_code, top_comments, RETURN_TRUE, top_ns, filename, fname
    )
    top_ns[fname] = fn
    parts.insert(0, (filename, text))
    source = "".join(t for _, t in parts)
    return GeneratedCode(fn, source, filename, top_ns, parts, namespaces)


def _picks(indices: Sequence[int], at: Callable[[Any], str]) -> str:
    """A list of ``s[i]`` for each index: a slice of ``s`` when the indices are consecutive,
    else a list display with a slice for each run of consecutive ones (``at`` binds an index
    or a slice and returns its name)."""
    out = []
    i = 0
    while i < len(indices):
        j = i + 1
        while j < len(indices) and indices[j] == indices[j - 1] + 1:
            j += 1
        if j - i == 1:
            out.append(f"s[{at(indices[i])}]")
        else:
            out.append(f"*s[{at(slice(indices[i], indices[j - 1] + 1))}]")
        i = j
    if len(out) == 1 and out[0][0] == "*":
        return out[0][1:]
    return f"[{', '.join(out)}]"


def _tuple(names: Sequence[str]) -> str:
    return names[0] + "," if len(names) == 1 else ", ".join(names)
