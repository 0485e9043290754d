"""README.md is also the package's page on a package index, where a relative link (``docs/law.md``) leads nowhere:
every link of it is absolute, and every one into this repository names a file (and a heading) that exists."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

from tests.docs.test_docs_coverage import FENCE, LINK, _anchors
from tests.support.launcher import REPO

BASE = "https://github.com/foundry-ext/foundry-ext"
# an absolute link into the repository -> its path there: a file or folder of the main branch, or its raw bytes
REPO_LINK = re.compile(
    r"^(?:https://github\.com/foundry-ext/foundry-ext/(?:blob|tree)/main/"
    r"|https://raw\.githubusercontent\.com/foundry-ext/foundry-ext/main/)(?P<path>[^#]*)(?:#(?P<anchor>.*))?$"
)


def _links(page: Path) -> list[str]:
    return [m.group(1) for m in LINK.finditer(FENCE.sub("", page.read_text()))]


def test_readme_has_no_relative_link() -> None:
    relative = [target for target in _links(REPO / "README.md") if not re.match(r"^[a-z]+:", target)]
    assert relative == []


def test_every_repository_link_of_the_readme_names_an_existing_file_and_heading() -> None:
    problems, checked = [], 0
    for target in _links(REPO / "README.md"):
        if not target.startswith((BASE, "https://raw.githubusercontent.com/foundry-ext/")):
            continue  # another site (llm-foundry, uv): not this repository's
        match = REPO_LINK.match(target)
        if match is None:
            problems.append(f"{target}: not a link to the main branch (blob/main, tree/main, raw .../main)")
            continue
        file = REPO / match.group("path")
        anchor = match.group("anchor")
        checked += 1
        if not file.exists():
            problems.append(f"{target}: no {match.group('path')} in the repository")
        elif anchor and anchor not in _anchors(file):
            problems.append(f"{target}: no heading #{anchor} in {match.group('path')}")
    assert problems == []
    assert checked >= 20  # docs pages, anchors, the two pictures, CHANGELOG.md, LICENSE


def test_the_project_urls_are_the_readme_repository() -> None:
    urls = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["urls"]
    assert urls["Repository"] == BASE
    assert all(url.startswith(BASE) for url in urls.values())
    assert (REPO / urls["Changelog"].removeprefix(f"{BASE}/blob/main/")).exists()
