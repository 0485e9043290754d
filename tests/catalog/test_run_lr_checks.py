"""The whole LR of the run, checked before batch 0 (:mod:`foundry_ext.schedules.run_lr`), issue 21's cases.

Each case that used to train silently (LR 0 every batch, a plateau that never checks, a non-finite LR) or fail after
the model was built (ZeroDivisionError, Composer's ``t_max`` ValueError, ``Cannot subtract 4ba from 20480tok``, an
invalid ``optimizer.lr``) is checked twice: ``foundry-ext validate`` exits 2 with a line naming the YAML field, and
llm-foundry's own ``train_from_yaml`` stops in the pre-flight config transform before the tokenizer, the model or
the data are built (errors), or logs the warning line first (warnings: the run trains as configured).
"""

from __future__ import annotations

import copy
import logging
import re
import time
import traceback
from pathlib import Path
from typing import Any

import pytest

from foundry_ext.catalog.preflight import check_train_config
from foundry_ext.catalog.registry import validate_block
from foundry_ext.cli import main
from foundry_ext.config.durations import parse
from foundry_ext.config.errors import ConfigError
from foundry_ext.config.train_yaml import RunClock
from foundry_ext.schedules.run_lr import run_lr_findings
from tests.support.configs import tiny_train_config, write_train_yaml

BASE: dict[str, Any] = tiny_train_config()
TRAIN_LOSS = {"name": "reduce_lr_on_plateau", "monitor": "loss/train/total"}

# id -> (changes to BASE, the field named, a fragment of the line, "error" or "warning")
CASES: dict[str, tuple[dict[str, Any], str, str, str]] = {
    "wsd-t_max-0dur": (
        {"scheduler": {"name": "warmup_stable_decay", "t_warmup": "0ba", "t_decay": "0ba", "t_max": "0.001dur"}},
        "scheduler.t_max", "converts to 0 batches", "error",
    ),
    "wsd_periods-peak-1e30": (
        {"scheduler": {"name": "wsd_periods", "t_warmup": "2ba", "t_decay": "2ba", "periods": ["20ba", "40ba"],
                       "peaks": [1, 1e30]}},
        "scheduler", "x optimizer.lr (more than 1000x); check scheduler.peaks[1]", "error",
    ),
    "step-gamma-1e308": (
        {"scheduler": {"name": "step", "step_size": "2ba", "gamma": 1e308}},
        "scheduler", "the LR is not finite; check scheduler.gamma", "error",
    ),
    "step-step_size-0": (
        {"scheduler": {"name": "step", "step_size": "0.001dur"}}, "scheduler.step_size", "converts to 0", "error"
    ),
    "exponential-decay_period-0": (
        {"scheduler": {"name": "exponential", "gamma": 0.9, "decay_period": "0.001dur"}},
        "scheduler.decay_period", "converts to 0", "error",
    ),
    "cosine-t_max-0": ({"scheduler": {"name": "cosine", "t_max": "0.001dur"}}, "scheduler.t_max", "converts to 0",
                       "error"),
    "inv_sqrt-tok-in-batch-run": (
        {"scheduler": {"name": "inv_sqrt_with_warmup", "t_warmup": "4ba", "t_scale": "4ba", "t_cooldown": "4ba",
                       "t_max": "20480tok"}},
        "scheduler", "cannot be compared", "error",
    ),
    "constant_with_warmup-t_max-short": (
        {"scheduler": {"name": "constant_with_warmup", "t_warmup": "2ba", "t_max": "10ba"}},
        "scheduler.t_max", "shorter than the run", "error",
    ),
    "constant_with_warmup-tok-warmup": (
        {"scheduler": {"name": "constant_with_warmup", "t_warmup": "512tok"}},
        "scheduler", "cannot be compared", "error",
    ),
    "cosine_with_warmup-half": (
        {"scheduler": {"name": "cosine_with_warmup", "t_warmup": "2ba", "t_max": "0.5dur"}},
        "scheduler.t_max", "shorter than the run", "error",
    ),
    "linear_decay_with_warmup-half": (
        {"scheduler": {"name": "linear_decay_with_warmup", "t_warmup": "2ba", "t_max": "0.5dur"}},
        "scheduler.t_max", "shorter than the run", "error",
    ),
    "polynomial_with_warmup-half": (
        {"scheduler": {"name": "polynomial_with_warmup", "t_warmup": "2ba", "t_max": "0.5dur"}},
        "scheduler.t_max", "shorter than the run", "error",
    ),
    "plateau-base-step-0": (
        {"scheduler": {"name": "reduce_lr_on_plateau", "base": {"name": "step", "step_size": "0.001dur"}}},
        "scheduler.base.step_size", "converts to 0", "error",
    ),
    "optimizer-lr-nan": ({"optimizer": {"name": "decoupled_adamw", "lr": float("nan")}}, "optimizer.lr",
                         "expected a finite number > 0", "error"),
    "optimizer-lr-text-nan": ({"optimizer": {"name": "decoupled_adamw", "lr": "nan"}}, "optimizer.lr",
                              "'nan' is not allowed", "error"),
    "optimizer-lr-negative": ({"optimizer": {"name": "decoupled_adamw", "lr": -0.001}}, "optimizer.lr",
                              "-0.001 is not allowed", "error"),
    "optimizer-lr-zero": ({"optimizer": {"name": "decoupled_adamw", "lr": 0}}, "optimizer.lr", "0 is not allowed",
                          "error"),
    "plateau-check_interval-0": (
        {"scheduler": {**TRAIN_LOSS, "check_interval": "0.001dur"}},
        "scheduler.check_interval", "never checks its monitor", "warning",
    ),
    "plateau-check_interval-tok": (
        {"scheduler": {**TRAIN_LOSS, "check_interval": "1000tok"}},
        "scheduler.check_interval", "is never a multiple of 256 tok", "warning",
    ),
    "plateau-check_interval-longer": (
        {"scheduler": {**TRAIN_LOSS, "check_interval": "50ba"}},
        "scheduler.check_interval", "is longer than the run", "warning",
    ),
    "plateau-eval_interval-longer": (
        {"eval_interval": "100ba", "scheduler": {"name": "reduce_lr_on_plateau"}},
        "eval_interval", "never evaluates", "warning",
    ),
    "cosine_with_warmup-alpha_f-1e6": (
        {"scheduler": {"name": "cosine_with_warmup", "t_warmup": "2ba", "alpha_f": 1e6}},
        "scheduler", "the LR is 1e+06 x optimizer.lr (more than 1000x); check scheduler.alpha_f", "error",
    ),
    "linear-alpha_i-inf": (
        {"scheduler": {"name": "linear", "alpha_i": 5000.0}},
        "scheduler", "5000 x optimizer.lr (more than 1000x); check scheduler.alpha_i", "error",
    ),
    "wsd-ends-at-half-the-run": (
        {"scheduler": {"name": "warmup_stable_decay", "t_warmup": "0ba", "t_decay": "0.25dur", "t_max": "0.5dur"}},
        "scheduler.t_max", "the last 20 batches train at alpha_f (0)", "warning",  # issue 34: says why the LR is 0
    ),
}  # fmt: skip


