"""The package's maps stay true: ``foundry_ext/__init__.py``'s names every top-level module and package, and
docs/contributing.md's "Where a module's tests are" names each of them with test folders that exist."""

from __future__ import annotations

import re

import foundry_ext
from tests.support.launcher import REPO


def test_the_map_names_every_top_level_module_and_package() -> None:
    package = REPO / "foundry_ext"
    present = {p.stem for p in package.glob("*.py") if p.name != "__init__.py"}
    present |= {p.name for p in package.iterdir() if (p / "__init__.py").is_file()}
    doc = foundry_ext.__doc__ or ""
    named = set(re.findall(r"``(\w+)``", doc.split("The package, top to bottom", 1)[1]))
    assert present <= named, f"not in the map: {sorted(present - named)}"
    anywhere = {p.stem for p in package.rglob("*.py")} | {p.parent.name for p in package.rglob("__init__.py")}
    stale = {n for n in named - present if n.islower() and n not in anywhere}
    assert not stale, f"named in the map, absent from the package: {sorted(stale)}"


def test_the_tests_map_names_every_top_level_module_and_package_and_folders_that_exist() -> None:
    package = REPO / "foundry_ext"
    present = {f"{p.name}" for p in package.glob("*.py") if p.name != "__init__.py"}
    present |= {f"{p.name}/" for p in package.iterdir() if (p / "__init__.py").is_file()}
    text = (REPO / "docs" / "contributing.md").read_text()
    table = text.split("<!-- tests-map -->", 1)[1].split("<!-- /tests-map -->", 1)[0]
    rows = [line.split("|")[1:3] for line in table.splitlines() if line.startswith("| `")]
    named = {name for left, _ in rows for name in re.findall(r"`([\w./]+)`", left)}
    assert present <= named, f"not in the tests map: {sorted(present - named)}"
    folders = {f for _, right in rows for f in re.findall(r"`(tests/[\w/.]+)`", right)}
    assert folders and all((REPO / f).exists() for f in folders), sorted(f for f in folders if not (REPO / f).exists())
