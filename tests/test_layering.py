"""[Note: Layering] in jitguard/_src/__init__.py, enforced by reading every module's imports.

To place a new module, add it to ``LAYERS``: one ordered list, lowest layer first. A module
may import modules of its own layer or of a lower one, never a higher one; the public package
``jitguard`` is above every layer. A package (``compiler/``, ``torch/``) is one entry: all its
modules share the layer. Entries listed in ``OPTIONAL`` may be absent.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

import jitguard

PKG_DIR = Path(jitguard.__file__).resolve().parent
SRC_DIR = PKG_DIR / "_src"

LAYERS: list[tuple[str, ...]] = [
    ("errors", "_util", "stacks", "weak", "config", "integrations", "env", "logs",
     "structured", "_speedups", "_torchext", "native"),
    ("ids",),
    ("guard_source",),
    ("guards", "guard_exprs"),
    ("root_sources",),
    ("sources", "more_sources"),
    ("global_state",),
    ("checkpoints",),
    ("contexts",),
    ("compiler",),
    ("dispatch",),
    ("store",),
    ("cache",),
    ("torch",),
]
OPTIONAL = {"compiler", "dispatch", "store", "cache"}
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
                  "convert_shape", "convert_sources", "convert_tensors", "dynamo_cache",
                  "dynamo_scope"}
TORCH_ADAPTERS = {"adapter", "adapter_autocast", "adapter_fast", "adapter_graphs",
                  "adapter_runtime", "adapter_sources", "adapter_stored"}
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


# ---- each module's own "May import:" line --------------------------------------------------
# Every module under _src says in its docstring what it may import, in one sentence that
# starts "May import:" (read up to its first full stop). The sentence is a list, separated by
# commas, "and" and semicolons, of module names under jitguard._src (the prefix
# ``jitguard._src.`` optional; a bare name that is no module there is a sibling in the
# module's own package) and of these forms:
#   ``pkg.*``                      every module of a package;
#   ``pkg.* (a, b)``               the modules pkg.a, pkg.b (with what is under them);
#   ``every pkg module``           as ``pkg.*``;
#   ``everything/anything in jitguard._src`` or ``jitguard._src.*``: any module;
#   ``everything below X in [Note: Layering]``: any module of a lower layer (LAYERS);
#   ``nothing from jitguard``      no module;
#   ``except A, B and C``          the clause, less those (``torch`` here is ours);
#   ``everything ...; every pkg module except A``: the second clause speaks for pkg;
#   ``A, B (and what they may import)``: those, and what their own lines allow.
# Other words (torch, sympy, the standard library) and other parentheses are prose.

_NAME = re.compile(r"[A-Za-z_][\w]*(?:\.(?:[A-Za-z_]\w*|\*))*")
_SUBLIST = re.compile(r"^\s*[A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*\s*$")


def may_import_sentence(doc: str) -> Optional[str]:
    """The "May import:" sentence of a docstring (without its lead), or None."""
    at = doc.find("May import:")
    if at < 0:
        return None
    text = doc[at + len("May import:"):].split("\n\n")[0].replace("``", "")
    end = re.search(r"\.(\s|$)", text)
    return " ".join((text[: end.start()] if end else text).split())


def _module_exists(rel: str) -> bool:
    base = SRC_DIR.joinpath(*rel.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _is_package(rel: str) -> bool:
    return (SRC_DIR.joinpath(*rel.split(".")) / "__init__.py").is_file()


@dataclass(frozen=True)
class Allowed:
    """What one module may import, as names relative to jitguard._src: each of ``prefixes``
    with everything under it; ``everything`` less ``excluded`` (with what is under those)."""

    prefixes: frozenset[str]
    everything: bool = False
    excluded: frozenset[str] = frozenset()

    def allows(self, rel: str) -> bool:
        def under(p: str) -> bool:
            return rel == p or rel.startswith(p + ".")
        if self.everything and not any(under(p) for p in self.excluded):
            return True
        return any(under(p) for p in self.prefixes)


def _names(text: str, own_package: str, *, ours_torch: bool) -> list[str]:
    """The jitguard._src modules a list names (``pkg.*`` kept as ``pkg``)."""
    out = []
    for token in _NAME.findall(text):
        rel = token.removeprefix("jitguard._src.")
        if rel.endswith(".*"):
            rel = rel[:-2]
        if rel == "torch" and not ours_torch and not token.startswith("jitguard."):
            continue  # the library
        if _module_exists(rel):
            out.append(rel)
        elif own_package and _module_exists(f"{own_package}.{rel}"):
            out.append(f"{own_package}.{rel}")
    return out


def parse_may_import(sentence: str, modname: str) -> Allowed:
    """The ``Allowed`` of one module's "May import:" sentence (see above)."""
    rel_mod = modname.removeprefix("jitguard._src").lstrip(".")
    own_package = rel_mod if _is_package(rel_mod) else rel_mod.rpartition(".")[0]
    transitive = "and what they may import" in sentence
    # ``pkg.* (a, b)``: the listed modules of pkg; any other parenthesis is prose.
    sentence = re.sub(
        r"([\w.]+)\.\*\s*\(([^()]*)\)",
        lambda m: (", ".join(f"{m[1]}.{n.strip()}" for n in m[2].split(","))
                   if _SUBLIST.match(m[2]) else f"{m[1]}.*"),
        sentence,
    )
    sentence = re.sub(r"\([^()]*\)", "", sentence)
    prefixes: set[str] = set()
    everything = False
    excluded: set[str] = set()
    refined: set[str] = set()  # packages an "every pkg module" clause speaks for
    for clause in sentence.split(";"):
        clause, _, exc = clause.partition(" except ")
        low = clause.strip().lower()
        if low.startswith("nothing"):
            continue
        if re.search(r"\b(every|any)thing in jitguard\._src\b", low) or re.search(
                r"(^|[\s,])jitguard\._src\.\*", low):
            everything = True
            excluded.update(_names(exc, own_package, ours_torch=True))
            continue
        below = re.search(r"everything below (\w+)", low)
        if below:
            level = LEVEL[below[1]]
            prefixes.update(n for n in LEVEL if LEVEL[n] < level)
            continue
        every = re.search(r"every (\w+) module", low)
        names = set(_names(clause, own_package, ours_torch=False))
        if every:
            names.add(every[1])
        drop = set(_names(exc, own_package, ours_torch=True))
        prefixes.update(n for n in names if n not in drop)
        if every:
            refined.add(every[1])
        if every and drop:  # every cache module except some: the others, one by one
            prefixes.discard(every[1])
            prefixes.update(
                f"{every[1]}.{p.stem}" for p in (SRC_DIR / every[1]).glob("*.py")
                if p.stem != "__init__" and f"{every[1]}.{p.stem}" not in drop)
    if everything:  # "everything ...; every cache module except X": X is not allowed
        excluded |= refined
    allowed = Allowed(frozenset(prefixes), everything, frozenset(excluded))
    if transitive:
        for name in list(prefixes):
            path = SRC_DIR.joinpath(*name.split(".")).with_suffix(".py")
            doc = ast.get_docstring(ast.parse(path.read_text())) or ""
            inner = parse_may_import(may_import_sentence(doc) or "", f"jitguard._src.{name}")
            allowed = Allowed(allowed.prefixes | inner.prefixes,
                              allowed.everything or inner.everything,
                              allowed.excluded | inner.excluded)
    return allowed


