"""Hostile text in keys, attribute names, local/global names, constants and check names
cannot change what the generated code does."""

from __future__ import annotations

import builtins
import functools
import io
import tokenize
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jitguard import (
    AttrSource,
    CheckFunction,
    GetItemSource,
    GlobalSource,
    GlobalStateSource,
    Guard,
    GuardBuilder,
    LocalSource,
    compile_guards,
    global_states,
    register_global_state,
)
from jitguard._src.sources import is_plain_identifier

L = LocalSource
EQ = GuardBuilder.EQUALS_MATCH

# Each, if it ever became code, would set builtins.PWNED or break the function's syntax.
PAYLOADS = [
    "'", '"', "\\", "\\'", "'''", '"""', "\n", "\r", "\r\n", "\x00", "#", "# x\nreturn True",
    "\t", "\x0c", "\x0b", "\x1b[31m",
    "__import__('os')",
    '"); import os; ("',
    "'); __import__('builtins').PWNED = 1; ('",
    "\"]) or setattr(__import__('builtins'), 'PWNED', 1) or ([\"",
    "\n        setattr(__import__('builtins'), 'PWNED', 1)\n",
    "\r        return True  #",
    "ﬁ", "\uff46\uff4f\uff4f", "\u210c", "é", "e\u0301", "\u202e", "\u2066evil\u2069", "\u200b", "\ufeff",
    "\u2028", "\u2029", "\x85", "\ud800", "\U0001f600",
    "{0}", "%s", "${x}", "L", "G", "v0", "l_x", "___key0", "__builtins__", "__class__",
    "True", "None", "class", "return", "x" * 300,
]


@pytest.fixture(autouse=True)
def _no_side_effects() -> Iterator[None]:
    """No payload ever runs: builtins.PWNED never appears."""
    assert not hasattr(builtins, "PWNED")
    yield
    assert not hasattr(builtins, "PWNED")


class Obj:
    def __init__(self, **attrs: Any) -> None:
        self.__dict__.update(attrs)


def with_attr(name: str, value: Any) -> Obj:
    obj = Obj()
    obj.__dict__[name] = value
    return obj


def code_shape(source: str) -> list[tuple[int, str]]:
    """The code tokens of ``source`` (comments and layout dropped). A plain identifier after
    a dot (an attribute read as ``v.name``) becomes ``<attr>``: that is the one place a name
    from a source appears in code, and only when it is ASCII, an identifier, not a keyword;
    likewise a positional parameter ``l_<local name>`` becomes ``<param>``, and bound
    names lose their number (which of them are shared may differ)."""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENDMARKER}
    out: list[tuple[int, str]] = []
    for t in tokenize.generate_tokens(io.StringIO(source).readline):
        if t.type in skip:
            continue
        if t.type == tokenize.NAME and out and out[-1] == (tokenize.OP, "."):
            assert is_plain_identifier(t.string)
            out.append((t.type, "<attr>"))
        elif t.type == tokenize.NAME and t.string.startswith("l_"):
            assert is_plain_identifier(t.string[2:])  # a positional parameter, l_<local>
            out.append((t.type, "<param>"))
        elif t.type == tokenize.NAME and t.string.startswith("___"):
            out.append((t.type, t.string.rstrip("0123456789")))  # a bound name, numbered
        else:
            out.append((t.type, t.string))
    return out


def assert_inert(check: CheckFunction, benign: CheckFunction) -> None:
    """``check`` compiles, is ASCII-clean line by line, and has exactly the code of the same
    guards built with a benign string: the hostile text lives only in bound constants."""
    compile(check.source, "<inert>", "exec")
    lines = check.source.splitlines()
    assert all(line.startswith(("def ", "    ")) for line in lines)
    assert len(lines) == len(benign.source.splitlines())
    assert all(c.isprintable() for c in check.source.replace("\n", ""))
    assert code_shape(check.source) == code_shape(benign.source)


def agree(check: CheckFunction, *args: Any) -> bool:
    result = check.reference(*args)
    assert check.fn(*args) is result
    return result


def benign_for(text: str) -> str:
    """A harmless string that takes the same code path (identifier or not) as ``text``."""
    return "zz" if is_plain_identifier(text) else "z-z"


# ---- dict keys ----------------------------------------------------------------------------


def key_guards(key: Any) -> list[Guard]:
    d = L("d")
    return [
        d.make_guard(GuardBuilder.DICT_KEYS_MATCH),
        d.make_guard(functools.partial(GuardBuilder.DICT_CONTAINS, key=key)),
        GetItemSource(d, key).make_guard(EQ),
    ]


@pytest.mark.parametrize("key", PAYLOADS)
def test_hostile_dict_keys(key: str) -> None:
    """A hostile dict key is bound, never pasted; the check behaves as the reference."""
    frame = {"d": {key: 1, "other": 2}}
    check = compile_guards(key_guards(key), f_locals=frame)
    benign = compile_guards(key_guards("k"), f_locals={"d": {"k": 1, "other": 2}})
    assert_inert(check, benign)
    assert agree(check, frame) is True
    assert agree(check, {"d": {key: 2, "other": 2}}) is False
    assert agree(check, {"d": {"k": 1, "other": 2}}) is False
    assert agree(check, {"d": {key + "x": 1, "other": 2}}) is False


