"""A law fitted on MLflow runs (a local file store) written by a real ``Trainer.fit()`` with ``lr_monitor``.

Composer's MLflow logger keeps its default ``log_duplicated_metric_every_n_steps`` (100), so repeated LR values are
dropped and the reader must fill them in. The eval metric is scripted: each run's values are a known multi-power law
evaluated on the LR the optimizer really used in a first run of the same schedule, so the fit must recover that law.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from composer.callbacks import LRMonitor
from composer.loggers import MLFlowLogger
from composer.optim import CosineAnnealingWithWarmupScheduler, MultiStepWithWarmupScheduler

from foundry_ext.cli import main
from foundry_ext.law import multipower
from foundry_ext.law.fit import fit
from foundry_ext.law.runs import RunError, read_mlflow
from foundry_ext.law.trace import Trace
from tests.support.trainer_utils import make_trainer

LAW = (2.0, 0.5, 0.5, 3.0, 2.0, 0.6, 0.6)  # L0, A, alpha, B, C, beta, gamma for LRs around 0.1
BATCHES, EVERY = 60, 3
METRIC = "metrics/eval/Scripted"
SCHEDULES = {
    "cosine": lambda: CosineAnnealingWithWarmupScheduler(t_warmup="6ba", alpha_f=0.1),
    "steps": lambda: MultiStepWithWarmupScheduler(t_warmup="6ba", milestones=["25ba", "45ba"], gamma=0.3),
}


def trained_lrs(name: str) -> np.ndarray:
    trainer, recorder = make_trainer([SCHEDULES[name]()], max_duration=f"{BATCHES}ba")
    trainer.fit()
    trainer.close()
    return np.array([recorder.lrs[b][0] for b in range(BATCHES)])


def mlflow_run(tmp_path: Path, name: str) -> tuple[Path, np.ndarray, np.ndarray]:
    """Train ``name`` with a scripted eval metric following :data:`LAW`; the run folder, its LRs and losses."""
    lrs = trained_lrs(name)
    steps = np.arange(EVERY, BATCHES + 1, EVERY)
    values = multipower.loss_exact(LAW, lrs, steps)
    root = tmp_path / name / "mlruns"
    logger = MLFlowLogger(tracking_uri=f"file://{root}", experiment_name="law", run_name=name, log_system_metrics=False)
    trainer, recorder = make_trainer([SCHEDULES[name]()], max_duration=f"{BATCHES}ba", eval_values=list(values),
                                     eval_interval=f"{EVERY}ba", loggers=[logger], callbacks=[LRMonitor()])  # fmt: skip
    trainer.fit()
    trainer.close()  # ends the MLflow run: every queued point is written
    assert [recorder.lrs[b][0] for b in range(BATCHES)] == pytest.approx(lrs.tolist(), rel=1e-15)
    (run_dir,) = {p.parent.parent for p in root.glob("*/*/metrics/lr-SGD")}
    return run_dir, lrs, values


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, np.ndarray, np.ndarray]]:
    tmp = tmp_path_factory.mktemp("mlflow")
    return {name: mlflow_run(tmp, name) for name in SCHEDULES}


def test_the_reader_gives_the_lr_the_optimizer_used_and_the_logged_losses(runs) -> None:
    for name, (run_dir, lrs, values) in runs.items():
        trace = read_mlflow(str(run_dir), METRIC)
        assert trace.name == name
        logged = len((run_dir / "metrics/lr-SGD/group0").read_text().splitlines())
        if name == "steps":  # constant stretches: the logger dropped repeated values, the reader filled them in
            assert logged < BATCHES - 20
        assert trace.lr.tolist() == pytest.approx(lrs.tolist(), rel=1e-12)
        assert trace.steps.tolist() == list(range(EVERY, BATCHES + 1, EVERY))
        assert trace.loss.tolist() == pytest.approx(values.tolist(), rel=1e-12)
        # found in the trace: Composer's 6-batch warmup reaches the peak at batch 7 (batch b trains with the
        # multiplier at timestamp b - 1; batches 0 and 1 both with the one at 0)
        assert trace.warmup == 8 and trace.lr[7] == pytest.approx(0.1) and trace.lr[6] < 0.1


def test_the_law_is_recovered_from_the_mlflow_runs(runs, tmp_path: Path, capsys) -> None:
    traces = [read_mlflow(str(d), METRIC) for d, _, _ in runs.values()]
    result = fit(traces)
    assert all(q.worst_rel < 5e-4 for q in result.runs)  # the fit stops at scipy's default tolerances
    # a held-out schedule: a linear decay; predicted within 0.1% of the law
    lr = np.concatenate([np.linspace(0.1 / 6, 0.1, 6), np.linspace(0.1, 0.01, 54)])
    steps = np.arange(10, 61, 5)
    truth = multipower.loss_exact(LAW, lr, steps)
    pred = multipower.Design([(Trace("lin", lr), steps)]).predict(list(result.params.values()))
    assert np.max(np.abs(pred - truth) / truth) < 1e-3
    # the same through the CLI
    out = tmp_path / "law.json"
    assert main(["law", "fit", *(str(d) for d, _, _ in runs.values()), "--metric", METRIC, "--out", str(out)]) == 0
    assert "multipower law fitted on 2 runs" in capsys.readouterr().out


def test_a_run_without_the_metric_lists_the_metrics_it_has(runs, capsys) -> None:
    run_dir = runs["cosine"][0]
    with pytest.raises(RunError) as e:
        read_mlflow(str(run_dir))
    assert "no metric 'metrics/eval/LanguageCrossEntropy' (--metric); metrics it has: " in str(e.value)
    assert "lr-SGD/group0" in str(e.value) and METRIC in str(e.value)
    assert main(["law", "fit", str(run_dir), str(runs["steps"][0])]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_predict_traces_an_mlflow_run_and_prints_its_last_measured_loss_beside(runs, tmp_path: Path, capsys) -> None:
    """``law predict --trace RUN --metric M``: the run's own LR, its measured losses beside the prediction."""
    out = tmp_path / "law.json"
    assert main(["law", "fit", *(str(d) for d, _, _ in runs.values()), "--metric", METRIC, "--out", str(out)]) == 0
    capsys.readouterr()
    run_dir, lrs, values = runs["steps"]
    csv_path = tmp_path / "pred.csv"
    assert main(["law", "predict", str(out), "--trace", str(run_dir), "--metric", METRIC, "--csv", str(csv_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    law = __import__("json").loads(out.read_text())
    pred = multipower.Design([(Trace("p", lrs), np.array([BATCHES]))]).predict(list(law["params"].values()))[0]
    assert lines[0].startswith(f"steps: {BATCHES} batches; predicted multipower loss after the last batch: {pred:.4f}")
    # the eval metric is logged after batch 60, the last one: measured and predicted side by side, with the error
    assert lines[1].startswith("no band: the law was fitted on 2 runs")
    assert lines[2] == (f"measured after the last batch: {values[-1]:.4f}; predicted {pred:.4f} "
                        f"({(pred - values[-1]) / values[-1]:+.2%})")  # fmt: skip
    rows = csv_path.read_text().splitlines()
    measured = [r.split(",")[-1] for r in rows[1:] if r.split(",")[-1]]
    assert [float(m) for m in measured] == pytest.approx(values.tolist(), rel=1e-12)
    # a missing metric is one line, exit 2
    assert main(["law", "predict", str(out), "--trace", str(run_dir), "--metric", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no metric 'nope'" in err