def may_import_violations(path: Path) -> list[str]:
    """The imports of one module that its "May import:" sentence does not allow."""
    name = module_name(path)
    source = path.read_text()
    sentence = may_import_sentence(ast.get_docstring(ast.parse(source)) or "")
    if sentence is None:
        return [f"{name} has no 'May import:' line in its docstring"]
    allowed = parse_may_import(sentence, name)
    own = name.removeprefix("jitguard._src").lstrip(".")
    out = []
    for imp in collect_imports(source, name, is_package=path.name == "__init__.py"):
        if not imp.module.startswith("jitguard._src."):
            continue
        rel = imp.module.removeprefix("jitguard._src.")
        if rel == own or own.startswith(rel + "."):
            continue  # itself, or its own package (its __init__ ran first anyway)
        if not allowed.allows(rel):
            out.append(f"{name}:{imp.lineno} imports {rel}, which 'May import: {sentence}' "
                       f"does not allow")
    return out


@pytest.mark.parametrize("path", src_modules(), ids=lambda p: str(p.relative_to(SRC_DIR)))
def test_module_imports_what_its_docstring_says(path: Path) -> None:
    """Every module under _src imports only what its own "May import:" sentence allows."""
    assert may_import_violations(path) == []


def test_may_import_parser_reads_each_form() -> None:
    """The sentence forms the modules use are read as the comment above says."""
    def allows(sentence: str, modname: str = "jitguard._src.cache.miss") -> Allowed:
        return parse_may_import(sentence, modname)

    a = allows("errors, compiler.*, dispatch.entry")
    assert a.allows("errors") and a.allows("compiler.kinds") and a.allows("dispatch.entry")
    assert not a.allows("dispatch.fast") and not a.allows("guards")
    a = allows("everything in jitguard._src except torch; every cache module except "
               "cache.specialize and cache.decorators")
    assert a.allows("compiler.kinds") and a.allows("cache.policy")
    assert not a.allows("torch.compile") and not a.allows("cache.specialize")
    assert not allows("nothing from jitguard (the standard library only)").allows("errors")
    a = allows("jitguard._src.torch.* (adapter_sources, convert_context), torch",
               "jitguard._src.torch.convert")
    assert a.allows("torch.adapter_sources") and not a.allows("torch.adapter")
    a = allows("jitguard._src.torch.adapter_stored and adapter_runtime",
               "jitguard._src.torch.adapter")
    assert a.allows("torch.adapter_runtime") and not a.allows("torch.stored")
    a = allows("everything below compiler in [Note: Layering]", "jitguard._src.compiler")
    assert a.allows("contexts") and not a.allows("store.keys")
    a = allows("cache.stance (and what they may import)", "jitguard._src.cache.explain")
    assert a.allows("cache.stance") and a.allows("cache.reasons") and not a.allows("store")


