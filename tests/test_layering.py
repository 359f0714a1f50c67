"""[Note: Layering] in jitguard/_src/__init__.py, enforced by reading every module's imports.

To place a new module, add it to ``LAYERS``: one ordered list, lowest layer first. A module
may import modules of its own layer or of a lower one, never a higher one; the public package
``jitguard`` is above every layer. A package (``compiler/``, ``torch/``) is one entry: all its
modules share the layer. Entries listed in ``OPTIONAL`` may be absent.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

import jitguard

PKG_DIR = Path(jitguard.__file__).resolve().parent
SRC_DIR = PKG_DIR / "_src"

LAYERS: list[tuple[str, ...]] = [
    ("errors", "_util", "stacks", "weak", "config", "integrations", "env", "logs",
     "structured", "_speedups", "native"),
    ("ids",),
    ("guard_source",),
    ("guards", "guard_exprs"),
    ("root_sources",),
    ("sources", "more_sources"),
    ("global_state",),
    ("checkpoints",),
    ("contexts",),
    ("compiler",),
    ("store",),
    ("cache",),
    ("torch",),
]
OPTIONAL = {"compiler", "store", "cache", "_speedups"}  # _speedups: the C extension, optional
TORCH_PACKAGE = "torch"  # the one entry allowed to import torch
PUBLIC_LEVEL = len(LAYERS)  # ``jitguard`` itself, and anything outside ``_src``

LEVEL = {name: i for i, layer in enumerate(LAYERS) for name in layer}


@dataclass(frozen=True)
class Import:
    module: str  # the absolute module imported
    lineno: int


def module_name(path: Path) -> str:
    """The dotted name of a file under the jitguard package."""
    rel = path.relative_to(PKG_DIR.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(dotted: str) -> bool:
    """Whether ``dotted`` (under jitguard) is a module or package on disk."""
    parts = dotted.split(".")
    if parts[0] != "jitguard":
        return False
    base = PKG_DIR.parent.joinpath(*parts)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def collect_imports(source: str, modname: str, *, is_package: bool) -> list[Import]:
    """Every import in ``source`` (module level, in functions, under TYPE_CHECKING, relative,
    and ``importlib.import_module``/``__import__`` of a constant), resolved to absolute names."""
    tree = ast.parse(source)
    package = modname if is_package else modname.rpartition(".")[0]
    out: list[Import] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend(Import(alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                if node.level - 1 > len(parts) - 1:
                    raise AssertionError(f"{modname}:{node.lineno}: relative import beyond the top")
                base_parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.append(Import(sub if _is_module(sub) else base, node.lineno))
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and (
                (isinstance(node.func, ast.Name) and node.func.id == "__import__")
                or (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
            )
            and not node.args[0].value.startswith(".")
        ):
            out.append(Import(node.args[0].value, node.lineno))
    return sorted(out, key=lambda imp: imp.lineno)


def level_of(modname: str) -> int | None:
    """The layer of a jitguard module; None for ``jitguard._src`` itself (it imports nothing)
    and for non-jitguard modules. Raises for a ``_src`` module in no layer."""
    parts = modname.split(".")
    if parts[0] != "jitguard":
        return None
    if parts[:2] != ["jitguard", "_src"]:
        return PUBLIC_LEVEL
    if len(parts) == 2:
        return None
    head = parts[2]
    if head not in LEVEL:
        raise LookupError(
            f"{modname} is in no layer: add {head!r} to LAYERS in tests/test_layering.py "
            f"and to [Note: Layering]"
        )
    return LEVEL[head]


def violations(source: str, modname: str, *, is_package: bool) -> list[str]:
    """Layering violations of one module, as readable lines."""
    own = level_of(modname)
    own = 0 if own is None else own
    found = []
    for imp in collect_imports(source, modname, is_package=is_package):
        target = level_of(imp.module)
        if target is not None and target > own:
            found.append(
                f"{modname}:{imp.lineno} imports {imp.module} "
                f"(layer {target} is above {modname}'s layer {own})"
            )
    return found


def imports_torch(source: str, modname: str, *, is_package: bool) -> list[int]:
    """Lines of ``source`` that import torch (or a torch submodule)."""
    return [
        imp.lineno
        for imp in collect_imports(source, modname, is_package=is_package)
        if imp.module == "torch" or imp.module.startswith("torch.")
    ]


def all_modules() -> list[Path]:
    return sorted(PKG_DIR.rglob("*.py"))


def src_modules() -> list[Path]:
    return sorted(SRC_DIR.rglob("*.py"))


# ---- the checks ------------------------------------------------------------------------


@pytest.mark.parametrize("path", src_modules(), ids=lambda p: str(p.relative_to(SRC_DIR)))
def test_module_imports_only_lower_layers(path: Path) -> None:
    """No module under _src imports a module of a higher layer (or the public package)."""
    name = module_name(path)
    assert violations(path.read_text(), name, is_package=path.name == "__init__.py") == []


def test_every_src_module_has_a_layer() -> None:
    """Each module under _src belongs to a layer of LAYERS."""
    for path in src_modules():
        level_of(module_name(path))


def test_required_layers_exist() -> None:
    """Every non-optional entry of LAYERS is a module or package that exists."""
    for name in LEVEL:
        exists = (SRC_DIR / f"{name}.py").is_file() or (SRC_DIR / name / "__init__.py").is_file()
        assert exists or name in OPTIONAL, f"LAYERS names {name!r}, which does not exist"


@pytest.mark.parametrize("path", all_modules(), ids=lambda p: str(p.relative_to(PKG_DIR)))
def test_only_the_torch_package_imports_torch(path: Path) -> None:
    """torch is imported only under _src/torch/."""
    if path.is_relative_to(SRC_DIR / TORCH_PACKAGE):
        return
    name = module_name(path)
    lines = imports_torch(path.read_text(), name, is_package=path.name == "__init__.py")
    assert lines == [], f"{name} imports torch at line(s) {lines}"


# ---- the checker itself ----------------------------------------------------------------


SAMPLE = """
import os
import jitguard._src.errors
from . import ids
from .sources import LocalSource

