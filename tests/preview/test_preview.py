"""The preview is the run: ``foundry-ext plot --csv`` equals the LR a real ``Trainer.fit()`` applies, batch by batch.

For every scheduler family (this package's WSD, each Composer schedule by name, torch classes including SequentialLR
and CyclicLR, llm-foundry's own, and the plateau with ``--metrics`` replaying the run's own eval values), the same
scheduler block is (a) plotted by the CLI and (b) built through llm-foundry's registry into a real Composer Trainer
with ``lr_monitor``. Composer's order: 0-indexed batch b trains with the multiplier at timestamp b - 1, and
``lr_monitor`` logs the LR of batch b at step b.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
from composer.callbacks import LRMonitor
from composer.loggers import InMemoryLogger
from llmfoundry.utils.builders import build_scheduler

from foundry_ext.cli import main
from foundry_ext.config.durations import timestamp_of_batch
from tests.support.configs import write_train_yaml
from tests.support.trainer_utils import BASE_LR, make_trainer

BATCHES = 40
BATCHES_PER_EPOCH = 16  # tests/support/trainer_utils.py: 64 samples, batches of 4

FAMILIES: dict[str, dict[str, Any]] = {
    "wsd": {"name": "warmup_stable_decay", "t_warmup": "4ba", "t_decay": "10ba", "decay_type": "sqrt", "alpha_f": 0.1},
    "wsd-dur": {"name": "warmup_stable_decay", "t_warmup": "0.1dur", "t_decay": "0.3dur", "warmup_type": "cosine"},
    "step": {"name": "step", "step_size": "7ba", "gamma": 0.5},
    "multistep": {"name": "multistep", "milestones": ["10ba", "0.5dur"], "gamma": 0.3},
    "multistep_with_warmup": {"name": "multistep_with_warmup", "t_warmup": "5ba", "milestones": ["20ba", "30ba"]},
    "constant": {"name": "constant", "alpha": 0.7, "t_max": "30ba"},
    "linear": {"name": "linear", "alpha_i": 1.0, "alpha_f": 0.1, "t_max": "0.8dur"},
    "exponential-epochs": {"name": "exponential", "gamma": 0.9},  # Composer's default decay_period: 1ep
    "cosine": {"name": "cosine", "alpha_f": 0.05},
    "cosine_with_restarts": {"name": "cosine_with_restarts", "t_0": "10ba", "t_mult": 2.0, "alpha_f": 0.1},
    "polynomial": {"name": "polynomial", "power": 2.0},
    "polynomial_with_warmup": {"name": "polynomial_with_warmup", "t_warmup": "0.1dur", "power": 1.5},
    "torch-steplr": {"name": "torch_lr_scheduler", "type": "StepLR", "step_size": 6, "gamma": 0.5},
    "torch-sequential": {
        "name": "torch_lr_scheduler",
        "type": "SequentialLR",
        "schedulers": [
            {"type": "LinearLR", "start_factor": 0.1, "total_iters": 8},
            {"type": "CosineAnnealingLR", "T_max": 32},
        ],
        "milestones": [8],
    },
    "torch-cyclic": {
        "name": "torch_lr_scheduler",
        "type": "CyclicLR",
        "base_lr": 0.1,
        "max_lr": 1.0,
        "step_size_up": 5,
        "mode": "triangular2",
    },
    "torch-onecycle": {"name": "torch_lr_scheduler", "type": "OneCycleLR", "max_lr": 1.0, "total_steps": BATCHES},
    "cosine_with_warmup (llm-foundry)": {"name": "cosine_with_warmup", "t_warmup": "5ba", "alpha_f": 0.1},
    "linear_decay_with_warmup (llm-foundry)": {"name": "linear_decay_with_warmup", "t_warmup": "5ba"},
}


def config_yaml(tmp_path: Path, block: dict[str, Any], **extra: Any) -> Path:
    cfg = {
        "max_duration": f"{BATCHES}ba",
        "global_train_batch_size": 4,
        "optimizer": {"name": "decoupled_adamw", "lr": BASE_LR},
        "scheduler": block,
        **extra,
    }
    return write_train_yaml(tmp_path / "cfg.yaml", cfg)


def plot_rows(tmp_path: Path, config: Path, *extra: str) -> dict[int, float]:
    table = tmp_path / "lr.csv"
    argv = ["plot", str(config), "--csv", str(table), "--out", str(tmp_path / "lr.png"), "--points", "1000"]
    assert main([*argv, "--batches-per-epoch", str(BATCHES_PER_EPOCH), *extra]) == 0
    with open(table) as f:
        return {int(row["batch"]): float(row["lr"]) for row in csv.DictReader(f)}


def fit(block: dict[str, Any], **kwargs: Any) -> tuple[dict[int, float], dict[int, float], InMemoryLogger]:
    """A real fit: the LR each batch trained with (read at BATCH_START) and what lr_monitor logged, by step."""
    scheduler = build_scheduler(block["name"], {k: v for k, v in block.items() if k != "name"})
    logger = InMemoryLogger()
    trainer, recorder = make_trainer(
        [scheduler], max_duration=f"{BATCHES}ba", callbacks=[LRMonitor()], loggers=[logger], **kwargs
    )
    trainer.fit()
    monitored = {ts.batch.value: value for ts, value in logger.data["lr-SGD/group0"]}
    trainer.close()
    return {b: lrs[0] for b, lrs in recorder.lrs.items()}, monitored, logger


@pytest.mark.parametrize("family", list(FAMILIES))
def test_plot_equals_the_trainer_at_every_batch(family: str, tmp_path: Path) -> None:
    block = FAMILIES[family]
    plotted = plot_rows(tmp_path, config_yaml(tmp_path, block))
    trained, monitored, _ = fit(block)
    assert sorted(plotted) == sorted(trained) == list(range(BATCHES))  # no batch 40: it never trains
    assert plotted == trained  # bitwise: the same multiplier, times the same base LR
    # lr_monitor logs the LR of batch b at step b (b >= 1; its last value, at step 40, is for no batch)
    assert {b: monitored[b] for b in range(1, BATCHES)} == {b: plotted[b] for b in range(1, BATCHES)}


def test_batch_b_trains_with_the_multiplier_of_timestamp_b_minus_1(tmp_path: Path) -> None:
    """With a linear warmup, batches 0 and 1 both train at 0: the one rule, stated on named batches."""
    assert [timestamp_of_batch(b) for b in (0, 1, 2, 10)] == [0, 0, 1, 9]
    plotted = plot_rows(tmp_path, config_yaml(tmp_path, FAMILIES["wsd"]))
    assert [plotted[b] / BASE_LR for b in (0, 1, 2, 3, 4, 5)] == pytest.approx([0.0, 0.0, 0.25, 0.5, 0.75, 1.0])


def test_plateau_cuts_land_where_the_trainer_applies_them(tmp_path: Path) -> None:
    """Replay the run's own eval values through ``plot --metrics``: the cuts fall on the same batches."""
    block = {
        "name": "reduce_lr_on_plateau",
        "monitor": "metrics/eval/Scripted",
        "factor": 0.5,
        "patience": 1,
        "t_warmup": "3ba",
        "base": {"name": "warmup_stable_decay", "t_decay": "10ba"},
    }
    values = [5.0, 4.0, 4.0, 4.0, 3.0, 3.0, 3.0, 3.0]  # evaluations at batches 5, 10, ..., 40
    trained, _, logger = fit(block, eval_values=values, eval_interval="5ba")
    evals = [(ts.batch.value, float(v)) for ts, v in logger.data["metrics/eval/Scripted"]]
    assert [b for b, _ in evals] == [5, 10, 15, 20, 25, 30, 35, 40]
    metrics = tmp_path / "metrics.csv"
    metrics.write_text("batch,value\n" + "".join(f"{b},{v!r}\n" for b, v in evals))
    plotted = plot_rows(tmp_path, config_yaml(tmp_path, block), "--metrics", str(metrics))
    assert sorted(plotted) == list(range(BATCHES))
    assert plotted == pytest.approx(trained, rel=1e-12, abs=0.0)
    cut_batches = [b for b in range(1, BATCHES) if trained[b] < trained[b - 1] * 0.6]
    assert cut_batches == [20, 35]  # evaluations at 20 and 35 cut; the LR of the very next batch is halved