def test_a_wrong_may_import_line_fails(tmp_path: Path) -> None:
    """An import beyond the module's sentence is reported, naming the import and the line."""
    source = '"""X.\n\nMay import: errors, guards.\n"""\nfrom .errors import E\nfrom .ids import I\n'
    path = SRC_DIR / "_probe_module.py"
    path.write_text(source)
    try:
        found = may_import_violations(path)
    finally:
        path.unlink()
    assert len(found) == 1 and "imports ids" in found[0] and "May import: errors, guards" in found[0]


# ---- contracts beyond imports ---------------------------------------------------------------

# [Note: Kinds own their cache data] (compiler/kinds.py): neither the compiler nor the cache
# names a particular kind; what they need of one, they ask of it.
KIND_BLIND = ("compiler", "dispatch", "cache")


def kind_names_in(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, kind) for each string constant of ``source`` that is a kind's name, but for a
    kind class's own ``name = "..."`` and ``__all__`` (docstrings are not constants here)."""
    tree = ast.parse(source)
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id in ("name", "__all__") for t in targets):
                skip.update(id(n) for n in ast.walk(node.value))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skip.add(id(node.value))  # a docstring or a bare string
    return sorted(
        (node.lineno, node.value) for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        and node.value in names and id(node) not in skip
    )


def _kind_blind_modules() -> list[Path]:
    return [p for pkg in KIND_BLIND for p in sorted((SRC_DIR / pkg).glob("*.py"))]


@pytest.mark.parametrize("path", _kind_blind_modules(), ids=lambda p: str(p.relative_to(SRC_DIR)))
def test_compiler_and_cache_name_no_kind(path: Path) -> None:
    """No compiler, dispatch or cache module names a registered kind by string (it asks the
    kind: its facts, ``recorded_as``, its class)."""
    from jitguard._src.compiler.kinds import guard_kinds

    assert kind_names_in(path.read_text(), set(guard_kinds())) == []


def test_kind_name_check_sees_a_string() -> None:
    """A kind's name compared as a string is found; its class's ``name =`` is not."""
    source = ('class K:\n    name = "EQUALS_MATCH"\n'
              'def f(leaf):\n    """EQUALS_MATCH"""\n    return leaf.kind.name == "EQUALS_MATCH"\n')
    assert kind_names_in(source, {"EQUALS_MATCH"}) == [(5, "EQUALS_MATCH")]


