"""``plot --metrics`` reads a run folder of MLflow's local file store, written by the real MLflow client."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from foundry_ext.cli import main
from tests.support.launcher import REPO

CSV = REPO / "docs" / "img" / "plateau-metrics.csv"
MONITOR = "metrics/eval/LanguageCrossEntropy"
ARGS = [  # docs/cli.md's plateau example
    "yamls/tiny-plateau.yaml",
    "max_duration=10000ba",
    "scheduler.t_warmup=500ba",
    "scheduler.patience=2",
    "scheduler.threshold=0.01",
    "scheduler.threshold_mode=rel",
]


def _mlflow_run(root: Path, monitor: str = MONITOR) -> Path:
    import mlflow

    rows = [r for r in csv.reader(CSV.open()) if r and r[0].strip().isdigit()]
    mlflow.set_tracking_uri(f"file:{root}")
    with mlflow.start_run() as run:
        for batch, value in rows:
            mlflow.log_metric(monitor, float(value), step=int(batch))  # as Composer's MLFlowLogger logs it
        mlflow.log_metric("loss/train/total", 3.0, step=0)
    return root / run.info.experiment_id / run.info.run_id


def test_an_mlflow_run_gives_the_cuts_of_the_same_values_as_csv(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _mlflow_run(tmp_path / "mlruns")
    assert main(["plot", *ARGS, "--metrics", str(CSV), "--out", str(tmp_path / "a.png")]) == 0
    from_csv = [line for line in capsys.readouterr().out.splitlines() if "cut" in line]
    assert main(["plot", *ARGS, "--metrics", str(run), "--out", str(tmp_path / "b.png")]) == 0
    from_mlflow = [line for line in capsys.readouterr().out.splitlines() if "cut" in line]
    assert len(from_csv) > 2 and from_mlflow == from_csv


def test_an_mlflow_run_without_the_monitor_names_what_it_logged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _mlflow_run(tmp_path / "mlruns", monitor="metrics/eval/LanguageCrossEntropi")
    assert main(["plot", *ARGS, "--metrics", str(run), "--out", str(tmp_path / "a.png")]) == 2
    err = capsys.readouterr().err
    assert f"the run has no metric '{MONITOR}' (did you mean 'metrics/eval/LanguageCrossEntropi'?)" in err
    assert "it logged: loss/train/total, metrics/eval/LanguageCrossEntropi\n" in err
