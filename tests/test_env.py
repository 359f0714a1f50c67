"""jitguard._src.env: every JITGUARD_* variable read, validated and documented in one place
([Note: Environment variables])."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import jitguard
from jitguard._src import env

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "jitguard"


def _run(code: str, cwd: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("JITGUARD_")}
    full.update(PYTHONPATH=str(ROOT / "src"), **variables)
    return subprocess.run([sys.executable, "-W", "always", "-c", code], capture_output=True,
                          text=True, env=full, timeout=300, cwd=cwd)


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts with no JITGUARD_* variable set and no warning remembered."""
    for name in [k for k in os.environ if k.startswith("JITGUARD_")]:
        monkeypatch.delenv(name)
    monkeypatch.setattr(env, "_warned", set())


def _warns(match: str) -> pytest.WarningsRecorder:
    return pytest.warns(jitguard.EnvironmentVariableWarning, match=match)


@pytest.mark.parametrize(("text", "value"), [
    ("1", True), ("true", True), ("YES", True), ("On", True), (" yes ", True),
    ("0", False), ("false", False), ("No", False), ("OFF", False), ("", False),
])
def test_flag_accepts_the_usual_words(monkeypatch: pytest.MonkeyPatch, text: str,
                                      value: bool) -> None:
    """A switch takes 1/0, true/false, yes/no, on/off in any case; empty is the default."""
    monkeypatch.setenv("JITGUARD_VERIFY", text)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert env.flag("JITGUARD_VERIFY") is value


def test_bad_flag_warns_once_and_keeps_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """A word that is no switch: one warning naming the variable, the value, the words it
    takes and the default; a second read does not warn again."""
    monkeypatch.setenv("JITGUARD_VERIFY", "sure")
    with _warns(r"JITGUARD_VERIFY='sure' is not a switch \(1/0, true/false, yes/no, on/off\); "
                r"using the default \(off\)"):
        assert env.flag("JITGUARD_VERIFY") is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert env.flag("JITGUARD_VERIFY") is False


@pytest.mark.parametrize(("text", "value"), [
    ("1000", 1000), ("512KB", 512_000), ("512kb", 512_000), ("64MB", 64_000_000),
    ("1GiB", 2**30), ("2 MiB", 2 * 2**20), ("1.5GB", 1_500_000_000), ("10_000", 10_000),
    ("3K", 3000), ("7B", 7),
])
def test_size_accepts_units(monkeypatch: pytest.MonkeyPatch, text: str, value: int) -> None:
    """Sizes are bytes, or with a unit (KB = 1000, KiB = 1024)."""
    monkeypatch.setenv("JITGUARD_CACHE_MAX_BYTES", text)
    assert env.size("JITGUARD_CACHE_MAX_BYTES", 5) == value


@pytest.mark.parametrize("text", ["abc", "0", "-5", "12 parsecs", "0.1B", "MB"])
def test_bad_size_warns_and_keeps_the_default(monkeypatch: pytest.MonkeyPatch,
                                              text: str) -> None:
    """A size that is not one (or under a byte) warns and the default is kept."""
    monkeypatch.setenv("JITGUARD_CACHE_MAX_BYTES", text)
    with _warns("is not a size of at least one byte"):
        assert env.size("JITGUARD_CACHE_MAX_BYTES", 5) == 5


@pytest.mark.parametrize(("text", "value"), [
    ("0.5", 0.5), ("500ms", 0.5), ("30s", 30.0), ("5m", 300.0), ("2h", 7200.0),
    ("7d", 604800.0), (".25", 0.25),
])
def test_seconds_accept_units(monkeypatch: pytest.MonkeyPatch, text: str, value: float) -> None:
    """Durations are seconds, or with a unit (ms, s, m, h, d)."""
    monkeypatch.setenv("JITGUARD_REDIS_TTL", text)
    assert env.seconds("JITGUARD_REDIS_TTL", 1.0) == pytest.approx(value)


def test_bad_seconds_warn(monkeypatch: pytest.MonkeyPatch) -> None:
    """A duration of zero or of no number warns and the default is kept."""
    for text in ("0", "soon", "-1"):
        monkeypatch.setenv("JITGUARD_REDIS_TIMEOUT", text)
        with _warns("is not a duration above zero"):
            assert env.seconds("JITGUARD_REDIS_TIMEOUT", 0.5) == 0.5


