"""MkDocs hooks that generate parts of jitguard's docs at build time (see mkdocs.yml).

* The API pages (``docs/api/*.md``) are written by hand, by topic, with ``::: name`` entries.
  A public name (of ``jitguard.__all__`` or ``jitguard.torch.__all__``, read from the source)
  that no page has is listed on ``api/index.md`` under "Not yet filed under a topic", so it is
  documented still; tests/test_docs.py fails while that list is not empty.
* ``design/*.md``: every ``# [Note: title]`` block of ``src/jitguard``, one page per
  subsystem (``SUBSYSTEMS``), and an index; citations ``[Note: title]`` anywhere in the
  rendered pages link to them.
* ``css/pygments.css``: the stylesheet of the code highlighting, made by Pygments at build
  time (nothing is loaded from the network).
* ``{{ example: file.py }}`` / ``{{ output: file.py }}`` in a page: the example script of
  docs/examples and the output of running it now (examples show real output).
* The tlparse example is built when the source has structured traces (``JITGUARD_TRACE``
  in ``jitguard/_src/structured.py``), and left out of the site otherwise.

Nothing here imports jitguard: names and Notes are read with ``ast`` and plain text.
"""

from __future__ import annotations

import ast
import html
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PKG = SRC / "jitguard"
EXAMPLES = Path(__file__).resolve().parent / "examples"

NOTE_START = re.compile(r"^(\s*)# \[Note: ([^\]]+)\]\s*$")
CITE = re.compile(r"\[Note: ([^\]]+)\]")
TLPARSE_PAGE = "examples/tlparse.md"
EXAMPLE = re.compile(r"\{\{ (example|output): ([\w.-]+\.py) \}\}")


