"""bench/bench_average.py: docs/benchmarks.md section 14 re-read from its record, and a scaled-down copy trained."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.launcher import REPO

BENCH = REPO / "bench"
RECORD = BENCH / "data" / "average.json"


def _bench() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module("bench_average")
    finally:
        sys.path.remove(str(BENCH))


def _section() -> str:
    text = (REPO / "docs" / "benchmarks.md").read_text()
    start = text.index("## 14. Averaging checkpoints")
    return text[start : text.index("\n## ", start + 1)]


def test_the_docs_figures_are_the_recorded_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """Every row of section 14's table comes from bench/data/average.json, re-made by ``--from-json``."""
    record = _bench().main(["--from-json", str(RECORD)])
    out = capsys.readouterr().out
    rows = [line for line in _section().splitlines() if line.startswith("| ")]
    budgets = record["config"]["budgets"]
    methods = 1 + len(record["config"]["windows"]) + len(record["config"]["decays"]) + 2
    assert len(rows) == 1 + len(budgets) * methods  # the header and every method at every budget
    for row in rows:
        assert row in out, row
    assert record["seeds"] == [17, 18, 19]
    for seed in map(str, record["seeds"]):
        run = record["runs"][seed]
        assert run["ema_same_training"] is True  # EMA changed no training step
        documented, logged = run["eval_path_check"]
        assert documented == pytest.approx(logged, abs=1e-6)  # the documented eval = the run's own eval


@pytest.mark.slow
def test_a_scaled_down_copy_trains(demo_data: Path, tmp_path: Path) -> None:
    """1 seed, a 20-batch stable run: two windows, one cooldown, an average then a cooldown, and EMA, at batch 20."""
    data = Path(getattr(demo_data, "path", demo_data))
    out_json = tmp_path / "record.json"
    argv = ["--seeds", "17", "--budgets", "20", "--windows", "2x1,2x2", "--decays", "0.25", "--warmup", "4",
            "--eval-interval", "20", "--save-interval", "5", "--avg-anneal-k", "2", "--avg-anneal-decay", "0.25",
            "--ema-half-life", "5", "--data", str(data), "--work", str(tmp_path / "work"),
            "--json", str(out_json)]  # fmt: skip
    record = _bench().main(argv)
    assert json.loads(out_json.read_text()) == json.loads(json.dumps(record))
    run = record["runs"]["17"]
    row = run["budgets"]["20"]
    assert run["ema_same_training"] is True
    assert run["eval_path_check"][0] == pytest.approx(run["eval_path_check"][1], abs=1e-6)
    assert set(row["average"]) == {"2x1", "2x2"} and [*row["anneal"]] == ["5"]
    assert row["average_anneal"]["decay"] == 5 and row["average_anneal"]["k"] == 2
    losses = [row["stable"], row["ema"], row["average_anneal"]["loss"], row["anneal"]["5"]["loss"]]
    losses += [v["loss"] for v in row["average"].values()]
    assert len(set(losses)) == len(losses)  # every method evaluated its own weights
