"""The public surface: ``jitguard.__all__``, the modules' ``__all__`` and the error hierarchy."""

from __future__ import annotations

import importlib
import types
from pathlib import Path

import pytest

import jitguard

SRC_DIR = Path(jitguard.__file__).resolve().parent / "_src"


def test_all_is_sorted() -> None:
    """jitguard.__all__ is in plain sorted() order, without duplicates."""
    assert jitguard.__all__ == sorted(jitguard.__all__)
    assert len(set(jitguard.__all__)) == len(jitguard.__all__)


@pytest.mark.parametrize("name", jitguard.__all__)
def test_every_exported_name_is_importable(name: str) -> None:
    """Each name in __all__ can be imported from jitguard."""
    namespace: dict[str, object] = {}
    exec(f"from jitguard import {name}", namespace)
    assert namespace[name] is getattr(jitguard, name)


def test_all_lists_every_public_name() -> None:
    """Every public attribute of jitguard is in __all__ (submodules such as jitguard.torch,
    which appear as attributes once imported, are not names of the package itself)."""
    public = {
        n for n, v in vars(jitguard).items()
        if not n.startswith("_") and not isinstance(v, types.ModuleType)
    }
    assert public == set(jitguard.__all__)


def _core_modules() -> list[str]:
    names = []
    for path in sorted(SRC_DIR.glob("*.py")):
        if path.stem != "__init__":
            names.append(f"jitguard._src.{path.stem}")
    return names


@pytest.mark.parametrize("modname", _core_modules())
def test_module_all_names_exist(modname: str) -> None:
    """Each core module's __all__ names only things the module defines."""
    mod = importlib.import_module(modname)
    exported = getattr(mod, "__all__", None)
    assert exported is not None, f"{modname} has no __all__"
    missing = [n for n in exported if not hasattr(mod, n)]
    assert missing == []


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (jitguard.InvalidCompileIdError, ValueError),
        (jitguard.SourceError, ValueError),
        (jitguard.UnreadableSourceError, LookupError),
        (jitguard.GuardKindError, TypeError),
        (jitguard.GuardCompileError, ValueError),
        (jitguard.NoCompileContextError, RuntimeError),
        (jitguard.NoTracingContextError, RuntimeError),
        (jitguard.RecompileError, RuntimeError),
        (jitguard.RecompileLimitError, RuntimeError),
        (jitguard.RestartCompile, Exception),
    ],
)
def test_errors_specialize_a_builtin(error: type[Exception], builtin: type[Exception]) -> None:
    """Every jitguard error is a JitGuardError and the builtin the specification raised."""
    assert issubclass(error, jitguard.JitGuardError)
    assert issubclass(error, builtin)
    with pytest.raises(builtin):
        raise error("x")


def _exported_exceptions() -> list[type[BaseException]]:
    return [
        v for v in (getattr(jitguard, n) for n in jitguard.__all__)
        if isinstance(v, type) and issubclass(v, BaseException)
    ]


def test_every_exported_exception_lives_in_errors() -> None:
    """Every exception (and warning) jitguard exports is defined in jitguard._src.errors, and
    every error there is exported: one home for the hierarchy."""
    from jitguard._src import errors

    exported = _exported_exceptions()
    assert exported, "jitguard exports no exception classes"
    assert [e.__name__ for e in exported if e.__module__ != errors.__name__] == []
    defined = {
        n for n, v in vars(errors).items()
        if isinstance(v, type) and issubclass(v, BaseException) and v.__module__ == errors.__name__
    }
    assert defined - set(jitguard.__all__) == set()
    assert sorted(defined) == sorted(errors.__all__)


def test_every_exported_error_is_a_jitguard_error() -> None:
    """Every exported exception except warnings derives from JitGuardError, so one ``except
    JitGuardError`` catches whatever jitguard raises on purpose."""
    errors_ = [e for e in _exported_exceptions() if not issubclass(e, Warning)]
    assert [e.__name__ for e in errors_ if not issubclass(e, jitguard.JitGuardError)] == []
    assert issubclass(jitguard.RecompileLimitWarning, UserWarning)


def test_old_import_paths_still_work() -> None:
    """The cache modules that used to define the errors still name the same classes."""
    from jitguard._src.cache import request, stance

    assert stance.RecompileError is jitguard.RecompileError
    assert stance.RecompileLimitError is jitguard.RecompileLimitError
    assert stance.RecompileLimitWarning is jitguard.RecompileLimitWarning
    assert request.RestartCompile is jitguard.RestartCompile


def test_recompile_error_keeps_its_record() -> None:
    """RecompileError carries the record of the refused recompile; its message names the
    failing guard and why it was refused."""
    f = jitguard.specialize(lambda n: n, error_on_recompile=True)
    f(1)
    with pytest.raises(jitguard.RecompileError) as e:
        f(2)
    assert str(e.value).splitlines()[-1] == (
        "    but recompiling is forbidden here (no_recompiles / error_on_recompile)"
    )
    assert "L['n'] == 1" in str(e.value)
    assert e.value.record.outcome == "forbidden"
    assert any("L['n'] == 1" in r for r in e.value.record.reasons())
