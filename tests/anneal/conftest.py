"""Checkpoints of real (tiny) Composer runs for the anneal tests: a stable run, one in its warmup, one in a decay."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.configs import write_train_yaml

LR = 1e-3


@dataclass(frozen=True)
class Runs:
    root: Path
    stable: Path  # the stable run's save folder: ep0-ba4, ep0-ba8, latest-rank0.pt -> ep0-ba8
    warmup: Path  # a checkpoint at batch 4 of a run whose warmup is 20 batches
    decaying: Path  # a checkpoint at batch 12 of a branch decaying from batch 8 to 16
    config: Path  # the stable run's YAML


def stable_config(save_folder: Path) -> dict:
    from tests.support.configs import tiny_train_config

    return tiny_train_config(
        max_duration="1000ba",
        t_warmup="2ba",
        scheduler={"name": "warmup_stable_decay", "t_warmup": "2ba", "t_decay": "0ba"},
        optimizer={"name": "decoupled_adamw", "lr": LR},
        save_folder=str(save_folder),
        run_name="stable",
    )


def _train(schedulers: list, folder: Path, duration: str, max_duration: str, run_name: str, **kwargs) -> None:
    from composer.optim import DecoupledAdamW

    from tests.support.trainer_utils import make_trainer

    trainer, _ = make_trainer(
        schedulers,
        max_duration=max_duration,
        save_folder=str(folder),
        save_interval="4ba",
        train_size=4000,
        optimizer=lambda m: DecoupledAdamW(m.parameters(), lr=LR),
        run_name=run_name,
        **kwargs,
    )
    trainer.fit(duration=duration)
    trainer.close()


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    from foundry_ext import WarmupStableDecayScheduler as WSD

    root = tmp_path_factory.mktemp("anneal-runs")
    stable = root / "stable" / "checkpoints"
    _train([WSD(t_warmup="2ba", t_decay="0ba", t_max="1000ba")], stable, "8ba", "1000ba", "stable")
    _train([WSD(t_warmup="20ba", t_decay="0ba", t_max="1000ba")], root / "warm", "4ba", "1000ba", "warm")
    _train(
        [WSD(t_warmup="2ba", t_decay_start="8ba")], root / "decaying", "4ba", "16ba", "decaying",
        load_path=str(stable / "ep0-ba8-rank0.pt"),
    )  # fmt: skip
    config = root / "stable.yaml"
    write_train_yaml(config, stable_config(stable))
    return Runs(root, stable, root / "warm" / "ep0-ba4-rank0.pt", root / "decaying" / "ep0-ba12-rank0.pt", config)
