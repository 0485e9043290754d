"""The docs' key tables are generated from the config models: a test fails when one drifts."""

from __future__ import annotations

from pathlib import Path

import pytest

from foundry_ext.catalog.docs import BLOCK, keys_table, stale_tables
from foundry_ext.catalog.registry import SCHEDULE_MODELS
from tests.support.launcher import REPO

DOCS = REPO / "docs"


@pytest.mark.parametrize("page", sorted(DOCS.glob("*.md")), ids=lambda p: p.name)
def test_key_tables_match_the_models(page: Path) -> None:
    assert stale_tables(page.read_text()) == [], f"run: python -m foundry_ext.catalog.docs {page}"


def test_every_scheduler_of_the_package_has_its_key_table() -> None:
    documented = {m.group("name") for page in DOCS.glob("*.md") for m in BLOCK.finditer(page.read_text())}
    assert set(SCHEDULE_MODELS) - {"torch_lr_scheduler"} <= documented
    assert {f"torch:{name}" for name in ("StepLR", "OneCycleLR", "SequentialLR")} <= documented


def test_a_table_shows_defaults_ranges_and_descriptions() -> None:
    table = keys_table("warmup_stable_decay")
    assert "| `alpha_f` | `0` | a number in [0, 1] | final multiplier: the LR floor as a fraction of the LR |" in table
    assert "| `decay_type` | `linear` | linear, sqrt, cosine, square |" in table
