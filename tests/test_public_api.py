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
    ],
)
def test_errors_specialize_a_builtin(error: type[Exception], builtin: type[Exception]) -> None:
    """Every jitguard error is a JitGuardError and the builtin the specification raised."""
    assert issubclass(error, jitguard.JitGuardError)
    assert issubclass(error, builtin)
    with pytest.raises(builtin):
        raise error("x")
