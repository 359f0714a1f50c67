"""Store keys: function identity (code, defaults, closure), environment, entry ids."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from jitguard._src.store.keys import (
    STORE_FORMAT,
    default_cache_dir,
    entry_id,
    environment,
    function_identity,
    function_key,
)

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _fn(source: str, name: str = "f", **namespace: Any) -> Any:
    ns: dict[str, Any] = {"__name__": "mod_under_test", **namespace}
    exec(compile(textwrap.dedent(source), "<test>", "exec"), ns)
    return ns[name]


def test_identity_is_stable_for_the_same_code() -> None:
    """Two functions compiled from the same text have the same identity."""
    a = _fn("def f(x):\n    return x + 1\n")
    b = _fn("def f(x):\n    return x + 1\n")
    assert function_identity(a) == function_identity(b)
    assert function_identity(a)["name"] == "mod_under_test:f"  # type: ignore[index]


def test_identity_ignores_line_numbers_and_file() -> None:
    """Moving a function down its file (or to another file name) keeps its identity."""
    a = _fn("def f(x):\n    return x + 1\n")
    ns: dict[str, Any] = {"__name__": "mod_under_test"}
    exec(compile("\n\n\n\ndef f(x):\n    return x + 1\n", "<other>", "exec"), ns)
    assert function_identity(a) == function_identity(ns["f"])


@pytest.mark.parametrize(
    "other",
    [
        "def f(x):\n    return x + 2\n",  # a constant
        "def f(x):\n    return x - 1\n",  # the bytecode
        "def f(y):\n    return y + 1\n",  # a parameter name
        "def f(x, k=3):\n    return x + 1\n",  # a default
        "def f(x, *, k=3):\n    return x + 1\n",  # a keyword default
        "def f(x):\n    def g():\n        return 5\n    return x + 1\n",  # a nested function
        "def f(x):\n    return len(x) + 1\n",  # a global name
    ],
)
def test_identity_changes_with_the_code(other: str) -> None:
    """Any change of code, constants, names, nested code or defaults changes the identity."""
    base = _fn("def f(x, k=2):\n    return x + 1\n" if "k=3)" in other else
               "def f(x, *, k=2):\n    return x + 1\n" if "*, k" in other else
               "def f(x):\n    return x + 1\n")
    assert function_identity(base) != function_identity(_fn(other))


def test_nested_code_constants_are_hashed() -> None:
    """A constant inside a nested function changes the outer function's identity."""
    a = _fn("def f(x):\n    def g():\n        return 5\n    return g() + x\n")
    b = _fn("def f(x):\n    def g():\n        return 6\n    return g() + x\n")
    assert function_identity(a) != function_identity(b)


def test_closure_contents_are_hashed_when_portable() -> None:
    """A closure cell holding 3 or 4 gives two identities; one holding an object of this
    process is hashed by its type only (another such object: the same identity)."""
    src = "def make(v):\n    def f(x):\n        return x + v\n    return f\n"
    make = _fn(src, "make")
    assert function_identity(make(3)) != function_identity(make(4))
    assert function_identity(make(3)) == function_identity(make(3))
    assert function_identity(make((1, "a"))) != function_identity(make((1, "b")))
    assert function_identity(make(object())) == function_identity(make(object()))
    assert function_identity(make(object())) != function_identity(make(3))


def test_closure_with_functions_and_modules() -> None:
    """A closure over a module or a module-level function is hashed by its qualified name."""
    make = _fn("def make(v):\n    def f(x):\n        return v(x)\n    return f\n", "make")
    assert function_identity(make(os.path.join)) != function_identity(make(os.path.split))
    assert function_identity(make(os)) != function_identity(make(json))


def test_identity_of_a_callable_without_code_is_none() -> None:
    """A builtin or a callable object has no identity: it is never stored."""
    assert function_identity(len) is None

    class C:
        def __call__(self, x: int) -> int:
            return x

    assert function_identity(C()) is None