def late():
    from .contexts import GuardsSet
    import importlib
    importlib.import_module("jitguard._src.torch")
    __import__("torch.nn")

if TYPE_CHECKING:
    from jitguard import Guard as PublicGuard
"""

SUBPACKAGE_SAMPLE = """
from ..contexts import tracing
from ..cache import Cache
from .values import Ident
from ... import jitguard_root_thing
"""


def test_checker_resolves_every_import_form() -> None:
    """The import collector sees absolute, relative, function-level and dynamic imports."""
    imports = collect_imports(SAMPLE, "jitguard._src.guards", is_package=False)
    found = [(i.module, i.lineno) for i in imports]
    assert found == [
        ("os", 2),
        ("jitguard._src.errors", 3),
        ("jitguard._src.ids", 4),
        ("jitguard._src.sources", 5),
        ("jitguard._src.contexts", 8),
        ("importlib", 9),
        ("jitguard._src.torch", 10),
        ("torch.nn", 11),
        ("jitguard", 14),
    ]
    sub = collect_imports(SUBPACKAGE_SAMPLE, "jitguard._src.compiler.kinds", is_package=False)
    assert [i.module for i in sub] == [
        "jitguard._src.contexts",
        "jitguard._src.cache",
        "jitguard._src.compiler.values",
        "jitguard",
    ]


def test_checker_flags_upward_imports() -> None:
    """An upward import (module or function level, relative or dynamic) is a violation."""
    found = violations(SAMPLE, "jitguard._src.guards", is_package=False)
    assert [line.split(" imports ")[1].split(" ")[0] for line in found] == [
        "jitguard._src.sources",
        "jitguard._src.contexts",
        "jitguard._src.torch",
        "jitguard",
    ]
    assert imports_torch(SAMPLE, "jitguard._src.guards", is_package=False) == [11]
    sub = violations(SUBPACKAGE_SAMPLE, "jitguard._src.compiler.kinds", is_package=False)
    assert len(sub) == 2
    assert "imports jitguard._src.cache" in sub[0] and "imports jitguard " in sub[1]


def test_checker_rejects_relative_import_beyond_top() -> None:
    """A relative import climbing out of the package is reported."""
    with pytest.raises(AssertionError, match="beyond the top"):
        collect_imports("from .... import x\n", "jitguard._src.guards", is_package=False)


def test_checker_allows_same_layer_and_package_relative_imports() -> None:
    """Modules of one layer, and a package's own modules, may import each other."""
    torch_init = "from . import fake, state\nfrom ..contexts import tracing\n"
    assert violations(torch_init, "jitguard._src.torch", is_package=True) == []
    same_layer = "from .errors import SourceError\n"
    assert violations(same_layer, "jitguard._src.weak", is_package=False) == []
    assert violations("from . import kinds\n", "jitguard._src.compiler", is_package=True) == []