def test_short_key_warns_without_showing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A JITGUARD_CACHE_KEY under 16 bytes is refused with a warning that does not print it."""
    monkeypatch.setenv("JITGUARD_CACHE_KEY", "hunter2")
    with _warns("JITGUARD_CACHE_KEY='<hidden>' is shorter than 16 bytes") as record:
        assert env.text("JITGUARD_CACHE_KEY", min_bytes=16) is None
    assert "hunter2" not in str(record[0].message)


def test_redis_url_must_have_a_scheme(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Redis URL needs redis://, rediss:// or unix://; anything else is no shared tier."""
    monkeypatch.setenv("JITGUARD_REDIS_URL", "127.0.0.1:6379")
    with _warns("is not a Redis URL"):
        assert env.url("JITGUARD_REDIS_URL") is None
    monkeypatch.setenv("JITGUARD_REDIS_URL", "redis://127.0.0.1:6379/0")
    assert env.url("JITGUARD_REDIS_URL") == "redis://127.0.0.1:6379/0"


def test_store_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """JITGUARD_STORE: a switch, or a path; a bare word is neither (a warning, no store), and
    a path whose parent does not exist is no store either."""
    monkeypatch.chdir(tmp_path)
    for text, value in (("1", True), ("yes", True), ("off", False), ("", False)):
        monkeypatch.setenv("JITGUARD_STORE", text)
        assert env.store() is value
    monkeypatch.setenv("JITGUARD_STORE", "maybe")
    with _warns(r"JITGUARD_STORE='maybe' is neither a switch .* nor a path \(absolute, or "
                r"starting with \./ \.\./ ~\); using the default \(off, no store\)"):
        assert env.store() is False
    monkeypatch.setenv("JITGUARD_STORE", "/nonexistent/x")
    with _warns("names a folder whose parent '/nonexistent' does not exist"):
        assert env.store() is False
    monkeypatch.setenv("JITGUARD_STORE", "./here")
    assert env.store() == Path("here")
    monkeypatch.setenv("JITGUARD_STORE", str(tmp_path / "abs"))
    assert env.store() == tmp_path / "abs"
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing made by reading


def test_directory_must_be_a_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A directory variable naming a file, or a folder under a missing one, is refused."""
    (tmp_path / "f").write_text("x")
    monkeypatch.setenv("JITGUARD_TRACE", str(tmp_path / "f"))
    with _warns("is a file, not a directory"):
        assert env.directory("JITGUARD_TRACE") is None
    monkeypatch.setenv("JITGUARD_TRACE", str(tmp_path / "a" / "b"))
    with _warns("does not exist"):
        assert env.directory("JITGUARD_TRACE") is None
    monkeypatch.setenv("JITGUARD_TRACE", str(tmp_path / "new"))
    assert env.directory("JITGUARD_TRACE") == tmp_path / "new"


def test_unknown_variable_is_a_key_error() -> None:
    """Reading a name that is not in the table is a mistake in jitguard, said at once."""
    with pytest.raises(KeyError, match="JITGUARD_NOPE is not one of"):
        env.raw("JITGUARD_NOPE")


def test_every_variable_is_read_here_only() -> None:
    """No module but env reads a JITGUARD_* variable from the environment, and every
    JITGUARD_* name the sources mention is in the table."""
    readers = re.compile(r"(os\.environ|os\.getenv|environ\.get)")
    names = set()
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        names.update(re.findall(r"\bJITGUARD_[A-Z_]+[A-Z]\b", text))
        if path.name == "env.py":
            continue
        for line in text.splitlines():
            if readers.search(line):
                assert "JITGUARD" not in line, (path, line)
    names.discard("JITGUARD_VERSION")  # a constant of store.keys, not a variable
    assert names <= {v.name for v in env.VARIABLES}, names - {v.name for v in env.VARIABLES}


def test_docs_table_lists_every_variable() -> None:
    """docs/environment.md has one table row per variable, in the table's order."""
    page = (ROOT / "docs" / "environment.md").read_text()
    rows = re.findall(r"^\| `(JITGUARD_[A-Z_]+)` \|", page, re.M)
    assert rows == [v.name for v in env.VARIABLES]
    nav = (ROOT / "mkdocs.yml").read_text()
    assert "environment.md" in nav


