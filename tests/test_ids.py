"""CompileId and TraceId: text forms, parsing, errors."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jitguard import (
    CA_COMPILE_ID_PATTERN,
    COMPILE_ID_PATTERN,
    CompileId,
    InvalidCompileIdError,
    JitGuardError,
    TraceId,
)

ids = st.integers(min_value=0, max_value=10**12)


def test_str_frame_form() -> None:
    """An ordinary compile prints as 'frame/compile'."""
    assert str(CompileId(frame_id=0, frame_compile_id=1)) == "0/1"


def test_str_compiled_autograd_form() -> None:
    """A compiled-autograd graph prints as '!id'."""
    cid = CompileId(frame_id=None, frame_compile_id=None, compiled_autograd_id=3)
    assert str(cid) == "!3"


def test_str_compiled_autograd_with_frame_form() -> None:
    """A frame compiled under compiled autograd prints as '!id/frame/compile'."""
    cid = CompileId(frame_id=1, frame_compile_id=2, compiled_autograd_id=3)
    assert str(cid) == "!3/1/2"


def test_str_rejects_half_set_frame_ids_under_compiled_autograd() -> None:
    """With compiled_autograd_id set, frame ids must be both set or both None."""
    with pytest.raises(AssertionError, match="both"):
        str(CompileId(frame_id=1, frame_compile_id=None, compiled_autograd_id=3))


def test_str_rejects_missing_frame_ids_without_compiled_autograd() -> None:
    """Without compiled_autograd_id both frame ids are required to print."""
    with pytest.raises(AssertionError):
        str(CompileId(frame_id=None, frame_compile_id=4))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0/1", CompileId(frame_id=0, frame_compile_id=1)),
        ("12/345", CompileId(frame_id=12, frame_compile_id=345)),
        ("!3", CompileId(frame_id=None, frame_compile_id=None, compiled_autograd_id=3)),
        ("!3/1/2", CompileId(frame_id=1, frame_compile_id=2, compiled_autograd_id=3)),
    ],
)
def test_from_string_all_forms(text: str, expected: CompileId) -> None:
    """from_string parses each of the three text forms into the right fields."""
    parsed = CompileId.from_string(text)
    assert parsed == expected
    assert str(parsed) == text


def test_patterns_match_their_forms() -> None:
    """COMPILE_ID_PATTERN takes 'F/C' only; CA_COMPILE_ID_PATTERN takes '!A' and '!A/F/C'."""
    m = COMPILE_ID_PATTERN.match("4/5")
    assert m is not None and m.groupdict() == {"frame_id": "4", "frame_compile_id": "5"}
    assert COMPILE_ID_PATTERN.match("!4") is None
    m = CA_COMPILE_ID_PATTERN.match("!7")
    assert m is not None
    assert m.groupdict() == {
        "compiled_autograd_id": "7",
        "frame_id": None,
        "frame_compile_id": None,
    }
    m = CA_COMPILE_ID_PATTERN.match("!7/8/9")
    assert m is not None
    assert m.groupdict() == {"compiled_autograd_id": "7", "frame_id": "8", "frame_compile_id": "9"}
    assert CA_COMPILE_ID_PATTERN.match("7/8") is None


def test_from_string_none_is_none() -> None:
    """from_string(None) is None."""
    assert CompileId.from_string(None) is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "0",
        "0/",
        "/1",
        "a/b",
        "0/1/2",
        "!",
        "!3/1",
        "!3/1/2/4",
        "!!3",
        " 0/1",
        "0/1 ",
        "-1/2",
        "0/1_2",
        "0/1\n",
        "!3\n",
        "\u0661/\u0662",
    ],
)
def test_from_string_garbage_raises_naming_the_string(text: str) -> None:
    """Anything but the three forms (trailing newline, Unicode digits included) is rejected."""
    with pytest.raises(InvalidCompileIdError) as info:
        CompileId.from_string(text)
    assert repr(text) in str(info.value)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, JitGuardError)


def test_from_string_non_string_raises() -> None:
    """A non-string (other than None) is an invalid compile id, not a crash."""
    with pytest.raises(InvalidCompileIdError, match="12"):
        CompileId.from_string(12)  # type: ignore[arg-type]


def test_trace_id_text_is_not_a_compile_id() -> None:
    """TraceId's '_attempt' suffix is not accepted by CompileId.from_string."""
    with pytest.raises(ValueError, match="0/1_2"):
        CompileId.from_string(str(TraceId(CompileId(frame_id=0, frame_compile_id=1), 2)))