# An optional dependency may be missing (numpy, sympy, redis, the C extension); the package's
# own modules never are: an ImportError of one is a bug to surface, not a mode to fall into.
# built only where a C compiler is (and, for _torchext, torch at build time)
OPTIONAL_OWN = {"jitguard._src._speedups.ext", "jitguard._src._torchext.ext"}
_CATCHES_IMPORT = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def swallowed_own_imports(source: str, modname: str, *, is_package: bool) -> list[str]:
    """Imports of jitguard modules inside a ``try`` whose handlers catch ImportError."""
    tree = ast.parse(source)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        caught: set[str] = set()
        for handler in node.handlers:
            kinds = (handler.type.elts if isinstance(handler.type, ast.Tuple)
                     else [handler.type])
            for k in kinds:
                caught.add("BaseException" if k is None else
                           getattr(k, "id", None) or getattr(k, "attr", ""))
        if not caught & _CATCHES_IMPORT:
            continue
        body = ast.Module(body=node.body, type_ignores=[])
        for imp in collect_imports(ast.unparse(body), modname, is_package=is_package):
            full = imp.module
            if full.startswith("jitguard") and not any(
                    full == o or o.startswith(full + ".") for o in OPTIONAL_OWN):
                out.append(f"{modname}:{node.lineno} swallows an ImportError of {full}")
    return out


@pytest.mark.parametrize("path", all_modules(), ids=lambda p: str(p.relative_to(PKG_DIR)))
def test_own_imports_never_swallow_import_error(path: Path) -> None:
    """No module imports one of the package's own modules under ``except ImportError``
    (the C extension excepted: it is optional by design, [Note: Loading the extension])."""
    name = module_name(path)
    assert swallowed_own_imports(path.read_text(), name,
                                 is_package=path.name == "__init__.py") == []


def test_swallow_check_sees_a_guarded_sibling() -> None:
    """A sibling imported under ``except ImportError`` is found; a third-party one is not."""
    source = ("try:\n    from .convert import f\nexcept ImportError:\n    f = None\n"
              "try:\n    import numpy\nexcept ImportError:\n    numpy = None\n")
    found = swallowed_own_imports(source, "jitguard._src.torch.dynamo_cache", is_package=False)
    assert found == ["jitguard._src.torch.dynamo_cache:1 swallows an ImportError of "
                     "jitguard._src.torch.convert"]


# ---- [Note: Scopes]: torch composes the cache, never extends it ---------------------------

CACHE_CLASSES = {"FunctionCache", "CacheInspection"}