def test_store_maybe_makes_no_folder(tmp_path: Path) -> None:
    """JITGUARD_STORE=maybe: the function runs, one warning, no ./maybe folder."""
    code = ("import jitguard as jg\nf = jg.specialize(lambda n: n + 1)\nprint(f(1), f(2))\n")
    out = _run(code, tmp_path, JITGUARD_STORE="maybe")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "3"]
    assert out.stderr.count("EnvironmentVariableWarning") == 1, out.stderr
    assert list(tmp_path.iterdir()) == []


def test_store_under_a_missing_parent_makes_nothing(tmp_path: Path) -> None:
    """JITGUARD_STORE=<dir>/a/b, where a does not exist: a warning, no folder made."""
    code = "import jitguard as jg\nf = jg.specialize(lambda n: n + 1)\nprint(f(1))\n"
    out = _run(code, tmp_path, JITGUARD_STORE=str(tmp_path / "a" / "b"))
    assert out.returncode == 0 and out.stdout.strip() == "2", out.stderr
    assert "does not exist" in out.stderr
    assert list(tmp_path.iterdir()) == []


def test_bad_logs_setting_is_an_environment_variable_warning(tmp_path: Path) -> None:
    """JITGUARD_LOGS=bogus: import works, one EnvironmentVariableWarning naming the
    variable and what it takes, and no logs."""
    out = _run("import jitguard\nprint('ok')\n", tmp_path, JITGUARD_LOGS="bogus")
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
    assert out.stderr.count("EnvironmentVariableWarning") == 1, out.stderr
    assert "JITGUARD_LOGS='bogus' is not a log setting" in out.stderr


@pytest.mark.parametrize("variables", [{"JITGUARD_LOGS": "bogus"},
                                       {"JITGUARD_PURE_PYTHON": "maybe"},
                                       {"JITGUARD_STORE": "1", "JITGUARD_CACHE_MAX_BYTES": "abc"}])
def test_a_bad_variable_is_reported_at_the_users_line(tmp_path: Path,
                                                      variables: dict[str, str]) -> None:
    """The warning points at the user's script (the import, or the call that read the
    variable), not into jitguard or the import machinery."""
    script = tmp_path / "user_script.py"
    script.write_text("import jitguard as jg\nf = jg.specialize(lambda n: n + 1)\nf(1)\n")
    full = {k: v for k, v in os.environ.items() if not k.startswith("JITGUARD_")}
    full.update(PYTHONPATH=str(ROOT / "src"), JITGUARD_CACHE_DIR=str(tmp_path / "c"),
                **variables)
    out = subprocess.run([sys.executable, "-W", "always", str(script)], capture_output=True,
                         text=True, env=full, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    (line,) = [ln for ln in out.stderr.splitlines() if "EnvironmentVariableWarning" in ln]
    assert line.startswith(f"{script}:"), out.stderr


def test_explicit_store_under_a_missing_parent_warns(tmp_path: Path) -> None:
    """specialize(store=<dir>/a/b) with no <dir>/a: a StoreWarning, no folder made."""
    with pytest.warns(jitguard.StoreWarning, match="does not exist"):
        f = jitguard.specialize(lambda n: n + 1, store=str(tmp_path / "a" / "b"))
        assert f(1) == 2
    assert list(tmp_path.iterdir()) == []


def test_bad_max_bytes_does_not_kill_the_decorator(tmp_path: Path) -> None:
    """JITGUARD_CACHE_MAX_BYTES=abc with a store on: a warning, and the function works."""
    code = "import jitguard as jg\nf = jg.specialize(lambda n: n + 1)\nprint(f(1))\n"
    out = _run(code, tmp_path, JITGUARD_STORE="1", JITGUARD_CACHE_MAX_BYTES="abc",
               JITGUARD_CACHE_DIR=str(tmp_path / "c"))
    assert out.returncode == 0 and out.stdout.strip() == "2", out.stderr
    assert "JITGUARD_CACHE_MAX_BYTES='abc' is not a size" in out.stderr


@pytest.mark.parametrize(("text", "c_on"), [("true", False), ("yes", False), ("1", False),
                                            ("0", True), ("no", True)])
def test_pure_python_takes_every_switch_word(tmp_path: Path, text: str, c_on: bool) -> None:
    """JITGUARD_PURE_PYTHON=true (or yes, 1) turns the C path off; 0/no leave it on."""
    import importlib.util

    if importlib.util.find_spec("jitguard._src._speedups") is None:
        pytest.skip("the C extension is not built here")
    code = "from jitguard._src import native\nprint(native.module is not None)\n"
    out = _run(code, tmp_path, JITGUARD_PURE_PYTHON=text)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(c_on)
