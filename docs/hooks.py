"""MkDocs hooks that generate jitguard's reference pages at build time (see mkdocs.yml).

* ``api/jitguard.md`` and ``api/jitguard.torch.md``: one mkdocstrings entry per name of the
  package's ``__all__`` (read from the source, so names added anywhere appear unedited).
* ``design/*.md``: every ``# [Note: title]`` block of ``src/jitguard``, one page per module,
  and an index; citations ``[Note: title]`` anywhere in the rendered pages link to them.
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


def note_page(module: str) -> str:
    return f"design/{module}.md"


def _note_markdown(body: str) -> str:
    """A Note's comment text as markdown: kept verbatim in a text block so that its
    indentation (lists, numbered steps, code) reads as written."""
    return "````text\n" + body.rstrip() + "\n````\n"


# ---- generated pages -------------------------------------------------------------------

_notes: dict[str, list[tuple[str, str]]] = {}
_note_urls: dict[str, str] = {}


def api_page(package: str, init: Path, intro: str) -> str:
    names = public_names(init)
    parts = [f"# `{package}`\n\n", intro, "\n\n"]
    parts.append(", ".join(f"[`{n}`](#{package}.{n})" for n in names) + "\n")
    for n in names:
        parts.append(f"\n::: {package}.{n}\n")
    return "".join(parts)


def design_pages() -> dict[str, str]:
    pages: dict[str, str] = {}
    index = [
        "# Design notes\n\n",
        "The cross-cutting rules of jitguard live in the source as Note blocks (comments "
        "that open with `# [Note:` and a title), cited by their exact title from docstrings "
        "and comments. They are extracted from the source at every docs build; a citation "
        "anywhere in these pages links to its Note.\n\n",
    ]
    for module, notes in _notes.items():
        page = [f"# Notes in `{module}`\n\n"]
        index.append(f"## `{module}`\n\n")
        for title, body in notes:
            page.append(f"## Note: {title} {{#{slug(title)}}}\n\n{_note_markdown(body)}\n")
            index.append(f"* [Note: {title}]({module}.md#{slug(title)})\n")
        index.append("\n")
        pages[note_page(module)] = "".join(page)
    pages["design/index.md"] = "".join(index)
    return pages


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
            _note_urls[title] = f"design/{module}/#{slug(title)}"
    design = [{"Index": "design/index.md"}] + [
        {module: note_page(module)} for module in _notes
    ]
    for entry in config["nav"]:
        if isinstance(entry, dict) and "Design notes" in entry:
            entry["Design notes"] = design
        if isinstance(entry, dict) and "Examples" in entry and not has_traces():
            entry["Examples"] = [e for e in entry["Examples"] if TLPARSE_PAGE not in e.values()]
    return config


def on_files(files: Files, config: Any) -> Files:
    if not has_traces():
        tlparse = files.get_file_from_path(TLPARSE_PAGE)
        if tlparse is not None:
            files.remove(tlparse)
    generated = {
        "api/jitguard.md": api_page(
            "jitguard", PKG / "__init__.py",
            "Every public name of `jitguard` (its `__all__`), from its docstring. "
            "`import jitguard` never imports torch.",
        ),
        "api/jitguard.torch.md": api_page(
            "jitguard.torch", PKG / "torch" / "__init__.py",
            "The torch integration's public names (its `__all__`). Importing `jitguard.torch` "
            "imports torch and installs the integration.",
        ),
        **design_pages(),
    }
    for uri, content in generated.items():
        files.append(File.generated(config, uri, content=content))
    return files


# ---- page rewriting --------------------------------------------------------------------


def _run_example(name: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(SRC), "JITGUARD_DOCS_BUILD": "1"}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, env=env,
        cwd=ROOT, timeout=120,
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

    return EXAMPLE.sub(replace, markdown)


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
