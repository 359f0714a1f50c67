"""The reference docs (mkdocs.yml, docs/): every public name and every cited Note is published."""

from __future__ import annotations

import html
import importlib
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "jitguard"
NOTE_BLOCK = re.compile(r"^\s*# \[Note: ([^\]]+)\]\s*$", re.M)
# A citation may wrap over lines (of a docstring, or of a comment: "...\n# rest]").
CITATION = re.compile(r"\[Note: ([^\]]+)\]")


def _norm(title: str) -> str:
    return " ".join(re.sub(r"\n\s*#", " ", title).split())


def _defined_notes() -> dict[str, pathlib.Path]:
    out: dict[str, pathlib.Path] = {}
    for path in sorted(SRC.rglob("*.py")):
        for title in NOTE_BLOCK.findall(path.read_text()):
            assert title not in out, f"two Notes titled {title!r}: {out[title]} and {path}"
            out[title] = path
    return out


def _cited_notes() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        for m in CITATION.finditer(path.read_text()):
            out.setdefault(_norm(m.group(1)), []).append(path.name)
    return out


def test_every_cited_note_exists() -> None:
    """Each ``[Note: title]`` cited in the source (wrapped or not) is a Note block."""
    defined = _defined_notes()
    assert len(defined) > 20
    missing = {t: where for t, where in _cited_notes().items() if t not in defined}
    assert not missing, f"cited but never defined: {missing}"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (make docs)")
    pytest.importorskip("mkdocstrings_handlers.python")
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def _page(site: pathlib.Path, *parts: str) -> str:
    return site.joinpath(*parts, "index.html").read_text()


@pytest.mark.parametrize("package", ["jitguard", "jitguard.torch"])
def test_every_public_name_is_documented(site: pathlib.Path, package: str) -> None:
    """The API page of a package has an entry for every name of its live ``__all__``."""
    if package == "jitguard.torch":
        pytest.importorskip("torch")
    names = importlib.import_module(package).__all__
    page = _page(site, "api", package)
    missing = [n for n in names if f'id="{package}.{n}"' not in page]
    assert not missing


def test_every_cited_note_is_published_and_linked(site: pathlib.Path) -> None:
    """Each Note cited in the source has its anchor on a design page, and each citation in
    the rendered pages links to a Note that exists."""
    design = "".join(p.read_text() for p in (site / "design").rglob("index.html"))
    slugs = {t: "note-" + re.sub(r"[^a-z0-9]+", "-", t.lower()).strip("-") for t in _cited_notes()}
    unpublished = [t for t, s in slugs.items() if f'id="{s}"' not in design]
    assert not unpublished
    api = _page(site, "api", "jitguard")
    links = re.findall(r'<a class="note-ref" href="([^"]+)">', api)
    assert links
    for href in set(links):
        page, _, anchor = href.partition("#")
        target = (site / "api" / "jitguard" / page / "index.html").resolve()
        assert f'id="{anchor}"' in target.read_text(), href


def test_examples_show_their_real_output(site: pathlib.Path) -> None:
    """The worked examples embed their source and the output of running it at build time."""
    page = html.unescape(_page(site, "examples", "custom-compiler"))
    assert "def unroll(request: jg.CompileRequest):" in page
    assert "reasons: [\"0/0: L['cfg'].steps == 3 failed: got 2\"]" in page
    page = html.unescape(_page(site, "examples", "guard-json"))
    assert "rebuilt check accepts the frame: True" in page


def test_tlparse_example_when_traces_exist(site: pathlib.Path) -> None:
    """With structured traces in the source, the tlparse example is built and shows tlparse
    listing every compile of the traced program; without them the page is left out."""
    structured = SRC / "_src" / "structured.py"
    page = site / "examples" / "tlparse" / "index.html"
    if not (structured.exists() and "JITGUARD_TRACE" in structured.read_text()):
        assert not page.exists()
        return
    text = html.unescape(page.read_text())
    assert "index.html lists every compile id: True" in text
    for cid in ("[0/0]", "[0/1]", "[0/2]"):
        assert f"{cid}: " in text


def test_advice_page_shows_each_rule_run(site: pathlib.Path) -> None:
    """docs/advice.md embeds each rule's example with the advice it printed at build time."""
    page = html.unescape(_page(site, "advice"))
    for shown in (
        'fix: jitguard.specialize(scale, dynamic=["mode"])',
        "fn = functools.partial(...)  # once, before the loop",
        "Recompile limit (3) hit: The argument key",
        "fix: torch._dynamo.mark_dynamic(x, 0)",
        "The global ACTIVATION is baked into each compile",
        "The closure variable mode is baked into each compile",
        "fix: x = x.to(torch.float32)",
        "fix: x.requires_grad_(True)",
        "compiles: 2 | advice: []",
    ):
        assert shown in page, shown