def test_environment_has_the_base_parts_and_the_extras() -> None:
    """jitguard, python and the store format are always there; extras are text; an extra
    cannot replace a base part."""
    env = environment({"torch": "2.13.0", "device": 0, "python": "fake"})
    assert env["torch"] == "2.13.0" and env["device"] == "0"
    assert env["python"].startswith(sys.implementation.name)
    assert env["python"] != "fake"
    assert env["store_format"] == str(STORE_FORMAT)
    assert "jitguard" in env
    assert list(env) == sorted(env)


def test_function_key_depends_on_every_part() -> None:
    """The key changes with the code, the compiler and the environment."""
    ident = {"name": "m:f", "code": "abc"}
    env = environment()

    def c1(r: Any) -> Any:
        return r.fn

    def c2(r: Any) -> Any:
        return r.fn

    k, doc = function_key(ident, c1, env)
    assert len(k) == 32 and doc["compiler"].endswith("c1")
    assert function_key(ident, c1, env)[0] == k
    assert function_key({"name": "m:f", "code": "abd"}, c1, env)[0] != k
    assert function_key(ident, c2, env)[0] != k
    assert function_key(ident, c1, environment({"torch": "x"}))[0] != k


def test_entry_id_ignores_the_documents_name() -> None:
    """The entry id hashes the guards, not the (process-local) name of the check."""
    doc = {"schema_version": 1, "name": "f 0/0", "guards": [{"kind": "X"}]}
    assert entry_id(doc) == entry_id({**doc, "name": "f 7/3"})
    assert entry_id(doc) != entry_id({**doc, "guards": []})


def test_default_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """JITGUARD_CACHE_DIR wins; else XDG_CACHE_HOME/jitguard on Linux."""
    monkeypatch.setenv("JITGUARD_CACHE_DIR", str(tmp_path / "x"))
    assert default_cache_dir() == tmp_path / "x"
    monkeypatch.delenv("JITGUARD_CACHE_DIR")
    if sys.platform.startswith("linux"):
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert default_cache_dir() == tmp_path / "xdg" / "jitguard"


def test_identity_is_the_same_in_another_process(tmp_path: Path) -> None:
    """A module's function has the same identity in a fresh interpreter (hash seeds differ)."""
    (tmp_path / "idmod.py").write_text(
        "CONST = 3\n"
        "def make(v):\n"
        "    def f(x, k=(1, 2.5, 'a', None), *, s=frozenset({1, 2, 3})):\n"
        "        return x + v + CONST\n"
        "    return f\n"
        "f = make({'a': 1, 2: (3, 4)})\n"
    )
    code = (
        "import json, idmod\n"
        "from jitguard._src.store.keys import function_identity\n"
        "print(json.dumps(function_identity(idmod.f)))\n"
    )
    outs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{SRC}", "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True, timeout=120)
        outs.add(out.stdout.strip())
    assert len(outs) == 1
    assert json.loads(outs.pop())["name"] == "idmod:make.<locals>.f"


def test_version_matches_pyproject() -> None:
    """The version in every key is the one pyproject.toml declares."""
    import re

    from jitguard._src.store.keys import JITGUARD_VERSION

    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    match = re.search(r'^version = "([^"]+)"', text, re.M)
    assert match is not None and match.group(1) == JITGUARD_VERSION
    assert environment()["jitguard"] == JITGUARD_VERSION


def test_closure_over_a_local_function_hashes_its_code() -> None:
    """A closure cell holding a local helper is hashed by the helper's code: editing the
    helper changes the identity of the function that calls it."""
    src = (
        "def make():\n"
        "    def helper(x):\n"
        "        return x + {k}\n"
        "    def f(x):\n"
        "        return helper(x)\n"
        "    return f\n"
    )
    one = _fn(src.format(k=1), "make")()
    again = _fn(src.format(k=1), "make")()
    two = _fn(src.format(k=2), "make")()
    assert function_identity(one) == function_identity(again)
    assert function_identity(one) != function_identity(two)


def test_recursive_local_function_terminates() -> None:
    """A local function whose closure holds itself is hashed (depth-limited)."""
    make = _fn(
        "def make():\n"
        "    def f(n):\n"
        "        return 1 if n == 0 else f(n - 1)\n"
        "    return f\n", "make")
    assert function_identity(make()) == function_identity(make())
