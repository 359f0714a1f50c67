"""jitguard._src.logs: JITGUARD_LOGS and set_logs ([Note: Log switches])."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import jitguard as jg
from jitguard._src import logs
from jitguard._src.cache import miss as miss_module

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _logs_off() -> Iterator[None]:
    logs.set_logs()
    yield
    logs.set_logs()


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **env}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=120,
        cwd=ROOT,
    )


def test_parse_names_and_levels() -> None:
    """A bare name is INFO, +name DEBUG, -name ERROR; spaces and a jitguard. prefix are fine."""
    assert logs.parse_logs("recompiles, +guards,-dispatch,jitguard.compile") == {
        "recompiles": logging.INFO,
        "guards": logging.DEBUG,
        "dispatch": logging.ERROR,
        "compile": logging.INFO,
    }
    assert logs.parse_logs("") == {}


def test_parse_all() -> None:
    """'all' turns every log on at the level given."""
    assert logs.parse_logs("+all") == dict.fromkeys(logs.LOGS, logging.DEBUG)


def test_parse_rejects_unknown_name() -> None:
    """An unknown name is a ValueError that names it and lists the logs."""
    with pytest.raises(ValueError) as info:
        logs.parse_logs("recompiles,recompile")
    assert str(info.value) == (
        "JITGUARD_LOGS/set_logs: 'recompile' is not a jitguard log; write names separated by "
        "commas, '+name' for DEBUG, '-name' for ERROR only, 'all' for every log; the logs are: "
        "codegen, compile, dispatch, guards, recompiles, recompiles_verbose, store, torch, trace"
    )
    with pytest.raises(ValueError, match="'re compiles' is not a jitguard log"):
        logs.parse_logs("re compiles")


def test_set_logs_string_turns_on_with_handler(capsys: pytest.CaptureFixture[str]) -> None:
    """set_logs('recompiles') gives the logger INFO and a handler writing to stderr, with a
    glog-style prefix on every line."""
    jg.set_logs("recompiles")
    logger = logging.getLogger("jitguard.recompiles")
    assert logger.level == logging.INFO and logger.propagate is False
    logger.info("first line\nsecond line")
    logger.debug("not shown")
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2
    assert err[0].startswith("I") and err[0].endswith(" jitguard.recompiles] first line")
    assert err[1].endswith(" jitguard.recompiles] second line")


def test_codegen_log_shows_generated_checks(capsys: pytest.CaptureFixture[str]) -> None:
    """+codegen prints the text of each generated check."""
    jg.set_logs("+codegen")
    f = jg.specialize(lambda n: n, global_state=False)
    f(41)
    err = capsys.readouterr().err
    assert "jitguard.codegen] generated <jitguard check" in err and "== ___" in err


def test_set_logs_keywords() -> None:
    """Keywords take True/False or a level; the last setting replaces the previous one."""
    jg.set_logs(guards=logging.DEBUG, compile=True)
    assert logs.turned_on() == {"guards": logging.DEBUG, "compile": logging.INFO}
    jg.set_logs("dispatch", dispatch=False, recompiles=True)
    assert logs.turned_on() == {"recompiles": logging.INFO}


def test_set_logs_keyword_errors() -> None:
    """An unknown keyword or a level that is not an int is an error naming it."""
    with pytest.raises(ValueError, match="unknown jitguard log 'recompile'"):
        jg.set_logs(recompile=True)
    with pytest.raises(TypeError, match=r"guards= takes True/False or a logging level, got 'x'"):
        jg.set_logs(guards="x")  # type: ignore[arg-type]


def test_set_logs_off_restores_the_logger() -> None:
    """set_logs() puts back the level and propagation the logger had, and removes the handler."""
    logger = logging.getLogger("jitguard.dispatch")
    logger.setLevel(logging.WARNING)
    before = list(logger.handlers)
    try:
        jg.set_logs("+dispatch")
        assert logger.level == logging.DEBUG and len(logger.handlers) == len(before) + 1
        jg.set_logs()
        assert logger.level == logging.WARNING and logger.propagate is True
        assert logger.handlers == before
    finally:
        logger.setLevel(logging.NOTSET)


def test_enabled_follows_any_configuration() -> None:
    """enabled() is true however the logger was turned on (also by the application)."""
    assert not logs.enabled("guards")
    logging.getLogger("jitguard.guards").setLevel(logging.INFO)
    try:
        assert logs.enabled("guards") and not logs.enabled("guards", logging.DEBUG)
    finally:
        logging.getLogger("jitguard.guards").setLevel(logging.NOTSET)


def test_recompile_reasons_logged(capsys: pytest.CaptureFixture[str]) -> None:
    """With recompiles on, a recompile prints every failing guard's reason."""
    jg.set_logs("recompiles")

    @jg.specialize
    def scale(x: float, k: int) -> float:
        return x * k

    scale(2.0, 3)
    scale(2.0, 4)
    first, _ = jg.cache_of(scale).compile_ids()
    err = capsys.readouterr().err
    assert "Recompiling function " in err and "scale" in err
    assert f"- {first}: L['k'] == 3 failed: got 4" in err


def test_compile_guards_dispatch_logs(capsys: pytest.CaptureFixture[str]) -> None:
    """compile, guards and dispatch each say their part of a compile."""
    jg.set_logs("compile,guards,+dispatch")

    @jg.specialize(global_state=False)
    def f(n: int) -> int:
        return n

    f(1)
    f(1)
    (cid,) = jg.cache_of(f).compile_ids()
    err = capsys.readouterr().err
    assert "jitguard.dispatch] " in err and ": miss: no entry yet" in err
    assert f"compiled {cid} in " in err and ": 1 checks, check " in err
    assert "jitguard.compile] " in err
    assert "jitguard.guards] " in err and f"guards of {cid} (1):" in err
    assert "jitguard.guards]     L['n'] == 1" in err


def test_nothing_formatted_when_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """With every log off, a recompile does not build its log message."""
    calls: list[int] = []
    real = miss_module.format_recompile

    def counting(*args: object, **kwargs: object) -> str:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(miss_module, "format_recompile", counting)
    f = jg.specialize(lambda n: n)
    f(1)
    f(2)
    assert calls == []
    jg.set_logs("recompiles")
    f(3.5)
    assert calls == [1]


def test_environment_variable_turns_logs_on() -> None:
    """JITGUARD_LOGS=recompiles shows the reasons with no logging code at all."""
    code = (
        "import jitguard as jg\n"
        "f = jg.specialize(lambda n: n)\n"
        "f(1); f(2)\n"
    )
    out = _run(code, JITGUARD_LOGS="recompiles")
    assert out.returncode == 0, out.stderr
    assert "jitguard.recompiles] Recompiling function <lambda>" in out.stderr
    assert "jitguard.recompiles]     - 0/0: L['n'] == 1 failed: got 2" in out.stderr


def test_environment_typo_warns_and_imports() -> None:
    """A bad JITGUARD_LOGS warns (naming the part) instead of making import fail."""
    out = _run("import jitguard; print('imported')", JITGUARD_LOGS="recompile")
    assert out.returncode == 0 and "imported" in out.stdout
    assert "'recompile' is not a jitguard log" in out.stderr


def test_demo_tour_shows_reasons_from_the_environment() -> None:
    """JITGUARD_LOGS=recompiles python examples/demo_cache.py prints the recompile reasons."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "JITGUARD_LOGS": "recompiles"}
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo_cache.py")], capture_output=True,
        text=True, env=env, timeout=300, cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "jitguard.recompiles] Recompiling function poly" in out.stdout + out.stderr
    assert "failed: got" in out.stderr
