"""Every fenced block of README.md and docs/*.md is run by tests/docs/conftest.py or says why it is not; every
relative link resolves to a file and a heading."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.launcher import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
RUN = {"console", "bash", "python", "yaml"}  # the languages conftest.py evaluates
NOT_CODE = {"text"}  # formulas, diagrams, usage synopses, excerpts
FENCE = re.compile(r"^```(\S*)[^\n]*\n.*?^```$", re.M | re.S)
SKIP = re.compile(r'<!-- skip: next "([^"]+)" -->\n$')


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_block_runs_or_says_why_not(page: Path) -> None:
    text = page.read_text()
    problems = []
    for block in FENCE.finditer(text):
        line = text.count("\n", 0, block.start()) + 1
        language = block.group(1)
        if language not in RUN | NOT_CODE:
            problems.append(f"line {line}: fence language {language!r}; use one of {sorted(RUN | NOT_CODE)}")
        if language == "console" and not block.group(0).split("\n")[1].startswith("$ "):
            problems.append(f"line {line}: a console block starts with '$ command'")
    for skip in re.finditer(r"^<!-- skip:[^\n]*-->", text, re.M):  # at a line's start: a directive, not prose
        line = text.count("\n", 0, skip.start()) + 1
        if not SKIP.match(text[skip.start() : text.index("\n", skip.start()) + 1]):
            problems.append(f'line {line}: a skip needs its reason: <!-- skip: next "why" -->')
        elif not text[skip.end() + 1 :].startswith("```"):
            problems.append(f"line {line}: a skip must sit right above the block it skips")
    assert problems == []


LINK = re.compile(r"\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (``-`` and ``_`` kept), spaces to ``-``."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())  # a '#' line inside a code block is not a heading
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    """A relative link names a file of the repository, and its ``#anchor`` a heading of that file."""
    problems = []
    for match in LINK.finditer(FENCE.sub("", page.read_text())):
        target = match.group(1)
        if re.match(r"^[a-z]+:", target):  # https:, mailto: ...: not checked here (no network)
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            problems.append(f"{target}: no file {file.relative_to(REPO) if file.is_relative_to(REPO) else file}")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            problems.append(f"{target}: no heading with the anchor #{anchor} in {file.relative_to(REPO)}")
    assert problems == []