def _cache_private_names() -> set[str]:
    """The private attributes and methods of the cache classes and the miss path (set on
    ``self`` or defined)."""
    names: set[str] = set()
    for stem in ("specialize", "inspection", "miss"):
        tree = ast.parse((SRC_DIR / "cache" / f"{stem}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id == "self" and node.attr.startswith("_") \
                    and not node.attr.startswith("__"):
                names.add(node.attr)
            elif isinstance(node, (ast.FunctionDef, ast.AnnAssign)) and isinstance(
                    getattr(node, "name", None) or getattr(getattr(node, "target", None), "id", None), str):
                name = node.name if isinstance(node, ast.FunctionDef) else node.target.id  # type: ignore[union-attr]
                if name.startswith("_") and not name.startswith("__"):
                    names.add(name)
    return names


def cache_misuse(source: str, private: set[str]) -> list[str]:
    """A torch module's classes that subclass a cache class, and its reads of a cache's
    private names on anything but ``self``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            bases = {getattr(b, "id", None) or getattr(b, "attr", None) for b in node.bases}
            out += [f"line {node.lineno}: class {node.name}({b})" for b in bases & CACHE_CLASSES]
        elif (isinstance(node, ast.Attribute) and node.attr in private
              and not (isinstance(node.value, ast.Name) and node.value.id == "self")):
            out.append(f"line {node.lineno}: {ast.unparse(node)}")
    return out


@pytest.mark.parametrize("path", _torch_modules(), ids=lambda p: p.stem)
def test_torch_composes_the_cache(path: Path) -> None:
    """No torch class subclasses FunctionCache (a frontend is a Scope, [Note: Scopes]), and
    no torch module reads a cache's private attributes (``cache._misses``, ``shared._table``)."""
    assert cache_misuse(path.read_text(), _cache_private_names()) == []


def test_cache_misuse_check_sees_both() -> None:
    """A subclass of the cache and a read of its private state are both found."""
    source = ("class C(FunctionCache):\n    pass\n"
              "def f(cache):\n    cache._misses.job.where = 'x'\n    return self._own\n")
    private = _cache_private_names()
    assert {"_misses", "_table", "_counters", "_warned", "_auto"} <= private
    assert cache_misuse(source, private) == ["line 1: class C(FunctionCache)",
                                             "line 4: cache._misses"]


def _private_reads_of(tree: ast.AST, names: set[str]) -> list[str]:
    """``x._attr`` reads where ``x`` is a plain name in ``names`` or ``self._cache``."""
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            continue
        base = node.value
        if isinstance(base, ast.Name) and base.id in names:
            out.append(f"{base.id}.{node.attr} (line {node.lineno})")
        elif (isinstance(base, ast.Attribute) and base.attr == "_cache"
              and isinstance(base.value, ast.Name) and base.value.id == "self"):
            out.append(f"self._cache.{node.attr} (line {node.lineno})")
    return out


def test_the_miss_path_reads_no_private_state_of_the_cache() -> None:
    """cache/miss.py's MissPath owns the miss path's state: it reads no private attribute
    of the FunctionCache it serves (``cache._x``, ``self._cache._x``), nor do the store's
    and the advisor's miss-side helpers."""
    for rel in ("cache/miss.py", "cache/persist.py", "cache/advice.py"):
        tree = ast.parse((SRC_DIR / rel).read_text())
        assert _private_reads_of(tree, {"cache"}) == [], rel


def test_the_private_read_finder_sees_a_read() -> None:
    """The finder of the test above reports both forms of a private read."""
    tree = ast.parse("cache._job\nself._cache._history\nself._cache.where\ncache.__dict__\n")
    assert _private_reads_of(tree, {"cache"}) == ["cache._job (line 1)",
                                                   "self._cache._history (line 2)"]


# ---- no module-level import cycle ----------------------------------------------------------


def _module_level_edges(files: dict[str, Path]) -> dict[str, set[str]]:
    """For each module, the modules of ``files`` it imports at module level (not inside a
    function: those imports run late and make no cycle at import time)."""
    edges: dict[str, set[str]] = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text())
        top = ast.Module(body=[n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))],
                         type_ignores=[])
        imports = collect_imports(ast.unparse(top), name, is_package=path.name == "__init__.py")
        edges[name] = {i.module for i in imports if i.module in files and i.module != name}
    return edges


def _a_cycle(edges: dict[str, set[str]]) -> Optional[list[str]]:
    """One import cycle among ``edges`` (its modules, the first repeated last), or None."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(u: str) -> Optional[list[str]]:
        state[u] = 1
        path.append(u)
        for v in sorted(edges.get(u, ())):
            if state.get(v) == 1:
                return [*path[path.index(v):], v]
            if v not in state:
                found = visit(v)
                if found:
                    return found
        path.pop()
        state[u] = 2
        return None

    for u in sorted(edges):
        if u not in state:
            found = visit(u)
            if found:
                return found
    return None


def test_no_module_level_import_cycle_in_src() -> None:
    """No chain of module-level imports among ``jitguard._src``'s modules leads back to
    where it started."""
    files = {}
    for path in SRC_DIR.rglob("*.py"):
        parts = path.relative_to(PKG_DIR.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        files[name] = path
    cycle = _a_cycle(_module_level_edges(files))
    assert cycle is None, " -> ".join(cycle or ())


def test_cycle_finder_sees_a_cycle() -> None:
    """The finder reports a three-module cycle, and none once one link is gone."""
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}}
    assert _a_cycle(edges) == ["a", "b", "c", "a"]
    edges["c"] = set()
    assert _a_cycle(edges) is None


def test_edges_are_module_level_imports_only(tmp_path: Path) -> None:
    """An import at module level is an edge; one inside a function is not."""
    fake = tmp_path / "fake.py"
    fake.write_text("import jitguard._src.env\n\n\ndef late():\n    import jitguard._src.logs\n")
    files = {"jitguard._src.fake": fake, "jitguard._src.env": SRC_DIR / "env.py",
             "jitguard._src.logs": SRC_DIR / "logs.py"}
    assert _module_level_edges(files)["jitguard._src.fake"] == {"jitguard._src.env"}
