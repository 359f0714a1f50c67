"""Large checks cut into chunks ([Note: Chunked checks]): same answers, each source read
once, chunks compiled once per shape, every chunk in linecache, identity binding and
invalidation reaching every chunk."""

from __future__ import annotations

import gc
import linecache
import re
import traceback
from collections.abc import Iterator
from typing import Any

import pytest

from _helpers import Counted, Obj, record_compiles
from jitguard import (
    AttrSource,
    CheckFunction,
    GetItemSource,
    GlobalSource,
    Guard,
    GuardBuilder,
    LocalSource,
    compile_guards,
)
from jitguard._src.compiler import chunks, codecache, writer

L = LocalSource
EQ = GuardBuilder.EQUALS_MATCH
TYPE = GuardBuilder.TYPE_MATCH
KEYS = GuardBuilder.DICT_KEYS_MATCH
CONST = GuardBuilder.CONSTANT_MATCH


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """Chunk every check, 4 leaves a chunk."""
    monkeypatch.setattr(chunks, "CHUNK_ABOVE", 0)
    monkeypatch.setattr(chunks, "CHUNK_LEAVES", 4)
    yield 4


def records(n: int, shift: int = 0) -> list[dict[str, Any]]:
    return [{"id": i + shift, "tag": f"t{(i + shift) % 3}", "on": i % 2 == 0} for i in range(n)]


def record_guards(n: int, arg: str = "rs") -> list[Guard]:
    root = L(arg)
    guards = [root.make_guard(GuardBuilder.SEQUENCE_LENGTH)]
    for i in range(n):
        item = GetItemSource(root, i)
        guards.append(item.make_guard(KEYS))
        guards += [GetItemSource(item, k).make_guard(CONST) for k in ("id", "tag", "on")]
    return guards


def chunk_fns(check: CheckFunction) -> list[Any]:
    ns = check.fn.__globals__
    return [ns[k] for k in sorted((k for k in ns if k.startswith("___chunk_")),
                                  key=lambda k: int(k.rsplit("_", 1)[1]))]


# ---- when to chunk --------------------------------------------------------------------------


def test_small_checks_stay_one_function() -> None:
    """Up to CHUNK_ABOVE leaves the check is one straight-line function, as before."""
    n = chunks.CHUNK_ABOVE // 4 - 1
    check = compile_guards(record_guards(n), f_locals={"rs": records(n)}, arg_names=["rs"])
    assert len(check.leaves) <= chunks.CHUNK_ABOVE
    assert "___chunk" not in check.source and check.filenames == (check.filename,)
    assert check.fn(records(n)) is True


def test_same_guards_same_chunked_source(small_chunks: int) -> None:
    """Compiling the same guards twice gives the same text, chunks included."""
    a = compile_guards(record_guards(3), f_locals={"rs": records(3)}, arg_names=["rs"])
    b = compile_guards(record_guards(3), f_locals={"rs": records(3)}, arg_names=["rs"])
    assert "___chunk_1" in a.source and a.source == b.source and a.filenames != b.filenames


