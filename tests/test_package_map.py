"""The package map of ``foundry_ext/__init__.py`` names every top-level module and package, and nothing else."""

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