@pytest.mark.parametrize("key", [b"\x00'\"\n#", ("'", "\n", 1), ("); import os; (", b"\\")])
def test_hostile_bytes_and_tuple_keys(key: Any) -> None:
    """Bytes and tuple keys holding hostile text are bound the same way (compared with a
    benign key of the same type: the code's shape may depend on key types, never on text)."""
    frame = {"d": {key: 1, "other": 2}}
    check = compile_guards(key_guards(key), f_locals=frame)
    plain = b"k" if type(key) is bytes else ("k",) * len(key)
    benign = compile_guards(key_guards(plain), f_locals={"d": {plain: 1, "other": 2}})
    assert_inert(check, benign)
    assert agree(check, frame) is True
    assert agree(check, {"d": {"k": 1, "other": 2}}) is False


# ---- attribute names ----------------------------------------------------------------------


ATTR_PAYLOADS = [p for p in PAYLOADS if "." not in p and p != "__class__"]


@pytest.mark.parametrize("attr", ATTR_PAYLOADS)
def test_hostile_attribute_names(attr: str) -> None:
    """A hostile attribute name reads exactly that attribute, through a bound name."""

    def guards(name: str) -> list[Guard]:
        return [
            AttrSource(L("o"), name).make_guard(GuardBuilder.HASATTR),
            AttrSource(L("o"), name).make_guard(EQ),
        ]

    frame = {"o": with_attr(attr, 5)}
    check = compile_guards(guards(attr), f_locals=frame)
    safe = benign_for(attr)
    assert_inert(check, compile_guards(guards(safe), f_locals={"o": with_attr(safe, 5)}))
    assert agree(check, frame) is True
    assert agree(check, {"o": with_attr(attr, 6)}) is False
    assert agree(check, {"o": Obj()}) is False


def test_nfkc_folding_attribute_is_not_its_folded_twin() -> None:
    """AttrSource 'ﬁ' reads the attribute 'ﬁ', not 'fi' (which `o.ﬁ` in source would read)."""
    obj = Obj(fi=1)
    setattr(obj, "ﬁ", 2)
    check = compile_guards([AttrSource(L("o"), "ﬁ").make_guard(EQ)], f_locals={"o": obj},
                           arg_names=["o"])
    assert "getattr(l_o, ___attr" in check.source
    assert agree(check, obj) is True
    obj.fi = 3
    assert agree(check, obj) is True
    setattr(obj, "ﬁ", 3)
    assert agree(check, obj) is False
    assert agree(check, Obj(fi=2)) is False


# ---- local and global names -----------------------------------------------------------------


@pytest.mark.parametrize("name", PAYLOADS)
def test_hostile_local_names(name: str) -> None:
    """A hostile local name is bound (mapping mode) or a safe parameter name (positional)."""
    frame = {name: 3, "other": "x"}
    guards = [L(name).make_guard(EQ)]
    safe = benign_for(name)
    benign_guards = [L(safe).make_guard(EQ)]
    by_map = compile_guards(guards, f_locals=frame)
    assert_inert(by_map, compile_guards(benign_guards, f_locals={safe: 3, "other": "x"}))
    by_pos = compile_guards(guards, f_locals=frame, arg_names=[name, "other"])
    benign_pos = compile_guards(benign_guards, f_locals={safe: 3, "other": "x"},
                                arg_names=[safe, "other"])
    assert_inert(by_pos, benign_pos)
    assert agree(by_map, frame) is True
    assert agree(by_map, {name: 4, "other": "x"}) is False
    assert agree(by_pos, 3, "x") is True
    assert agree(by_pos, 4, "x") is False


def test_nfkc_folding_local_is_not_its_folded_twin() -> None:
    """LocalSource('ﬁ') reads the local 'ﬁ', never 'fi'."""
    frame = {"ﬁ": 1, "fi": 2}
    by_map = compile_guards([L("ﬁ").make_guard(EQ)], f_locals=frame)
    by_pos = compile_guards([L("ﬁ").make_guard(EQ)], f_locals=frame, arg_names=["fi", "ﬁ"])
    assert agree(by_map, frame) is True
    assert agree(by_map, {"ﬁ": 2, "fi": 1}) is False
    assert agree(by_pos, 2, 1) is True
    assert agree(by_pos, 1, 2) is False


@pytest.mark.parametrize("name", PAYLOADS)
def test_hostile_global_names(name: str) -> None:
    """A hostile global name is bound; the global is read from f_globals at call time."""
    f_globals = {name: "v"}
    check = compile_guards([GlobalSource(name).make_guard(EQ)], f_locals={}, f_globals=f_globals)
    benign = compile_guards([GlobalSource("g").make_guard(EQ)], f_locals={}, f_globals={"g": "v"})
    assert_inert(check, benign)
    assert agree(check, {}) is True
    f_globals[name] = "w"
    assert agree(check, {}) is False


