"""Tests for torch/pinned_inputs.py and adapter_fast.pregraph: a hit's program takes its
graph's inputs from what the front check pinned ([Note: Inputs read from the pins])."""

from __future__ import annotations

import dis
import sys
import types

import pytest
import torch

import jitguard
import jitguard.torch as jgt
from jitguard._src.compiler import snapshot
from jitguard._src.torch import adapter_fast, pinned_inputs

pytestmark = pytest.mark.skipif(
    not snapshot.available() or sys.version_info[:2] != (3, 11),
    reason="the front check and the rewrite need CPython 3.11 with the C extension")


def _model(n: int = 6) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(n)])


def _entry(c):  # type: ignore[no-untyped-def]
    (entry,) = list(jitguard.cache_of(c).entries())
    return entry


def _rewritten(fn: types.FunctionType) -> bool:
    return any(getattr(k, "__name__", "") == "read_graph_inputs" for k in fn.__code__.co_consts)


def _program(entry):  # type: ignore[no-untyped-def]
    """The program an entry runs (verify mode, on in this suite, wraps it)."""
    fn = entry.artifact
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False))
    inner = [c.cell_contents for c in cells.values()
             if isinstance(c.cell_contents, types.FunctionType)
             and c.cell_contents.__code__.co_name != fn.__code__.co_name]
    return next((f for f in inner if any(n.startswith("__compiled_fn") for n in f.__code__.co_names)), fn)


def _compiled(m: torch.nn.Module):  # type: ignore[no-untyped-def]
    c = jgt.compile(m, backend="eager", isolate_recompiles=True)
    x = torch.randn(2, 8)
    with torch.no_grad():
        c(x)
    return c, x


def test_program_reads_pinned_inputs_and_matches_eager() -> None:
    """A module's entry takes its parameters from the pins, and gives eager's output."""
    m = _model()
    c, x = _compiled(m)
    assert _rewritten(_program(_entry(c)))
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(c(x), m(x))



def test_rewritten_program_jumps_over_the_reads_it_replaced() -> None:
    """The span that read the parameters is jumped over, not run as NOPs: right after the
    graph call comes one jump to the span's end, where only NOPs lie in between."""
    m = _model(24)
    c, x = _compiled(m)
    code = _program(_entry(c)).__code__
    ins = list(dis.get_instructions(code))
    at = next(i for i, x in enumerate(ins) if x.opname == "CALL_FUNCTION_EX")
    jump = ins[at + 1] if ins[at + 1].opname != "EXTENDED_ARG" else ins[at + 2]
    assert jump.opname == "JUMP_FORWARD"
    skipped = [x for x in ins if jump.offset < x.offset < jump.argval]
    assert len(skipped) > 100 and {x.opname for x in skipped} == {"NOP"}
    assert ins[[x.offset for x in ins].index(jump.argval) - 1].opname == "NOP"
    with torch.no_grad():
        torch.testing.assert_close(c(x), m(x))

def test_a_program_past_256_locals_is_rewritten_too() -> None:
    """Past 256 locals, Dynamo's deletions of its temporaries after the graph call each
    carry an EXTENDED_ARG: the program is still rewritten (a deep OPT kept its ~30 us of
    reads before), and gives eager's output."""
    m = _model(270)
    c, x = _compiled(m)
    fn = _program(_entry(c))
    assert fn.__code__.co_nlocals > 256
    assert _rewritten(fn)
    with torch.no_grad():
        torch.testing.assert_close(c(x), m(x))


def test_replaced_parameter_is_read_after_the_snapshot_is_taken_again() -> None:
    """A parameter replaced by another of the same shape: the full check holds, the pins
    are taken again, and the graph gets the new parameter."""
    m = _model()
    c, x = _compiled(m)
    with torch.no_grad():
        m[2].weight = torch.nn.Parameter(torch.randn(8, 8))
        torch.testing.assert_close(c(x), m(x))
        torch.testing.assert_close(c(x), m(x))
    assert _rewritten(_program(_entry(c)))


def test_data_replaced_in_place_is_seen() -> None:
    """``p.data = t`` keeps the parameter object: the pinned value is it, with its new data."""
    m = _model()
    c, x = _compiled(m)
    with torch.no_grad():
        m[0].weight.data = torch.randn(8, 8)
        torch.testing.assert_close(c(x), m(x))


def test_front_check_off_for_good_gives_dynamos_reads_back() -> None:
    """Once the structure changed more often than the front check retakes its snapshot, the
    program gets its own bytecode back, and stays right."""
    m = _model()
    c, x = _compiled(m)
    entry = _entry(c)
    program = _program(entry)
    assert _rewritten(program)
    rewritten_size = len(program.__code__.co_consts)
    with torch.no_grad():
        for _ in range(snapshot.REARMS + 2):
            m[1].bias = torch.nn.Parameter(torch.randn(8))
            torch.testing.assert_close(c(x), m(x))
    assert not _rewritten(program)
    assert len(program.__code__.co_consts) == rewritten_size - 1


def test_reader_reads_every_input_when_the_pins_are_gone() -> None:
    """The reader, called while the pins are empty (a call in flight as the front check
    turns off), reads each input by its chain."""
    m = _model()
    c, x = _compiled(m)
    fn = _program(_entry(c))
    reader = next(k for k in fn.__code__.co_consts
                  if getattr(k, "__name__", "") == "read_graph_inputs")
    pinned = reader(m, x)
    state = reader.__globals__["___state"]
    saved, state[1] = state[1], ()
    try:
        again = reader(m, x)
    finally:
        state[1] = saved
    assert len(again) == len(pinned) and all(a is b for a, b in zip(again, pinned, strict=False))


