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
    """Every public attribute of jitguard is in __all__ or is a moved name of _MOVED
    (submodules such as jitguard.torch, which appear as attributes once imported, are not
    names of the package itself)."""
    public = {
        n for n, v in vars(jitguard).items()
        if not n.startswith("_") and not isinstance(v, types.ModuleType)
    }
    moved = {n for names in jitguard._MOVED.values() for n in names}
    assert public == set(jitguard.__all__) | moved
    assert not moved & set(jitguard.__all__)


TOPICS = ["jitguard.errors", "jitguard.kinds", "jitguard.schema", "jitguard.sources"]


@pytest.mark.parametrize("modname", TOPICS)
def test_topic_submodule_reexports_sorted(modname: str) -> None:
    """Each public topic submodule has a sorted __all__ of names it re-exports from
    jitguard._src, each also reachable from jitguard as the same object."""
    mod = importlib.import_module(modname)
    assert mod.__all__ == sorted(set(mod.__all__)) and mod.__all__
    for name in mod.__all__:
        obj = getattr(mod, name)
        assert getattr(jitguard, name) is obj
        namespace: dict[str, object] = {}
        exec(f"from jitguard import {name}", namespace)
        assert namespace[name] is obj
    defined = {n for n, v in vars(mod).items() if not n.startswith("_")
               and not isinstance(v, types.ModuleType)}
    assert defined == set(mod.__all__)


def test_moved_names_are_listed_once() -> None:
    """_MOVED lists, per topic submodule, exactly its names that jitguard.__all__ leaves out;
    every topic name is in one submodule only, and the top level keeps fewer than half."""
    seen: dict[str, str] = {}
    for modname in TOPICS:
        mod = importlib.import_module(modname)
        assert jitguard._MOVED[modname] == tuple(n for n in mod.__all__ if n not in jitguard.__all__)
        for name in mod.__all__:
            assert name not in seen, (name, seen.get(name), modname)
            seen[name] = modname
    assert set(jitguard._MOVED) == set(TOPICS)
    assert len(jitguard.__all__) < 70 < len(jitguard.__all__) + len(seen)


def test_sources_errors_kinds_and_schema_are_filed() -> None:
    """Every Source class, exception, guard kind entry point and schema function is in its
    topic submodule (the top level keeps the specification's Source and ChainedSource and the
    root JitGuardError besides)."""
    for name in jitguard.__all__ + [n for v in jitguard._MOVED.values() for n in v]:
        obj = getattr(jitguard, name)
        if isinstance(obj, type) and issubclass(obj, jitguard.Source):
            assert name in jitguard.sources.__all__, name
        if isinstance(obj, type) and issubclass(obj, BaseException):
            assert name in jitguard.errors.__all__, name
    assert jitguard.schema.export_guards is jitguard.export_guards
    assert jitguard.kinds.register_guard_kind is jitguard.register_guard_kind
    assert {"Source", "ChainedSource", "JitGuardError"} <= set(jitguard.__all__)


@pytest.mark.parametrize("name", sorted(__import__("jitguard").errors.__all__))
def test_errors_print_their_public_name(name: str) -> None:
    """An error's repr, type and traceback say jitguard.<Name>, not jitguard._src.errors,
    and it pickles by that name (issue 22)."""
    import pickle
    import traceback

    cls = getattr(jitguard.errors, name)
    assert cls.__module__ == "jitguard" and getattr(jitguard, name) is cls
    assert repr(cls) == f"<class 'jitguard.{name}'>"
    try:
        raise cls("boom")
    except BaseException as e:
        text = "".join(traceback.format_exception(e))
        assert f"\njitguard.{name}" in text and "_src" not in text.splitlines()[-1]
        again = pickle.loads(pickle.dumps(e))
        assert type(again) is cls and str(again) == str(e)


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
        (jitguard.SourceTypeError, TypeError),
        (jitguard.SourceTypeError, ValueError),
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
    names = jitguard.__all__ + [n for v in jitguard._MOVED.values() for n in v]
    return [
        v for v in (getattr(jitguard, n) for n in names)
        if isinstance(v, type) and issubclass(v, BaseException)
    ]


def test_every_exported_exception_lives_in_errors() -> None:
    """Every exception (and warning) jitguard exports is defined in jitguard._src.errors, and
    every error there is exported: one home for the hierarchy."""
    from jitguard._src import errors

    exported = _exported_exceptions()
    assert exported, "jitguard exports no exception classes"
    assert [e.__name__ for e in exported if getattr(errors, e.__name__, None) is not e] == []
    defined = {
        n for n, v in vars(errors).items()
        if isinstance(v, type) and issubclass(v, BaseException) and not n.startswith("_")
        and v.__module__ == "jitguard"
    }
    assert defined == set(jitguard.errors.__all__)
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
