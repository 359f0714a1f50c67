"""The reference docs (mkdocs.yml, docs/): every public name and every cited Note is published."""

from __future__ import annotations

import html
import importlib
import os
import pathlib
import re
import shutil
import struct
import subprocess
import sys
import zlib

import pytest

from _helpers import torch_installed

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


def _text(page: str) -> str:
    """A page's text: tags (the highlighter's spans too) removed, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def _api_pages(site: pathlib.Path) -> dict[str, str]:
    """The API pages by name; "index" is the overview (api/index.html)."""
    pages = {p.parent.name: p.read_text() for p in sorted((site / "api").glob("*/index.html"))}
    return {"index": (site / "api" / "index.html").read_text(), **pages}


def _main(page: str) -> str:
    """The page's content, without the theme's navigation."""
    return page[page.index('role="main"'):]


@pytest.mark.parametrize("package", ["jitguard", "jitguard.torch"])
def test_every_public_name_is_on_a_topic_page(site: pathlib.Path, package: str) -> None:
    """Every name of a package's live ``__all__`` is on an API topic page, none left unfiled."""
    if package == "jitguard.torch" and not torch_installed():
        pytest.skip("torch is not installed")
    names = importlib.import_module(package).__all__
    pages = _api_pages(site)
    assert {"specialize", "torch", "explain", "store", "errors", "data-model"} <= set(pages)
    everything = "".join(pages.values())
    # An entry may document the name where a public submodule re-exports it too
    # (jitguard.sources.LocalSource for jitguard.LocalSource).
    missing = [
        n for n in names
        if not re.search(rf'id="{re.escape(package)}\.(?:[a-z]\w*\.)?{re.escape(n)}"', everything)
    ]
    assert not missing
    assert "Not yet filed under a topic" not in pages["index"]


def test_api_pages_show_public_names_only(site: pathlib.Path) -> None:
    """No heading, signature, base class or link of an API page names a private path or name."""
    for name, page in _api_pages(site).items():
        main = _main(page)
        attrs = " ".join(re.findall(r'(?:id|href|title)="([^"]*)"', main))
        assert "jitguard._src" not in attrs, name
        headings = re.findall(r'<h\d id="([^"]+)" class="doc doc-heading"', main)
        assert headings or name == "index", name
        assert all(h.startswith("jitguard.") and "._" not in h for h in headings), name
        parts = re.findall(
            r'<p class="doc doc-class-bases">(.*?)</p>'
            r'|<div class="[^"]*doc-signature[^"]*">(.*?)</div>',
            main, re.S,
        )
        for part in parts:
            text = html.unescape(re.sub(r"<[^>]+>", "", "".join(part)))
            assert not re.search(r"(?<![\w.])_[A-Za-z]", text), (name, text)


def test_attributes_show_no_self_assignment(site: pathlib.Path) -> None:
    """An attribute set from a parameter is not rendered as ``policy = policy``."""
    attributes = 0
    for name, page in _api_pages(site).items():
        for block in re.findall(
            r'<div class="doc doc-object doc-attribute">(.*?)<div class="doc doc-contents',
            page, re.S,
        ):
            attributes += 1
            assert not re.search(r"\b(\w+) = \1\b", _text(block)), (name, _text(block))
    assert attributes > 10
    assert 'id="jitguard.FunctionCache.policy"' in _page(site, "api", "specialize")


def test_nothing_loads_from_the_network(site: pathlib.Path) -> None:
    """No page loads a script or stylesheet from another host; Pygments highlights at build time."""
    for path in site.rglob("*.html"):
        text = path.read_text()
        remote = re.findall(r'<(?:script|link)[^>]+(?:src|href)="(?:https?:)?//[^"]+"', text)
        assert not remote, (path, remote)
    css = (site / "css" / "pygments.css").read_text()
    assert ".highlight .k " in css
    page = _page(site, "api", "guards")
    assert 'href="../../css/pygments.css"' in page
    assert '<span class="kn">import</span>' in page


def test_design_notes_are_grouped_by_subsystem(site: pathlib.Path) -> None:
    """The design notes are a few pages, one per subsystem; the sidebar names no private module."""
    pages = [p for p in (site / "design").iterdir() if p.is_dir()]
    assert 3 <= len(pages) <= 10
    page = (site / "index.html").read_text()
    nav = page[: page.index('role="main"')]
    assert "jitguard._src" not in nav
    assert "The guard compiler" in nav