def test_switched_off_keeps_dynamos_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``JITGUARD_PINNED_INPUTS`` off the program is left as Dynamo made it."""
    monkeypatch.setattr(pinned_inputs, "enabled", False)
    m = _model()
    c, x = _compiled(m)
    assert not _rewritten(_program(_entry(c)))
    with torch.no_grad():
        torch.testing.assert_close(c(x), m(x))


def test_too_few_pinned_inputs_keep_dynamos_reads() -> None:
    """A graph with fewer than MIN_PINNED pinned inputs keeps its reads."""
    m = torch.nn.Sequential(torch.nn.Linear(8, 8))
    c = jgt.compile(m, backend="eager", isolate_recompiles=True)
    x = torch.randn(2, 8)
    with torch.no_grad():
        c(x)
        torch.testing.assert_close(c(x), m(x))
    assert not _rewritten(_program(_entry(c)))


def test_pregraph_follows_dynamos_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """``pregraph`` reads the chains of a Dynamo program's graph inputs (a torch internal:
    the shape of Dynamo's ``make_call_generated_code``) and refuses other code."""
    monkeypatch.setattr(pinned_inputs, "enabled", False)
    m = _model(2)
    c, x = _compiled(m)
    fn = _program(_entry(c))
    assert not _rewritten(fn)
    graph = next(n for n in fn.__code__.co_names if n.startswith("__compiled_fn"))
    pg = adapter_fast.pregraph(fn.__code__, graph)
    assert pg is not None
    assert len(pg.names) == 5
    assert "L['self']._modules['0']._parameters['weight']" in pg.names
    assert "L['input']" in pg.names
    at = pg.names.index("L['self']._modules['1']._parameters['bias']")
    assert pg.read(at, (m, x), fn.__globals__) is m[1].bias
    assert adapter_fast.pregraph(_model.__code__, graph) is None


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="pregraph reads CPython 3.11")
def test_pregraphs_instructions_are_dis_s(monkeypatch: pytest.MonkeyPatch) -> None:
    """The instructions ``pregraph`` walks (CPython internals: ``dis._unpack_opargs``,
    ``dis._deoptop``, ``code._varname_from_oparg``) are ``dis.get_instructions``' offsets,
    names and arguments, with the values of every load, store and delete it follows."""
    monkeypatch.setattr(pinned_inputs, "enabled", False)
    code = _program(_entry(_compiled(_model(2))[0])).__code__
    ours = adapter_fast._instructions(code)
    theirs = list(dis.get_instructions(code))
    assert [(x.offset, x.opname, x.arg) for x in ours] == [
        (x.offset, x.opname, x.arg) for x in theirs]
    followed = ("LOAD_FAST", "STORE_FAST", "DELETE_FAST", "LOAD_CONST", "LOAD_GLOBAL",
                "LOAD_ATTR")
    assert [x.argval for x in ours if x.opname in followed] == [
        x.argval for x in theirs if x.opname in followed]


def test_pregraph_names_the_inputs_of_a_rewritten_capture() -> None:
    """Every pinned input of a rewritten program is one of its front check's pinned
    sources, by name."""
    m = _model()
    c, _x = _compiled(m)
    entry = _entry(c)
    pins = snapshot.pins(entry.check)
    assert pins is not None
    names = {s.name() for s in pins.sources}
    assert "L['self']._modules['0']._parameters['weight']" in names


class _Swapping(dict):  # type: ignore[type-arg]
    """A dict whose item read is not its stored item (a weight reads doubled)."""

    def __getitem__(self, key: str) -> object:
        got = dict.__getitem__(self, key)
        return got * 2 if key == "weight" else got


def test_item_reads_of_a_dict_subclass_never_come_from_the_pins() -> None:
    """A container along a chain becomes a dict subclass with its own item read: the call
    gives what the chains read (eager's result), never the pinned values."""
    m = _model()
    c, x = _compiled(m)
    holder = m[3]
    holder._parameters = _Swapping(holder._parameters)  # type: ignore[assignment]
    with torch.no_grad():
        for _ in range(2):
            torch.testing.assert_close(c(x), m(x))


def test_agrees_refuses_a_dict_subclass_along_a_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_agrees`` (run at bind and at each retaken snapshot) says no once an item along a
    chain is read from a dict subclass, even one that reads the same item."""
    monkeypatch.setattr(pinned_inputs, "enabled", False)
    m = _model()
    c, x = _compiled(m)
    fn = _program(_entry(c))
    graph = next(n for n in fn.__code__.co_names if n.startswith("__compiled_fn"))
    pg = adapter_fast.pregraph(fn.__code__, graph)
    assert pg is not None
    pins = snapshot.pins(_entry(c).check)
    assert pins is not None
    reader = pinned_inputs._reader(pg, pins, fn.__globals__)
    assert reader is not None
    assert pinned_inputs._agrees(pg, reader, (m, x), fn.__globals__)
    m[2]._parameters = _Swapping(m[2]._parameters)  # type: ignore[assignment]
    assert not pinned_inputs._agrees(pg, reader, (m, x), fn.__globals__)


def test_the_reader_is_readable_in_linecache() -> None:
    """The generated reader's source is in linecache under its own file name."""
    import inspect

    m = _model()
    c, _x = _compiled(m)
    reader = next(k for k in _program(_entry(c)).__code__.co_consts
                  if getattr(k, "__name__", "") == "read_graph_inputs")
    assert reader.__code__.co_filename.startswith("<jitguard graph inputs#")
    assert "pins = ___state[1]" in inspect.getsource(reader)
