"""bench/bench_anneal.py: docs/benchmarks.md section 13 re-read from its record, and a scaled-down copy trained."""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.launcher import REPO

BENCH = REPO / "bench"
RECORD = BENCH / "data" / "anneal-branches.json"


def _bench() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module("bench_anneal")
    finally:
        sys.path.remove(str(BENCH))


def _section() -> str:
    text = (REPO / "docs" / "benchmarks.md").read_text()
    start = text.index("## 13. Cooldown branches")
    return text[start : text.index("\n## ", start + 1)]


def test_the_docs_figures_are_the_recorded_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """Every row of section 13's table, and each figure its text quotes, comes from bench/data/anneal-branches.json."""
    record = _bench().main(["--from-json", str(RECORD)])
    out = capsys.readouterr().out
    section = _section()
    rows = [line for line in section.splitlines() if line.startswith("|")]
    assert len(rows) == 2 + 6  # the header, its rule and the 6 branches
    for row in rows:
        assert row in out, row
    assert record["seeds"] == [17, 18, 19] and record["config"]["points"] == [400, 600, 800]
    assert record["config"]["decays"] == [200, 400] and f"{record['minutes']:.1f} min" in section
    assert "verdict **poor** (the law misses its own runs by 1.61% on average (poor above 0.40%))" in out
    assert "Law: multipower, 9 runs, verdict **poor** (the law misses its own runs by 1.61% on average" in section
    quoted = {
        "error |predicted - mean|: mean 0.0324, max 0.0539; seed spread (max - min over the 3 seeds of a branch): "
        "mean 0.0027, max 0.0051": "|predicted - mean| 0.0324 on average, 0.0539 at most, against a seed spread of "
        "0.0027 on average\n  (0.0051 at most)",
        "law's pick: from 800 over 400 (measured 1.2780); measured best: from 800 over 400 (1.2780); the same branch":
            "the law's pick is the branch from 800 over 400 (predicted 1.2241), and it is the measured\n  best",
        "pairs of branches ordered alike by the law and the measurement: 14 of 15": "orders 14 of the 15 pairs",
        "the law's band holds the measured mean of 2 of 6 branches": "holds the measured mean of 2 of the 6 branches",
        "ending at 800: the law expects from 600 over 200 to win, measured from 600 over 200 won (by 0.0006, seed "
        "spread up to 0.0021: within the seed noise): agree": "the branch from 600 over 200 to win and it does, by "
        "0.0006",
        "ending at 1000: the law expects from 800 over 200 to win, measured from 600 over 400 won (by 0.0015, seed "
        "spread up to 0.0036: within the seed noise): disagree": "branch from 600 over 400 wins, by 0.0015",
    }  # fmt: skip
    for line, prose in quoted.items():
        assert line in out, line
        assert prose in section, prose
    for s in (400, 600, 800):
        assert f"from {s}: the law expects the decay over 400 to win, measured: over 400: agree" in out


@pytest.mark.slow
def test_a_scaled_down_copy_trains(demo_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """2 seeds, a 4-batch stable run, branches from its checkpoints at 2 and 4 over 4 batches, from `anneal` YAMLs."""
    data = Path(getattr(demo_data, "path", demo_data))
    out_json = tmp_path / "record.json"
    argv = ["--stable", "4", "--points", "2,4", "--decays", "4", "--seeds", "17", "18", "--warmup", "1",
            "--eval-interval", "2", "--save-interval", "2", "--data", str(data), "--work", str(tmp_path / "work"),
            "--json", str(out_json)]  # fmt: skip
    record = _bench().main(argv)
    out = capsys.readouterr().out
    assert json.loads(out_json.read_text()) == json.loads(json.dumps(record))
    for seed in ("17", "18"):
        branches = record["runs"][seed]["branches"]
        assert [(b["from"], b["decay"], b["batches"]) for b in branches] == [(2, 4, 4), (4, 4, 4)]
        # the first batch at the peak (the checkpoint's LR), the last inside the decay (linear to 0.1: p = 2/4)
        assert all(b["lr_first"] == 1e-2 and b["lr_last"] == pytest.approx(1e-2 * (0.1 + 0.9 * 0.5)) for b in branches)
        work = tmp_path / "work"
        kept = work / f"stable-seed{seed}-anneal-2ba-4ba-linear-floor0.1" / "checkpoints" / "anneal-source"
        assert [p.name for p in kept.iterdir()] == ["ep0-ba2-rank0.pt"]
    # the two seeds differ (the seed sets the initialisation and the data order): the spread is real noise
    finals = {seed: [b["final"] for b in record["runs"][seed]["branches"]] for seed in ("17", "18")}
    assert all(a != b for a, b in zip(finals["17"], finals["18"], strict=True))
    assert [(p["from"], p["decay"]) for p in sorted(record["predictions"], key=lambda p: (p["from"], p["decay"]))] == [
        (2, 4), (4, 4)
    ]  # fmt: skip
    assert record["law"]["verdict"] in ("good", "rough", "poor")
    assert re.search(r"^\| 4 \| 4 \| 8 \| ", out, re.MULTILINE), out