# ---- constants -------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [*PAYLOADS, *(p.encode("utf-8", "surrogatepass") for p in PAYLOADS)])
def test_hostile_string_constants(value: Any) -> None:
    """A hostile str or bytes constant is compared as a bound value, never as code."""
    check = compile_guards([L("s").make_guard(EQ)], f_locals={"s": value})
    benign = compile_guards([L("s").make_guard(EQ)], f_locals={"s": type(value)()})
    assert_inert(check, benign)
    assert agree(check, {"s": value}) is True
    assert agree(check, {"s": value + value[:1] if value else type(value)(b"x")}) is False


def test_hostile_constant_inside_tuple() -> None:
    """A tuple constant of hostile strings is compared whole and exactly."""
    value = ("'); __import__('builtins').PWNED = 1; ('", "\n", 1)
    check = compile_guards([L("t").make_guard(EQ)], f_locals={"t": value})
    assert_inert(check, compile_guards([L("t").make_guard(EQ)], f_locals={"t": ("a", "b", 1)}))
    assert agree(check, {"t": value}) is True
    assert agree(check, {"t": (*value[:2], 2)}) is False


# ---- names of checks and global states -------------------------------------------------------


@pytest.mark.parametrize("name", PAYLOADS)
def test_hostile_check_names(name: str) -> None:
    """A hostile check name gives a safe function name and an escaped filename."""
    check = compile_guards([L("n").make_guard(EQ)], f_locals={"n": 1}, name=name)
    compile(check.source, "<inert>", "exec")
    assert check.fn.__name__.isidentifier() and check.fn.__name__.isascii()
    assert check.filename.startswith("<jitguard check ") and check.filename.isprintable()
    assert agree(check, {"n": 1}) is True
    assert agree(check, {"n": 2}) is False


@pytest.mark.parametrize("name", ["'); __import__('builtins').PWNED = 1; ('", "\n#", "ﬁ", "a b"])
def test_hostile_global_state_names(name: str) -> None:
    """A global state with a hostile name is read through bound names."""
    cell = [1]
    register_global_state(name, lambda: cell[0])
    try:
        check = compile_guards([GlobalStateSource().make_guard(GuardBuilder.GLOBAL_STATE)],
                               f_locals={})
        compile(check.source, "<inert>", "exec")
        assert all(line.startswith(("def ", "    ")) for line in check.source.splitlines())
        assert agree(check, {}) is True
        cell[0] = 2
        assert agree(check, {}) is False
    finally:
        global_states.unregister(name)


# ---- random text ---------------------------------------------------------------------------

HOSTILE_TEXT = st.text(
    st.one_of(st.characters(), st.sampled_from(["'", '"', "\\", "\n", "\r", "#", "\x00", "ﬁ"])),
    max_size=12,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# An attribute every object already has (``__dict__``, ``__class__``) is not read from the
# instance dict: leave those out.
@given(key=HOSTILE_TEXT, attr=HOSTILE_TEXT.filter(lambda s: "." not in s and not hasattr(Obj(), s)),
       value=HOSTILE_TEXT,
       other=HOSTILE_TEXT)
def test_random_text_everywhere(key: str, attr: str, value: str, other: str) -> None:
    """Random text as key, attribute and constant: inert code, same answers as the reference."""
    d = L("d")
    o = AttrSource(GetItemSource(d, key), attr)
    guards = [
        d.make_guard(GuardBuilder.DICT_KEYS_MATCH),
        GetItemSource(d, key).make_guard(GuardBuilder.TYPE_MATCH),
        o.make_guard(EQ),
    ]
    frame = {"d": {key: with_attr(attr, value)}}
    check = compile_guards(guards, f_locals=frame, arg_names=["d"])
    # Benign stand-ins keep which of the three strings are equal (equal constants share a
    # bound name) and whether the attribute is a plain identifier.
    stand_in: dict[str, str] = {}
    for text in (key, attr, value):
        stand_in.setdefault(text, f"b{len(stand_in)}" if is_plain_identifier(text)
                            else f"b-{len(stand_in)}")
    bk, ba, bv = stand_in[key], stand_in[attr], stand_in[value]
    sd = L("d")
    benign = compile_guards(
        [sd.make_guard(GuardBuilder.DICT_KEYS_MATCH),
         GetItemSource(sd, bk).make_guard(GuardBuilder.TYPE_MATCH),
         AttrSource(GetItemSource(sd, bk), ba).make_guard(EQ)],
        f_locals={"d": {bk: with_attr(ba, bv)}}, arg_names=["d"],
    )
    assert_inert(check, benign)
    assert agree(check, frame["d"]) is True
    assert agree(check, {key: with_attr(attr, other)}) is (other == value)
    assert agree(check, {other: with_attr(attr, value)}) is (other == key)
    assert agree(check, {key: Obj()}) is False
