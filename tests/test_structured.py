"""jitguard._src.structured: the trace writer ([Note: Structured trace])."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import pytest

import jitguard as jg
from jitguard._src import structured

ROOT = Path(__file__).resolve().parents[1]
GLOG = re.compile(r"^V\d{4} \d\d:\d\d:\d\d\.\d{6} \d+ [^\]]+:\d+\] (\{.*\})$")


@pytest.fixture(autouse=True)
def _no_trace() -> Iterator[None]:
    jg.set_trace(None)
    saved = structured.sinks()
    yield
    jg.set_trace(None)
    for sink in structured.sinks():
        if sink not in saved:
            structured.remove_sink(sink)


def read_records(path: str) -> list[tuple[dict[str, Any], Optional[str]]]:
    """(record, payload text) per record of a trace file, checking the glog form and md5."""
    out: list[tuple[dict[str, Any], Optional[str]]] = []
    payload: list[str] = []
    for line in Path(path).read_text().split("\n"):
        if line.startswith("\t"):
            payload.append(line[1:])
            continue
        if out and payload:
            out[-1] = (out[-1][0], "\n".join(payload))
        payload = []
        if not line:
            continue
        match = GLOG.match(line)
        assert match is not None, line
        out.append((json.loads(match.group(1)), None))
    if out and payload:
        out[-1] = (out[-1][0], "\n".join(payload))
    for record, text in out:
        if "has_payload" in record:
            assert text is not None
            assert hashlib.md5(text.encode()).hexdigest() == record["has_payload"]
    return out


class ListSink:
    """A sink that keeps what it is given."""

    def __init__(self) -> None:
        self.strings: dict[str, int] = {}
        self.records: list[tuple[dict[str, Any], Optional[str]]] = []

    def intern(self, text: str) -> int:
        return self.strings.setdefault(text, len(self.strings))

    def write(self, record: dict[str, Any], payload: Optional[str], where: str) -> None:
        self.records.append((record, payload))


def test_format_payload_forms() -> None:
    """A list is one JSON item per line, a dict indented JSON, a string as it is."""
    assert structured.format_payload([1, {"a": "b"}]) == '[\n1,\n{"a": "b"}\n]'
    assert structured.format_payload({"a": 1}) == '{\n"a": 1\n}'
    assert structured.format_payload("x\ny") == "x\ny"
    assert structured.format_payload(None) is None


def test_render_prefix_record_and_payload() -> None:
    """A record is a glog prefix and one JSON line; the payload follows on tab lines."""
    text = structured.render({"artifact": {"name": "n"}, "has_payload": "x"}, "a\nb", "m.py:3")
    first, *rest = text.split("\n")
    assert GLOG.match(first) and first.split("] ", 1)[0].endswith(" m.py:3")
    assert json.loads(first.split("] ", 1)[1]) == {"artifact": {"name": "n"}, "has_payload": "x"}
    assert rest == ["\ta", "\tb"]


def test_emit_without_sink_builds_nothing() -> None:
    """With no sink, emit does not call the metadata or payload builders."""
    assert not structured.active()

    def boom(intern: Any) -> Any:
        raise AssertionError("built")

    structured.emit("x", boom, payload=boom)


def test_emit_places_compile_id_and_payload_md5() -> None:
    """A record carries the compile id fields, attempt, and the payload's md5."""
    sink = ListSink()
    structured.add_sink(sink)
    cid = jg.CompileId(frame_id=3, frame_compile_id=1, compiled_autograd_id=2)
    structured.emit("dynamo_guards", lambda intern: {}, compile_id=cid, attempt=1,
                    payload=[{"code": "x"}])
    ((record, text),) = sink.records
    assert record == {
        "dynamo_guards": {}, "compiled_autograd_id": 2, "frame_id": 3, "frame_compile_id": 1,
        "attempt": 1, "has_payload": hashlib.md5(b'[\n{"code": "x"}\n]').hexdigest(),
    }
    assert text == '[\n{"code": "x"}\n]'


def test_payload_built_per_sink_with_its_interning() -> None:
    """A payload function is called per sink with that sink's intern table."""
    a, b = ListSink(), ListSink()
    b.intern("other.py")
    structured.add_sink(a)
    structured.add_sink(b)
    structured.emit("e", lambda intern: {"f": intern("x.py")},
                    payload=lambda intern: [intern("x.py")])
    assert a.records == [({"e": {"f": 0}, "has_payload": hashlib.md5(b"[\n0\n]").hexdigest()},
                          "[\n0\n]")]
    assert b.records[0][0]["e"] == {"f": 1} and b.records[0][1] == "[\n1\n]"


def test_failing_sink_is_removed_with_a_warning() -> None:
    """A sink that raises is dropped and says so once; the caller goes on."""

    class Broken(ListSink):
        def write(self, record: dict[str, Any], payload: Optional[str], where: str) -> None:
            raise OSError("disk full")

    sink = Broken()
    structured.add_sink(sink)
    with pytest.warns(RuntimeWarning, match="stopped writing the structured trace .*disk full"):
        structured.emit("e", lambda intern: {})
    assert sink not in structured.sinks()
    structured.emit("e", lambda intern: {})


def test_set_trace_writes_a_file_lazily(tmp_path: Path) -> None:
    """set_trace(dir) opens its file on the first record: a version artifact, interned
    names, then the records; set_trace(None) stops."""
    directory = tmp_path / "trace"
    assert jg.set_trace(str(directory)) == str(directory)
    assert structured.active() and not directory.exists()
    frame = type("F", (), {"filename": "/u/x.py", "lineno": 4, "name": "f", "line": "y = 1"})
    structured.emit("dynamo_start", lambda intern: {"stack": structured.frames([frame], intern)},
                    compile_id=jg.CompileId(frame_id=0, frame_compile_id=0))
    path = structured.trace_file()
    assert path is not None and Path(path).parent == directory
    assert Path(path).name.startswith("dedicated_log_jitguard_trace_")
    records = read_records(path)
    assert [next(iter(r)) for r, _ in records] == ["artifact", "str", "dynamo_start"]
    assert records[0][0]["artifact"] == {"name": "jitguard_version", "encoding": "json"}
    assert json.loads(records[0][1] or "")["python"] == sys.version.split()[0]
    assert records[1][0] == {"str": ["/u/x.py", 0]}
    assert records[2][0] == {
        "dynamo_start": {"stack": [{"line": 4, "name": "f", "filename": 0, "loc": "y = 1"}]},
        "frame_id": 0, "frame_compile_id": 0, "attempt": 0,
    }
    jg.set_trace(None)
    assert not structured.active() and structured.trace_file() is None


def test_environment_variable_sets_the_trace(tmp_path: Path) -> None:
    """JITGUARD_TRACE=DIR traces every compile of a process with no code."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "JITGUARD_TRACE": str(tmp_path)}
    code = "import jitguard as jg\nf = jg.specialize(lambda n: n)\nf(1); f(2)\n"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    (path,) = tmp_path.iterdir()
    names = [next(iter(r)) for r, _ in read_records(str(path))]
    assert names.count("compilation_metrics") == 2