def _config(tmp_path: Path, changes: dict[str, Any]) -> Path:
    return write_train_yaml(tmp_path / "cfg.yaml", BASE, changes)


@pytest.mark.parametrize("case", list(CASES))
def test_validate_stops_it_naming_the_field(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    changes, field, fragment, kind = CASES[case]
    config = _config(tmp_path, changes)
    assert main(["validate", str(config), "--strict"]) == 2
    err = capsys.readouterr().err
    prefix = "warning: " if kind == "warning" else ""
    lines = [line.removeprefix(f"{config}: ") for line in err.splitlines()]
    assert any(line.startswith(f"{prefix}{field}: ") and fragment in line for line in lines), err
    assert not re.search(r"Traceback|ZeroDivisionError|OverflowError|TypeError|ValueError", err), err


@pytest.mark.parametrize("case", [c for c, v in CASES.items() if v[3] == "error"])
def test_training_stops_before_building_anything(case: str, tmp_path: Path) -> None:
    """llm-foundry's ``train_from_yaml``: the pre-flight transform raises before tokenizer, model or data exist."""
    from llmfoundry.command_utils import train_from_yaml

    changes, field, fragment, _ = CASES[case]
    with pytest.raises(ConfigError) as raised:
        train_from_yaml(str(_config(tmp_path, changes)), [])
    frames = [frame.f_code.co_name for frame, _ in traceback.walk_tb(raised.value.__traceback__)]
    assert "preflight_transform" in frames and "build_composer_model" not in frames
    assert any(line.startswith(f"{field}: ") and fragment in line for line in str(raised.value).splitlines())


@pytest.mark.parametrize("case", [c for c, v in CASES.items() if v[3] == "warning"])
def test_training_warns_before_batch_0(case: str, caplog: pytest.LogCaptureFixture) -> None:
    """The pre-flight transform llm-foundry runs first logs the warning line (the run then trains as configured)."""
    from foundry_ext.catalog.preflight import preflight_transform
    from foundry_ext.config import notices

    changes, field, fragment, _ = CASES[case]
    cfg = copy.deepcopy(BASE)
    cfg.update(changes)
    notices._seen.clear()
    with caplog.at_level(logging.WARNING, logger="foundry_ext"):
        assert preflight_transform(cfg) is cfg
    assert any(f"warning: {field}: " in r.getMessage() and fragment in r.getMessage() for r in caplog.records)


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
    assert (found.errors, found.warnings) == ([], [])
    assert any("scheduler.milestones: [] has no milestone" in note for note in found.notes)


# torch's classes have no formula on the model: validate sweeps them through torch (the preview), and the Trainer's
# first call of the scheduler, while it is built, makes the same sweep (foundry_ext/trainer/schedulers.py)
TORCH_GROWS = {"name": "torch_lr_scheduler", "type": "ExponentialLR", "gamma": 10.0}
TORCH_LINE = "scheduler: the LR of batch 5 is 10000 x optimizer.lr (more than 1000x); check scheduler.gamma"


def test_validate_sweeps_a_torch_scheduler(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, {"scheduler": TORCH_GROWS})
    assert main(["validate", str(config)]) == 2
    assert capsys.readouterr().err.splitlines()[0] == f"{config}: {TORCH_LINE}"


def test_training_stops_a_torch_scheduler_before_building_anything(tmp_path: Path) -> None:
    """llm-foundry's ``train_from_yaml``: the torch sweep is a config transform too, before tokenizer, model, data."""
    from llmfoundry.command_utils import train_from_yaml

    with pytest.raises(ConfigError) as raised:
        train_from_yaml(str(_config(tmp_path, {"scheduler": TORCH_GROWS})), [])
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
    from foundry_ext.trainer.plateau import ReduceLROnPlateauScheduler
    from tests.support.trainer_utils import make_trainer

    notices._seen.clear()
    scheduler = ReduceLROnPlateauScheduler(monitor="loss/train/total", check_interval="50ba")
    make_trainer([scheduler], max_duration="2ep")
    lines = [line for line in capsys.readouterr().err.splitlines() if "check_interval" in line]
    assert lines == [
        "foundry-ext: warning: scheduler.check_interval: '50ba' is longer than the run (max_duration=2ep, one batch = "
        "1 ba): the plateau never checks its monitor and never cuts the LR in this run"
    ]
