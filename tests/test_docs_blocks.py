"""The code blocks of README.md and docs/: every python block runs, and the output a page shows is what it prints.

Conventions (docs/guide/develop.md says them for writers):

* a fenced block says what it is: its info string starts with a language (`python`, `bash`,
  `text`, ...); a block without one fails here;
* a `python` block runs alone, in a fresh interpreter (``PYTHONPATH=src``, in an empty
  folder); it passes when it exits with status 0, so a claim is best written as an
  ``assert``;
* a `text` block titled ``output`` (```` ```text title="output" ````) right after a python
  block is that block's output: stdout and stderr together, compared line by line, where
  ``...`` matches anything (as doctest's ELLIPSIS); jitguard's notice that the C hot path
  is not built (a fact of the machine) is left out;
* a python block that cannot run alone is titled with the reason (```` ```python
  title="not run: needs numba" ````): it shows as skipped, with that reason;
* a python block that imports torch is skipped, saying so, where torch is not installed.
"""

from __future__ import annotations

import doctest
import os
import pathlib
import re
import subprocess
import sys
from dataclasses import dataclass

import pytest

from _helpers import torch_installed

ROOT = pathlib.Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
TITLE = re.compile(r'title="([^"]*)"')
NOT_RUN = "not run:"
TORCH = re.compile(r"^\s*(import torch|from torch|import jitguard\.torch|from jitguard\.torch)", re.M)
# jitguard's one notice, on stderr, where the C hot path is not built (no C compiler at
# install): a fact of the machine, not of the page, so it is not compared.
NO_SPEEDUPS = re.compile(r"^jitguard: the extension jitguard\._src\._speedups\S* .*\n?", re.M)
# The README's length, in characters (issue 22: "at most about 10,000").
README_MAX_CHARS = 10_000


@dataclass
class Block:
    path: pathlib.Path
    line: int  # 1-based line of the opening fence
    lang: str
    title: str
    code: str
    output: str | None = None  # the output block that follows it, if any

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

def pages() -> list[pathlib.Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def parse(path: pathlib.Path) -> tuple[list[Block], list[str]]:
    """The fenced blocks of a markdown file, each output block attached to the python block
    before it, and the problems found (a block without a language, a stray output block)."""
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    problems: list[str] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info, start = m.group("fence"), m.group("info").strip(), i
        body: list[str] = []
        i += 1
        while i < len(lines):
            close = FENCE.match(lines[i])
            if (
                close and close.group("fence")[0] == fence[0]
                and len(close.group("fence")) >= len(fence) and not close.group("info").strip()
            ):
                break
            body.append(lines[i][len(m.group("indent")):])
            i += 1
        i += 1
        lang = info.split()[0].lstrip(".").lower() if info else ""
        t = TITLE.search(info)
        block = Block(path, start + 1, lang, t.group(1) if t else "", "\n".join(body) + "\n")
        where = block.where
        if not lang:
            problems.append(f"{where}: a fenced block without a language (```python, ```text, ...)")
        if lang == "text" and block.title == "output":
            prev = blocks[-1] if blocks else None
            if prev is None or prev.lang != "python" or prev.output is not None:
                problems.append(f"{where}: an output block that follows no python block")
            elif prev.title.startswith(NOT_RUN):
                problems.append(f"{where}: an output block of a block that is not run")
            else:
                prev.output = block.code
            continue
        if lang == "python" and block.title and not block.title.startswith(NOT_RUN):
            problems.append(f'{where}: a python block titled {block.title!r} (only "{NOT_RUN} <why>")')
        if lang == "python" and block.title.startswith(NOT_RUN) and not block.title[len(NOT_RUN):].strip():
            problems.append(f"{where}: a block not run, without the reason")
        blocks.append(block)
    return blocks, problems


def python_blocks() -> list[Block]:
    return [b for p in pages() for b in parse(p)[0] if b.lang == "python"]


def _env(tmp: pathlib.Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items()
        if not k.startswith(("JITGUARD_LOGS", "JITGUARD_TRACE", "JITGUARD_STORE", "TORCH_LOGS",
                             "TORCH_TRACE", "JITGUARD_CACHE_DIR"))
    }
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    env["PYTHONUNBUFFERED"] = "1"
    env["JITGUARD_CACHE_DIR"] = str(tmp / "cache")
    return env


def _matches(want: str, got: str) -> bool:
    def norm(s: str) -> str:
        return "\n".join(line.rstrip() for line in s.strip("\n").splitlines()) + "\n"

    got = NO_SPEEDUPS.sub("", got)
    return doctest.OutputChecker().check_output(norm(want), norm(got), doctest.ELLIPSIS)


def test_blocks_follow_the_conventions() -> None:
    """Every fenced block names its language; output blocks follow a run block; skips say why."""
    problems = [p for page in pages() for p in parse(page)[1]]
    assert not problems, "\n".join(problems)


def test_there_are_blocks_to_run() -> None:
    """The README and the docs hold runnable python blocks, some with the output they show."""
    readme = [b for b in python_blocks() if b.path.name == "README.md"]
    assert len([b for b in readme if not b.title]) >= 2
    assert any(b.output is not None for b in python_blocks())


def test_readme_is_short() -> None:
    """The README stays at most about 10,000 characters: the reference is in docs/."""
    assert len((ROOT / "README.md").read_text()) <= README_MAX_CHARS


def test_output_comparison_can_fail() -> None:
    """The output comparison rejects a different line and accepts ``...`` for a varying part."""
    assert _matches("a\nb = ...\n", "a\nb = 12 ms\n")
    assert not _matches("a\nb\n", "a\nc\n")
    assert not _matches("a\n", "a\nextra\n")
    notice = "jitguard: the extension jitguard._src._speedups is not built or not importable\n"
    assert _matches("a\n", notice + "a\n")


@pytest.mark.parametrize("block", python_blocks(), ids=lambda b: b.where)
def test_block_runs_and_shows_its_real_output(block: Block, tmp_path: pathlib.Path) -> None:
    """A python block exits with status 0, and prints what its output block shows."""
    if block.title.startswith(NOT_RUN):
        pytest.skip(f"{block.where}: {block.title}")
    if TORCH.search(block.code) and not torch_installed():
        pytest.skip(f"{block.where}: needs torch, which is not installed")
    script = tmp_path / "block.py"
    script.write_text(block.code)
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=_env(tmp_path), timeout=600,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    if proc.returncode != 0:
        pytest.fail(f"{block.where} failed:\n{proc.stdout}", pytrace=False)
    if block.output is not None and not _matches(block.output, proc.stdout):
        pytest.fail(
            f"{block.where}: the page shows\n{block.output}\nbut the block prints\n{proc.stdout}",
            pytrace=False,
        )