def test_checker_rejects_unknown_module() -> None:
    """A module outside every layer is reported with how to fix it."""
    with pytest.raises(LookupError, match="add 'mystery' to LAYERS"):
        level_of("jitguard._src.mystery")


# ---- the torch package: two layers, one adapter -------------------------------------------
# [Note: Layering] of the torch package (jitguard/_src/torch/__init__.py): the compiler on
# TorchDynamo sits above the integration; the integration never imports it. The adapters
# (every torch internal, reached through them only) import nothing of jitguard but each
# other, so both layers may use them.
TORCH_FRONTEND = {"api", "compile", "compiled", "convert", "convert_context", "convert_kinds",
                  "convert_shape", "convert_sources", "convert_tensors", "dynamo_cache"}
TORCH_ADAPTERS = {"adapter", "adapter_runtime", "adapter_sources", "adapter_stored"}
# Integration modules that still import a private torch module themselves (C++ checkers and
# fake-tensor hooks written before the adapter existed); no other module may.
TORCH_PRIVATE_ALLOWED = {"aliasing", "batched", "fake", "logging_bridge", "state"}
PRIVATE_TORCH = ("torch._",)


def _torch_modules() -> list[Path]:
    return sorted((SRC_DIR / TORCH_PACKAGE).glob("*.py"))


@pytest.mark.parametrize("path", _torch_modules(), ids=lambda p: p.stem)
def test_torch_integration_never_imports_the_frontend(path: Path) -> None:
    """Integration modules (kinds, states, sources) import no frontend module."""
    if path.stem in TORCH_FRONTEND:
        return
    name = module_name(path)
    imports = collect_imports(path.read_text(), name, is_package=path.name == "__init__.py")
    bad = [
        f"{name}:{imp.lineno} imports {imp.module}"
        for imp in imports
        if imp.module.startswith(f"jitguard._src.{TORCH_PACKAGE}.")
        and imp.module.split(".")[3] in TORCH_FRONTEND
    ]
    assert bad == []


@pytest.mark.parametrize("path", _torch_modules(), ids=lambda p: p.stem)
def test_torch_internals_only_in_the_adapter(path: Path) -> None:
    """Only the adapter modules import torch._dynamo, torch._guards, torch._C, ... (a few
    integration modules listed in TORCH_PRIVATE_ALLOWED still import C++ checkers)."""
    if path.stem in TORCH_ADAPTERS:
        return
    name = module_name(path)
    imports = collect_imports(path.read_text(), name, is_package=path.name == "__init__.py")
    private = [i for i in imports if i.module.startswith(PRIVATE_TORCH)]
    if path.stem in TORCH_PRIVATE_ALLOWED:
        private = [i for i in private if i.module.startswith(("torch._dynamo", "torch._guards"))
                   and not i.module.startswith("torch._C")]
    assert [f"{name}:{i.lineno} imports {i.module}" for i in private] == []


@pytest.mark.parametrize("stem", sorted(TORCH_ADAPTERS))
def test_torch_adapters_import_nothing_of_jitguard(stem: str) -> None:
    """The adapters are the bottom of the torch package: torch, the standard library and
    the other adapters."""
    path = SRC_DIR / TORCH_PACKAGE / f"{stem}.py"
    imports = collect_imports(path.read_text(), module_name(path), is_package=False)
    adapters = {f"jitguard._src.{TORCH_PACKAGE}.{a}" for a in TORCH_ADAPTERS}
    assert [i.module for i in imports
            if i.module.startswith("jitguard") and i.module not in adapters] == []


def test_torch_frontend_modules_exist() -> None:
    """The frontend and adapter modules named here exist (the lists cannot go stale)."""
    stems = {p.stem for p in _torch_modules()}
    assert TORCH_FRONTEND <= stems and TORCH_ADAPTERS <= stems