def test_every_cited_note_is_published_and_linked(site: pathlib.Path) -> None:
    """Every cited Note has its anchor on a design page; every API page citation links to one."""
    design = "".join(p.read_text() for p in (site / "design").rglob("index.html"))
    slugs = {t: "note-" + re.sub(r"[^a-z0-9]+", "-", t.lower()).strip("-") for t in _cited_notes()}
    unpublished = [t for t, s in slugs.items() if f'id="{s}"' not in design]
    assert not unpublished
    checked = 0
    for name, page in _api_pages(site).items():
        for href in set(re.findall(r'<a class="note-ref" href="([^"]+)">', page)):
            target_page, _, anchor = href.partition("#")
            here = site / "api" if name == "index" else site / "api" / name
            target = (here / target_page / "index.html").resolve()
            assert f'id="{anchor}"' in target.read_text(), href
            checked += 1
    assert checked > 10


def test_examples_show_their_real_output(site: pathlib.Path) -> None:
    """The worked examples embed their source and the output of running it at build time."""
    page = _text(_page(site, "examples", "custom-compiler"))
    assert "def unroll(request: jg.CompileRequest):" in page
    assert "reasons: [\"0/0: L['cfg'].steps == 3 failed: got 2\"]" in page
    page = _text(_page(site, "examples", "guard-json"))
    assert "rebuilt check accepts the frame: True" in page
    page = _text(_page(site, "examples", "torch-recompiles"))
    assert re.search(r"model\.eval\(\)\s+-> recompiled\n.*training", page)


def test_tlparse_example_when_traces_exist(site: pathlib.Path) -> None:
    """With structured traces in the source, the tlparse example is built and shows tlparse
    listing every compile of the traced program; without them the page is left out."""
    structured = SRC / "_src" / "structured.py"
    page = site / "examples" / "tlparse" / "index.html"
    if not (structured.exists() and "JITGUARD_TRACE" in structured.read_text()):
        assert not page.exists()
        return
    text = _text(page.read_text())
    assert "index.html lists every compile id: True" in text
    for cid in ("[0/0]", "[0/1]", "[0/2]"):
        assert f"{cid}: " in text


# ---- screenshots: the site renders in a real browser, offline ---------------------------

CHROMIUM = next(
    (p for p in (shutil.which("chromium"), shutil.which("chromium-browser")) if p), None
)


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and rows (RGB or RGBA, 8-bit) of a PNG, decoded with zlib alone."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6) and body[12] == 0, "an RGB(A) 8-bit PNG"
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw, stride = zlib.decompress(idat), width * channels
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line) if channels == 3 else bytes(
            v for i, v in enumerate(line) if i % 4 != 3
        ))
        prev = line
    return width, height, rows


def _colors(rows: list[bytes]) -> dict[tuple[int, int, int], int]:
    out: dict[tuple[int, int, int], int] = {}
    for row in rows:
        for i in range(0, len(row), 3):
            rgb = (row[i], row[i + 1], row[i + 2])
            out[rgb] = out.get(rgb, 0) + 1
    return out


def _screenshot(page: pathlib.Path, out: pathlib.Path) -> dict[tuple[int, int, int], int]:
    proc = subprocess.run(
        [
            CHROMIUM or "chromium", "--headless", "--no-sandbox", "--disable-gpu",
            "--hide-scrollbars", "--window-size=1200,900", f"--screenshot={out}",
            # Offline: any host name fails to resolve, so a page needing the network shows it.
            "--host-resolver-rules=MAP * ~NOTFOUND", page.as_uri(),
        ],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0 and out.exists(), proc.stderr
    width, height, rows = _png_pixels(out.read_bytes())
    assert (width, height) == (1200, 900)
    return _colors(rows)


# The theme's sidebar (readthedocs: #343131) and Pygments' default keyword green (#008000).
SIDEBAR = (0x34, 0x31, 0x31)
KEYWORD = (0x00, 0x80, 0x00)


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium (Debian: apt-get install chromium)")
def test_screenshots_show_the_index_and_an_api_page_rendered(
    site: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """Headless Chromium, offline, renders the index and an API page: theme, text, highlighted code."""
    keep = os.environ.get("JITGUARD_DOCS_SCREENSHOTS")  # a folder to keep the PNGs in
    out_dir = pathlib.Path(keep) if keep else tmp_path
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, page in (("index", site / "index.html"), ("api-guards", site / "api" / "guards" / "index.html")):
        colors = _screenshot(page, out_dir / f"{name}.png")
        total = sum(colors.values())
        assert colors.get(SIDEBAR, 0) > total // 20, f"{name}: the theme's sidebar is not drawn"
        assert len(colors) > 100, f"{name}: next to no text rendered"
        assert colors.get(KEYWORD, 0) > 20, f"{name}: code is not highlighted"


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
        "The length of L['values'] kept changing (lengths 1, 2, 3, 4, 5",
    ):
        assert shown in page, shown
