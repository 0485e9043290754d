"""The whole LR of the run, checked before batch 0 (:mod:`foundry_ext.schedules.run_lr`): its cost, torch schedulers,
and the checks a real Trainer makes with what only the run knows.

Issue 21's cases themselves (each used to train silently or fail after the model was built) are rows of the bad-config
corpus, :mod:`tests.catalog.corpus` (``RUN_LR_BAD``): ``foundry-ext validate`` and llm-foundry's ``train_from_yaml``
check each in ``tests/catalog/test_bad_configs.py``.
"""

from __future__ import annotations

import copy
import time
import traceback
from pathlib import Path
from typing import Any

import pytest

from foundry_ext.catalog.findings import Findings
from foundry_ext.catalog.preflight import check_train_config
from foundry_ext.catalog.registry import validate_block
from foundry_ext.cli import main
from foundry_ext.config.durations import parse
from foundry_ext.config.errors import ConfigError
from foundry_ext.config.train_yaml import RunClock
from foundry_ext.schedules.run_lr import run_lr_findings
from tests.support.configs import tiny_train_config, write_train_yaml

BASE: dict[str, Any] = tiny_train_config()


def test_whole_run_sweep_is_cheap() -> None:
    """A million-batch run is swept (at most MAX_POINTS evenly spaced batches) within a second or two of CPU."""
    model = validate_block({"name": "warmup_stable_decay", "t_warmup": "1000ba", "t_decay": "0.2dur"}, "scheduler")
    clock = RunClock(parse("1000000ba"), samples_per_batch=4, tokens_per_batch=256)
    start = time.process_time()
    assert run_lr_findings(model, clock) == ([], [])
    assert time.process_time() - start < 5


def test_valid_multistep_without_milestones_is_a_note() -> None:
    """Composer's own tests build ``multistep_with_warmup`` with ``milestones: []`` (warmup, then constant)."""
    cfg = copy.deepcopy(BASE)
    cfg["scheduler"] = {"name": "multistep_with_warmup", "t_warmup": "2ba", "milestones": []}
    found = check_train_config(cfg)
    assert isinstance(found, Findings)  # the one result type the pre-flight's modules fill
    assert (found.errors, found.warnings) == ([], [])
    assert any("scheduler.milestones: [] has no milestone" in note for note in found.notes)


# torch's classes have no formula on the model: validate sweeps them through torch (the preview), and the Trainer's
# first call of the scheduler, while it is built, makes the same sweep (foundry_ext/trainer/schedulers.py)
TORCH_GROWS = {"name": "torch_lr_scheduler", "type": "ExponentialLR", "gamma": 10.0}
TORCH_LINE = "scheduler: the LR of batch 5 is 10000 x optimizer.lr (more than 1000x); check scheduler.gamma"


def test_validate_sweeps_a_torch_scheduler(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_train_yaml(tmp_path / "cfg.yaml", BASE, {"scheduler": TORCH_GROWS})
    assert main(["validate", str(config)]) == 2
    assert capsys.readouterr().err.splitlines()[0] == f"{config}: {TORCH_LINE}"


def test_training_stops_a_torch_scheduler_before_building_anything(tmp_path: Path) -> None:
    """llm-foundry's ``train_from_yaml``: the torch sweep is a config transform too, before tokenizer, model, data."""
    from llmfoundry.command_utils import train_from_yaml

    with pytest.raises(ConfigError) as raised:
        train_from_yaml(str(write_train_yaml(tmp_path / "cfg.yaml", BASE, {"scheduler": TORCH_GROWS})), [])
    frames = [frame.f_code.co_name for frame, _ in traceback.walk_tb(raised.value.__traceback__)]
    assert "torch_run_transform" in frames and "build_composer_model" not in frames
    assert str(raised.value) == TORCH_LINE


def test_trainer_stops_a_torch_scheduler_before_batch_0(capsys: pytest.CaptureFixture[str]) -> None:
    """A real Trainer: the line is printed first, then the ConfigError; no batch is trained."""
    from foundry_ext.trainer.torch_lr import TorchLRScheduler
    from tests.support.trainer_utils import make_trainer

    kwargs = {k: v for k, v in TORCH_GROWS.items() if k != "name"}
    with pytest.raises(ConfigError) as raised:
        make_trainer([TorchLRScheduler(**kwargs)], max_duration="40ba")
    assert str(raised.value) == TORCH_LINE
    assert capsys.readouterr().err.splitlines()[0] == f"foundry-ext: error: {TORCH_LINE}"
    # growth that stays in bounds over the run trains: 1.1 ** 39 = 41 x
    make_trainer([TorchLRScheduler(type="ExponentialLR", gamma=1.1)], max_duration="40ba")[0].fit()


def test_trainer_checks_the_run_in_epochs_with_the_dataloader_length(capsys: pytest.CaptureFixture[str]) -> None:
    """A run in epochs: the YAML alone may not say how many batches an epoch has; the Trainer's dataloader does."""
    from foundry_ext.trainer.schedulers import WarmupStableDecayScheduler
    from tests.support.trainer_utils import make_trainer

    # 2 epochs of 16 batches: t_max 0.01dur is 0 batches, which the formula needs positive
    with pytest.raises(ConfigError, match=r"^scheduler\.t_max: '0\.01dur' converts to 0 batches"):
        make_trainer([WarmupStableDecayScheduler(t_warmup="0ba", t_decay="0ba", t_max="0.01dur")], max_duration="2ep")
    assert capsys.readouterr().err.startswith("foundry-ext: error: scheduler.t_max: '0.01dur' converts to 0 batches")


def test_composer_extreme_needs_no_run_length() -> None:
    """A run in epochs whose YAML does not say the batches per epoch: the alpha bound is still checked."""
    model = validate_block({"name": "cosine_with_warmup", "t_warmup": "2ba", "alpha_f": 1e6}, "scheduler")
    errors, _ = run_lr_findings(model, RunClock(parse("2ep")))
    assert [str(e) for e in errors] == [
        "scheduler: the LR is 1e+06 x optimizer.lr (more than 1000x); check scheduler.alpha_f"
    ]


def test_trainer_warns_of_a_plateau_that_never_checks_in_a_run_in_epochs(capsys: pytest.CaptureFixture[str]) -> None:
    """A train-loss plateau in a run of 2 epochs of 16 batches: ``check_interval: 50ba`` never closes; one warning."""
    from foundry_ext.config import notices
    from foundry_ext.trainer.plateau.scheduler import ReduceLROnPlateauScheduler
    from tests.support.trainer_utils import make_trainer

    notices._seen.clear()
    scheduler = ReduceLROnPlateauScheduler(monitor="loss/train/total", check_interval="50ba")
    make_trainer([scheduler], max_duration="2ep")
    lines = [line for line in capsys.readouterr().err.splitlines() if "check_interval" in line]
    assert lines == [
        "foundry-ext: warning: scheduler.check_interval: '50ba' is longer than the run (max_duration=2ep, one batch = "
        "1 ba): the plateau never checks its monitor and never cuts the LR in this run"
    ]