def test_positional_construction_is_type_error() -> None:
    """CompileId is keyword-only."""
    with pytest.raises(TypeError):
        CompileId(0, 1)  # type: ignore[misc]


def test_compile_id_frozen_hashable_slotted() -> None:
    """CompileId is immutable, hashable by value and has no instance dict."""
    a = CompileId(frame_id=0, frame_compile_id=1)
    b = CompileId(frame_id=0, frame_compile_id=1)
    assert a == b and hash(a) == hash(b)
    assert len({a, b}) == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.frame_id = 2  # type: ignore[misc]
    assert not hasattr(a, "__dict__")
    assert CompileId(frame_id=0, frame_compile_id=1) != CompileId(frame_id=0, frame_compile_id=2)


def test_compiled_autograd_id_defaults_to_none() -> None:
    """compiled_autograd_id is optional and defaults to None."""
    assert CompileId(frame_id=0, frame_compile_id=0).compiled_autograd_id is None


def test_trace_id_str() -> None:
    """TraceId prints as the compile id for attempt 0, and 'id_attempt' otherwise."""
    cid = CompileId(frame_id=0, frame_compile_id=1)
    assert str(TraceId(cid, 0)) == "0/1"
    assert str(TraceId(cid, 2)) == "0/1_2"
    ca = CompileId(frame_id=None, frame_compile_id=None, compiled_autograd_id=5)
    assert str(TraceId(ca, 1)) == "!5_1"


def test_trace_id_is_a_named_tuple() -> None:
    """TraceId unpacks as (compile_id, attempt) and compares by value."""
    cid = CompileId(frame_id=2, frame_compile_id=3)
    tid = TraceId(cid, 1)
    assert tid.compile_id is cid and tid.attempt == 1
    assert tuple(tid) == (cid, 1)
    assert tid == TraceId(CompileId(frame_id=2, frame_compile_id=3), 1)


@settings(max_examples=60)
@given(frame=ids, compile_=ids, ca=st.none() | ids, with_frame=st.booleans())
def test_str_from_string_round_trip(
    frame: int, compile_: int, ca: int | None, with_frame: bool
) -> None:
    """str and from_string are inverses on every printable CompileId."""
    if ca is not None and not with_frame:
        cid = CompileId(frame_id=None, frame_compile_id=None, compiled_autograd_id=ca)
    else:
        cid = CompileId(frame_id=frame, frame_compile_id=compile_, compiled_autograd_id=ca)
    assert CompileId.from_string(str(cid)) == cid


@settings(max_examples=100)
@given(st.text())
def test_from_string_accepts_only_round_trippable_text(text: str) -> None:
    """Any accepted string parses to an id whose str reads back as the same id."""
    try:
        cid = CompileId.from_string(text)
    except InvalidCompileIdError as e:
        assert repr(text) in str(e)
        return
    assert cid is not None
    assert CompileId.from_string(str(cid)) == cid
    assert str(cid).isascii()


def test_from_string_too_many_digits_is_invalid_compile_id() -> None:
    """An id with more digits than int() parses is an InvalidCompileIdError, not a bare error."""
    text = "1" * 5000 + "/1"
    with pytest.raises(InvalidCompileIdError) as info:
        CompileId.from_string(text)
    assert text in str(info.value)