def test_large_check_is_chunked_and_exact() -> None:
    """Above CHUNK_ABOVE leaves the check is chunked; it accepts its frame, rejects a change
    in any record, and explain names the failing guard."""
    n = chunks.CHUNK_ABOVE // 4 + 50
    frame = records(n)
    check = compile_guards(record_guards(n), f_locals={"rs": frame}, arg_names=["rs"])
    assert len(check.leaves) > chunks.CHUNK_ABOVE
    assert len(chunk_fns(check)) >= len(check.leaves) // chunks.CHUNK_LEAVES
    assert check.fn(frame) is True
    for i in (0, n // 2, n - 1):
        for key, bad in (("id", -1), ("tag", "zz"), ("on", None)):
            other = records(n)
            other[i][key] = bad
            assert check.fn(other) is False
            assert check.reference(other) is False
            [failure] = check.explain(other)
            assert failure.source_names == (f"L['rs'][{i}][{key!r}]",)
    assert check.fn(frame[:-1]) is False
    assert check.fn(None) is False


def test_chunks_compile_once_per_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of the same structure share one compile(); a recompile of the same structure
    with other values compiles nothing."""
    calls = record_compiles(monkeypatch)
    n = 2000
    check = compile_guards(record_guards(n), f_locals={"rs": records(n)}, arg_names=["rs"])
    assert len(chunk_fns(check)) >= len(check.leaves) // chunks.CHUNK_LEAVES > 30
    assert len(calls) <= 10, len(calls)
    assert len(calls) == len(set(calls))
    first = len(calls)
    again = compile_guards(record_guards(n, "other"), f_locals={"other": records(n, 5)},
                           arg_names=["other"])
    assert len(calls) == first + 1  # only the check function (its parameter's name differs)
    assert again.fn(records(n, 5)) is True and again.fn(records(n)) is False
    assert check.fn(records(n)) is True and check.fn(records(n, 5)) is False


# ---- reads --------------------------------------------------------------------------------------


def test_each_source_read_once_across_chunks(small_chunks: int) -> None:
    """A value read in one chunk and needed in later ones is passed on, never read again."""
    inner = Counted(x=1, y=2, z=3)
    outer = Counted(b=inner, c=3)
    m = L("m")
    b = AttrSource(m, "b")
    guards = [m.make_guard(TYPE), b.make_guard(TYPE),
              *(AttrSource(b, k).make_guard(EQ) for k in "xyz"),
              *(AttrSource(b, k).make_guard(GuardBuilder.NOT_NONE) for k in "xyz"),
              AttrSource(m, "c").make_guard(EQ), AttrSource(m, "c").make_guard(EQ)]
    check = compile_guards(guards, f_locals={"m": outer}, arg_names=["m"])
    assert len(chunk_fns(check)) >= 3
    outer.reads.clear()
    inner.reads.clear()
    assert check.fn(outer) is True
    assert outer.reads == {"b": 1, "c": 1}
    assert inner.reads == {"x": 1, "y": 1, "z": 1}


def test_mapping_mode_and_globals_chunked(small_chunks: int) -> None:
    """Mapping mode (the locals mapping is passed to the chunks) and globals agree."""
    f_globals = {"cfg": Obj(lr=0.1, n=3)}
    frame = {"a": 1, "b": "x", "c": [1, 2], "d": {"k": 2.5}}
    guards = [L(k).make_guard(EQ) for k in ("a", "b")]
    guards += [L("c").make_guard(GuardBuilder.SEQUENCE_LENGTH),
               GetItemSource(L("c"), 1).make_guard(EQ), L("d").make_guard(KEYS),
               GetItemSource(L("d"), "k").make_guard(EQ), GlobalSource("cfg").make_guard(TYPE),
               AttrSource(GlobalSource("cfg"), "lr").make_guard(EQ),
               AttrSource(GlobalSource("cfg"), "n").make_guard(EQ)]
    check = compile_guards(guards, f_locals=frame, f_globals=f_globals)
    assert len(chunk_fns(check)) >= 2
    assert check.fn(frame) is True
    assert check.fn({**frame, "d": {"k": 2.0}}) is False
    assert check.fn({**frame, "c": [1]}) is False
    f_globals["cfg"].n = 4
    assert check.fn(frame) is False
    assert [str(f) for f in check.explain(frame)] == ["G['cfg'].n == 3 failed: got 4"]


def test_exceptions_in_a_chunk(small_chunks: int) -> None:
    """An Exception raised in a chunk makes the check False; a BaseException propagates,
    its traceback showing the chunk's line."""

    class Stop(BaseException):
        pass

    class Raiser:
        a, b, c, d, e = 1, 2, 3, 4, 5

        def __init__(self, exc: BaseException) -> None:
            self.exc = exc

        @property
        def z(self) -> Any:
            raise self.exc

    frame = Obj(a=1, b=2, c=3, d=4, e=5, z=6)
    guards = [AttrSource(L("o"), k).make_guard(EQ) for k in "abcdez"]
    check = compile_guards(guards, f_locals={"o": frame}, arg_names=["o"], name="tb")
    assert check.fn(frame) is True
    assert check.fn(Obj(a=1, b=2, c=3, d=4, e=5)) is False
    assert check.fn(Raiser(KeyError("z"))) is False
    with pytest.raises(Stop) as info:
        check.fn(Raiser(Stop()))
    text = "".join(traceback.format_exception(info.value))
    chunk_file = check.filenames[-1]
    assert re.fullmatch(r"<jitguard check tb#\d+ chunk 1>", chunk_file)
    # [Note: Code names on 3.13]: there the code keeps the text's fixed name
    name = writer.CODE_NAME if codecache.RENAME_INTERNS else "check_tb_chunk1"
    assert f'File "{chunk_file}"' in text and f"in {name}" in text
    assert "L['o'].z" in text  # the comment of the read that raised


# ---- linecache --------------------------------------------------------------------------------


def test_every_chunk_in_linecache(small_chunks: int) -> None:
    """Each chunk is registered as <jitguard check NAME#N chunk K> with its commented text;
    the entries go when the check does."""
    n = 5
    check = compile_guards(record_guards(n), f_locals={"rs": records(n)}, arg_names=["rs"],
                           name="big")
    fns = chunk_fns(check)
    assert len(check.filenames) == len(fns) + 1
    top, *chunk_files = check.filenames
    assert re.fullmatch(r"<jitguard check big#\d+>", top) and top == check.filename
    tag = top[len("<jitguard check "):-1]
    for k, (fn, filename) in enumerate(zip(fns, chunk_files, strict=True)):
        assert filename == f"<jitguard check {tag} chunk {k}>"
        assert fn.__code__.co_filename == filename and fn.__name__ == f"check_big_chunk{k}"
        text = "".join(linecache.getlines(filename))
        assert text.startswith(f"def check_big_chunk{k}(")
        assert text in check.source
        compile(text, "<inert>", "exec")
    first = "".join(linecache.getlines(chunk_files[0]))
    assert first.startswith("def check_big_chunk0(a0):  # a0: L['rs']")
    assert "# SEQUENCE_LENGTH: type(L['rs']) is list and len(L['rs']) == 5" in first
    top_text = "".join(linecache.getlines(top))
    assert top_text.startswith("def check_big(l_rs):")
    assert re.search(r"___chunk_1\(.*\)  # check_big_chunk1: checks \d+-\d+\n", top_text)
    compile(check.source, "<inert>", "exec")
    del check, fns
    gc.collect()
    assert all(f not in linecache.cache for f in (top, *chunk_files))


# ---- identity and invalidation ------------------------------------------------------------------


def make_local_object() -> Any:
    class Local:
        pass

    return Local()


def test_dead_object_in_a_later_chunk_invalidates(small_chunks: int) -> None:
    """ID_MATCH on objects bound in several chunks: a death sets that chunk's id to -1 and
    invalidates the check, which says which source died."""
    objs = [make_local_object() for _ in range(10)]
    guards = [GetItemSource(L("xs"), i).make_guard(GuardBuilder.ID_MATCH) for i in range(10)]
    check = compile_guards(guards, f_locals={"xs": objs}, arg_names=["xs"])
    fn = check.fn
    fns = chunk_fns(check)
    assert len(fns) >= 3
    seen: list[CheckFunction] = []
    check.on_invalidate(seen.append)
    assert fn(objs) is True
    last_ns = fns[-1].__globals__
    ids = [k for k, v in last_ns.items() if k.startswith("___id_")]
    assert ids and all(last_ns[k] != -1 for k in ids)
    victim = objs.pop()
    objs.append(make_local_object())
    del victim
    gc.collect()
    assert check.valid is False and seen == [check]
    assert check.invalid_reason == "Cache line invalidated because L['xs'][9] got deallocated"
    assert any(last_ns[k] == -1 for k in ids)
    assert fn(objs) is False and check.fn(objs) is False


def test_chunk_ids_patched_when_only_fn_is_kept(small_chunks: int) -> None:
    """A generated fn kept after its CheckFunction is dropped still fails once an object
    bound in one of its chunks dies: the death patches that chunk's namespace."""
    objs = [make_local_object() for _ in range(9)]
    guards = [GetItemSource(L("xs"), i).make_guard(GuardBuilder.ID_MATCH) for i in range(9)]
    check = compile_guards(guards, f_locals={"xs": objs}, arg_names=["xs"])
    fn = check.fn
    second = chunk_fns(check)[1].__globals__
    (name, *_) = [k for k in second if k.startswith("___id_")]
    del check
    gc.collect()
    assert fn(objs) is True
    del objs[4:]
    gc.collect()
    assert -1 in [second[k] for k in second if k.startswith("___id_")]
    assert fn([*objs, *(make_local_object() for _ in range(5))]) is False
    del name


def test_invalidate_reaches_every_chunk(small_chunks: int) -> None:
    """invalidate() sets every bound id in every chunk to -1 and fails the fn taken before."""
    objs = [make_local_object() for _ in range(10)]
    guards = [GetItemSource(L("xs"), i).make_guard(GuardBuilder.ID_MATCH) for i in range(10)]
    check = compile_guards(guards, f_locals={"xs": objs}, arg_names=["xs"])
    fn = check.fn
    namespaces = [f.__globals__ for f in chunk_fns(check)]
    check.invalidate("stale")
    assert fn(objs) is False and check.fn(objs) is False and check.invalid_reason == "stale"
    bound = [ns[k] for ns in namespaces for k in ns if k.startswith("___id_")]
    assert len(bound) == 10 and set(bound) == {-1}
