"""The main demo, yamls/tiny-wsd.yaml, through the real ``composer`` launcher and train.py, shortened to 40 batches."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.support.launcher import REPO, RunComposer, TrainRun
from tests.support.multirank import JSONL_LOGGER, read_metrics

pytestmark = pytest.mark.slow

BASE_LR = 3.0e-3  # optimizer.lr in the YAML
MAX_BATCHES = 40
LR_KEY = "lr-DecoupledAdamW/group0"
EVAL_KEY = "metrics/eval/LanguageCrossEntropy"


def wsd_multiplier(t: int) -> float:
    """The YAML's schedule written out by hand: t_warmup=20ba, t_decay=0.2dur (8 of 40 batches), sqrt, alpha_f=0.1."""
    t_warmup, t_max = 20, MAX_BATCHES
    t_decay = 0.2 * t_max
    if t < t_warmup:
        return t / t_warmup
    if t < t_max - t_decay:
        return 1.0
    return 0.1 + 0.9 * (1.0 - math.sqrt((t - (t_max - t_decay)) / t_decay))


@pytest.fixture(scope="module")
def tiny_run(run_composer: RunComposer, tmp_path_factory: pytest.TempPathFactory) -> tuple[TrainRun, Path, dict]:
    out = tmp_path_factory.mktemp("tiny-wsd")
    run = run_composer(
        REPO / "yamls" / "tiny-wsd.yaml",
        f"max_duration={MAX_BATCHES}ba",
        "eval_interval=20ba",
        f"save_folder={out / 'checkpoints'}",
        f"code_paths=[{JSONL_LOGGER}]",  # registers the `jsonl` logger
        f"loggers.jsonl.path={out / 'metrics.jsonl'}",
        cwd=out,
        timeout=240,
    )
    return run, out, read_metrics(out / "metrics.jsonl", ("",), last=True)  # every name


def test_logged_lr_is_base_lr_times_wsd(tiny_run: tuple[TrainRun, Path, dict]) -> None:
    _, _, metrics = tiny_run
    lr = metrics[LR_KEY]
    assert sorted(lr) == list(range(1, MAX_BATCHES + 1))  # LRMonitor logs at every batch end
    # LRMonitor runs at BATCH_END, after the batch counter moved to `step`; the scheduler stepped just before that,
    # at `step - 1` batches: Composer's order in Trainer._train_loop.
    for step, value in lr.items():
        assert value == pytest.approx(BASE_LR * wsd_multiplier(step - 1), rel=1e-9, abs=1e-12), step
    # the three phases are all there: warmup from 0, the plateau, the sqrt cooldown towards alpha_f
    assert lr[1] == 0.0
    assert lr[25] == pytest.approx(BASE_LR)
    assert BASE_LR * 0.1 < lr[MAX_BATCHES] < BASE_LR * 0.2


def test_eval_loss_is_finite_and_falls(tiny_run: tuple[TrainRun, Path, dict]) -> None:
    _, _, metrics = tiny_run
    losses = metrics[EVAL_KEY]
    assert sorted(losses) == [20, 40]
    assert all(math.isfinite(v) for v in losses.values())
    assert losses[40] < losses[20] < math.log(512)  # below a uniform guess over the 512-token vocabulary


def test_run_says_where_checkpoints_and_logs_are(tiny_run: tuple[TrainRun, Path, dict]) -> None:
    run, out, _ = tiny_run
    checkpoints = out / "checkpoints"
    assert f"checkpoints are in {checkpoints}" in run.stdout
    assert (checkpoints / "latest-rank0.pt").resolve().name == f"ep0-ba{MAX_BATCHES}-rank0.pt"
    assert f"logs are in {out / 'train-rank0.log'}" in run.stdout
    log = (out / "train-rank0.log").read_text()
    assert f"[batch={MAX_BATCHES}/{MAX_BATCHES}]" in log  # the console metrics are in the log file too


def test_plot_of_the_yaml_is_the_run(tiny_run: tuple[TrainRun, Path, dict], tmp_path: Path) -> None:
    """``foundry-ext plot --csv`` of the same YAML and overrides: the LR of every batch, bitwise as the run logs it."""
    import csv

    from foundry_ext.cli import main

    _, _, metrics = tiny_run
    logged = metrics[LR_KEY]  # lr_monitor at step b: the LR batch b trains with
    table = tmp_path / "lr.csv"
    argv = ["plot", str(REPO / "yamls" / "tiny-wsd.yaml"), f"max_duration={MAX_BATCHES}ba", "--csv", str(table)]
    assert main([*argv, "--out", str(tmp_path / "lr.png")]) == 0
    with open(table) as f:
        plotted = {int(row["batch"]): float(row["lr"]) for row in csv.DictReader(f)}
    assert sorted(plotted) == list(range(MAX_BATCHES))
    assert {b: plotted[b] for b in range(1, MAX_BATCHES)} == {b: logged[b] for b in range(1, MAX_BATCHES)}
    assert plotted[0] == plotted[1] == 0.0  # batches 0 and 1 both train with the multiplier at timestamp 0