def public_names(init: Path) -> list[str]:
    """The ``__all__`` list of a package's ``__init__.py``, read statically."""
    tree = ast.parse(init.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return [ast.literal_eval(e) for e in node.value.elts]  # type: ignore[attr-defined]
    raise RuntimeError(f"{init} has no __all__")


def collect_notes() -> dict[str, list[tuple[str, str]]]:
    """Per module (dotted name), its Notes in order: (title, markdown body)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(PKG.rglob("*.py")):
        lines = path.read_text().splitlines()
        module = ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
        i = 0
        while i < len(lines):
            m = NOTE_START.match(lines[i])
            if not m:
                i += 1
                continue
            indent, title = m.group(1), m.group(2)
            body: list[str] = []
            i += 1
            while (
                i < len(lines) and lines[i].startswith(indent + "#")
                and not NOTE_START.match(lines[i])
            ):
                text = lines[i][len(indent) + 1 :]
                body.append(text[1:] if text.startswith(" ") else text)
                i += 1
            out.setdefault(module, []).append((title, "\n".join(body).strip("\n")))
    return out


def slug(title: str) -> str:
    return "note-" + re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


# Design notes, by subsystem: (page, title, intro, the modules' dotted-name prefixes). A
# module goes to the first subsystem with a prefix it starts with; the last takes the rest.
SUBSYSTEMS: list[tuple[str, str, str, tuple[str, ...]]] = [
    ("dispatch", "Dispatch and the C hot path",
     "How a call finds its entry: keys, dispatch facts, the generated dispatcher and the "
     "optional C extension.",
     ("jitguard._src.dispatch", "jitguard._src._speedups", "jitguard._src.native",
      *(f"jitguard._src.cache.{m}" for m in (
          "keys", "fast", "entry", "facts", "layout", "lru", "dispatch", "signature")))),
    ("cache", "The specializing cache",
     "`specialize`: compiles, misses, recompile reasons, policies, counters and stances.",
     ("jitguard._src.cache",)),
    ("compiler", "The guard compiler",
     "From guards to one generated check function: kinds, code generation, values, chunks "
     "and the JSON schema of guard sets.",
     ("jitguard._src.compiler",)),
    ("store", "The persistent store",
     "Entries that outlive the process: keys, signing, the SQLite and Redis tiers.",
     ("jitguard._src.store",)),
    ("torch", "The torch integration",
     "`jitguard.torch.compile`: TorchDynamo's capture, the conversion of its guards, tensor "
     "and module guards, torch's global states.",
     ("jitguard._src.torch", "jitguard._src._torchext")),
    ("observe", "Logs, traces and stacks",
     "What jitguard says about itself: logs, structured traces, user stacks.",
     ("jitguard._src.logs", "jitguard._src.structured", "jitguard._src.stacks")),
    ("core", "Core: layering, the data model, sources",
     "The rules every module follows, and the specification's data model.",
     ("jitguard",)),
]


def subsystem_of(module: str) -> str:
    for page, _, _, prefixes in SUBSYSTEMS:
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return page
    return SUBSYSTEMS[-1][0]


def note_page(module: str) -> str:
    return f"design/{subsystem_of(module)}.md"


def _source_path(module: str) -> str:
    rel = module.replace(".", "/")
    return f"src/{rel}/__init__.py" if (SRC / rel).is_dir() else f"src/{rel}.py"


def _note_markdown(body: str) -> str:
    """A Note's comment text as markdown: kept verbatim in a text block so that its
    indentation (lists, numbered steps, code) reads as written."""
    return "````text\n" + body.rstrip() + "\n````\n"


# ---- generated pages -------------------------------------------------------------------

_notes: dict[str, list[tuple[str, str]]] = {}
_note_urls: dict[str, str] = {}


def design_pages() -> dict[str, str]:
    pages: dict[str, list[str]] = {}
    index = [
        "# Design notes\n\n",
        "The cross-cutting rules of jitguard live in the source as Note blocks (comments "
        "that open with `# [Note:` and a title), cited by their exact title from docstrings "
        "and comments. They are extracted from the source at every docs build, grouped here "
        "by subsystem; a citation anywhere in these pages links to its Note. They describe "
        "the implementation: the modules they name are private.\n\n",
    ]
    for page, title, intro, _ in SUBSYSTEMS:
        modules = [m for m in _notes if subsystem_of(m) == page]
        if not modules:
            continue
        index.append(f"## [{title}]({page}.md)\n\n{intro}\n\n")
        body = pages.setdefault(note_page(modules[0]), [f"# {title}\n\n{intro}\n\n"])
        for module in modules:
            for note_title, text in _notes[module]:
                body.append(
                    f"## {note_title} {{#{slug(note_title)}}}\n\n"
                    f"In `{_source_path(module)}`.\n\n{_note_markdown(text)}\n"
                )
                index.append(f"* [{note_title}]({page}.md#{slug(note_title)})\n")
        index.append("\n")
    out = {uri: "".join(parts) for uri, parts in pages.items()}
    out["design/index.md"] = "".join(index)
    return out


def design_nav() -> list[dict[str, str]]:
    present = {subsystem_of(m) for m in _notes}
    return [{"Index": "design/index.md"}] + [
        {title: f"design/{page}.md"} for page, title, _, _ in SUBSYSTEMS if page in present
    ]


# ---- the API pages' completeness --------------------------------------------------------

API_DIR = Path(__file__).resolve().parent / "api"
DIRECTIVE = re.compile(r"^::: ([\w.]+)\s*$", re.M)
UNFILED_HEADING = "Not yet filed under a topic"


def public_api() -> dict[str, list[str]]:
    """Per public package, the names of its ``__all__``."""
    return {
        "jitguard": public_names(PKG / "__init__.py"),
        "jitguard.torch": public_names(PKG / "torch" / "__init__.py"),
    }


def _module_init(dotted: str) -> Path | None:
    rel = Path(*dotted.split("."))
    for cand in (SRC / rel / "__init__.py", SRC / rel.with_suffix(".py")):
        if cand.exists():
            return cand
    return None


def documented_names() -> set[str]:
    """The dotted names the API pages document: each ``::: name`` entry, also under the
    package ``jitguard`` when it is a name of a public submodule that the package re-exports
    (``jitguard.sources.LocalSource`` documents ``jitguard.LocalSource``); for an entry that
    is a public module with an ``__all__``, every name of it, likewise."""
    top = set(public_names(PKG / "__init__.py"))
    out: set[str] = set()
    for page in sorted(API_DIR.glob("*.md")):
        for target in DIRECTIVE.findall(page.read_text()):
            out.add(target)
            module, _, name = target.rpartition(".")
            parent = _module_init(module)
            if (
                name in top and module.startswith("jitguard.") and "._" not in module
                and parent is not None and name in public_names(parent)
            ):
                out.add(f"jitguard.{name}")  # jitguard.sources.LocalSource: jitguard.LocalSource
            init = _module_init(target)
            if init is None:
                continue
            try:
                names = public_names(init)
            except RuntimeError:
                continue
            for n in names:
                out.add(f"{target}.{n}")
                if n in top:
                    out.add(f"jitguard.{n}")
    return out


def unfiled_names() -> list[str]:
    documented = documented_names()
    return [
        f"{package}.{n}"
        for package, names in public_api().items()
        for n in names
        if f"{package}.{n}" not in documented
    ]


def pygments_css() -> str:
    from pygments.formatters import HtmlFormatter

    css = HtmlFormatter(style="default").get_style_defs(".highlight")
    return "/* Generated by docs/hooks.py from Pygments' default style. */\n" + css + "\n"


def has_traces() -> bool:
    structured = PKG / "_src" / "structured.py"
    return structured.exists() and "JITGUARD_TRACE" in structured.read_text()


def on_config(config: Any) -> Any:
    global _notes
    _notes = collect_notes()
    _note_urls.clear()
    for module, notes in _notes.items():
        for title, _ in notes:
            if title in _note_urls:
                raise RuntimeError(f"two Notes titled {title!r}")
            _note_urls[title] = f"design/{subsystem_of(module)}/#{slug(title)}"
    for entry in config["nav"]:
        if isinstance(entry, dict) and "Design notes" in entry:
            entry["Design notes"] = design_nav()
        if isinstance(entry, dict) and "Examples" in entry and not has_traces():
            entry["Examples"] = [e for e in entry["Examples"] if TLPARSE_PAGE not in e.values()]
    return config


def on_files(files: Files, config: Any) -> Files:
    if not has_traces():
        tlparse = files.get_file_from_path(TLPARSE_PAGE)
        if tlparse is not None:
            files.remove(tlparse)
    for uri, content in design_pages().items():
        files.append(File.generated(config, uri, content=content))
    files.append(File.generated(config, "css/pygments.css", content=pygments_css()))
    return files


# ---- page rewriting --------------------------------------------------------------------


def _run_example(name: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(SRC), "JITGUARD_DOCS_BUILD": "1"}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, env=env,
        cwd=ROOT, timeout=600,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"docs example {name} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    def replace(m: re.Match[str]) -> str:
        what, name = m.group(1), m.group(2)
        if what == "example":
            return "```python\n" + (EXAMPLES / name).read_text().rstrip() + "\n```"
        return "```text\n" + _run_example(name).rstrip() + "\n```"

    markdown = EXAMPLE.sub(replace, markdown)
    if page.file.src_uri == "api/index.md":
        unfiled = unfiled_names()
        if unfiled:
            markdown += f"\n## {UNFILED_HEADING}\n\n" + "".join(
                f"\n::: {name}\n" for name in unfiled
            )
    return markdown


_BASES = re.compile(r'(<p class="doc doc-class-bases">\s*Bases: )(.*?)(</p>)', re.S)
_BASE = re.compile(r"<code>.*?</code>", re.S)
_TITLE = re.compile(r' title="(jitguard\._src\.[\w.]+)"')
_TITLE_ATTR = re.compile(r' title="([^"]*)"')
_PRIVATE_ALIAS = re.compile(r"\s*\(jitguard\._src\.[\w.]+\)")
_PRIVATE_SPAN = re.compile(r'<span class="n">_(\w+)</span>')


def _public_only(content: str) -> str:
    """An API page shows public names only: a private base class (a mixin, ``Generic[_P,
    _R]``) is left out of "Bases:", a link title naming a private path names the public
    one (or goes), a private type variable shows without its underscore (``P``), and a
    private sentinel default (``_UNSET``: "not given") shows as ``...``."""
    public = set(public_names(PKG / "__init__.py"))

    def base_ok(code: str) -> bool:
        text = re.sub(r"<[^>]+>", "", code)
        if text.startswith(("Generic[", "typing.Generic")):
            return False
        m = _TITLE.search(code)
        return m is None or m.group(1).rsplit(".", 1)[1] in public

    def bases(m: re.Match[str]) -> str:
        kept = [c for c in _BASE.findall(m.group(2)) if base_ok(c)]
        return m.group(1) + ", ".join(kept) + m.group(3) if kept else ""

    def title(m: re.Match[str]) -> str:
        name = m.group(1).rsplit(".", 1)[1]
        return f' title="jitguard.{name}"' if name in public else ""

    def private(m: re.Match[str]) -> str:
        name = m.group(1)
        return '<span class="n">...</span>' if len(name) > 1 and name.isupper() else (
            f'<span class="n">{name}</span>'
        )

    content = _BASES.sub(bases, content)
    content = _TITLE_ATTR.sub(
        lambda m: f' title="{_PRIVATE_ALIAS.sub("", m.group(1))}"', content
    )
    content = _TITLE.sub(title, content)
    return _PRIVATE_SPAN.sub(private, content)


def on_post_page(output: str, page: Any, config: Any) -> str:
    """On the API pages, public names only (after autorefs has made its links)."""
    if page.file.src_uri.startswith("api/"):
        return _public_only(output)
    return output


def on_page_content(content: str, page: Any, config: Any, files: Files) -> str:
    """Link every ``[Note: title]`` citation to its Note; an unknown title fails the build."""
    depth = page.file.url.count("/")
    prefix = "../" * depth

    def link(m: re.Match[str]) -> str:
        title = " ".join(html.unescape(m.group(1)).split())  # a citation may wrap
        url = _note_urls.get(title)
        if url is None:
            raise RuntimeError(f"{page.file.src_uri} cites [Note: {title}], which no Note defines")
        return f'<a class="note-ref" href="{prefix}{url}">[Note: {m.group(1)}]</a>'

    return CITE.sub(link, content)
