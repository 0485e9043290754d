"""Errors found while training, before the first batch, end the process with one line and status 2 (issue 34).

The pre-flight config transforms, the scheduler's first call while the Trainer is built and a plateau's checks at
``FIT_START`` raise :class:`~foundry_ext.config.errors.RunStopped`: still a ``ConfigError`` to code that catches it,
and a ``SystemExit(2)`` to Python, which prints no traceback for it. Before, llm-foundry's traceback followed the line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from foundry_ext.config.errors import ConfigError, RunStopped
from tests.support.configs import tiny_train_config, write_train_yaml
from tests.support.launcher import REPO


def _run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_run_stopped_is_a_config_error_and_an_exit_with_status_2() -> None:
    error = RunStopped("scheduler.t_max", "bad")
    assert isinstance(error, ConfigError) and isinstance(error, ValueError) and isinstance(error, SystemExit)
    assert error.code == 2 and str(error) == "scheduler.t_max: bad" and error.field == "scheduler.t_max"


@pytest.mark.slow
def test_train_py_stops_in_the_preflight_with_one_line_and_status_2(tmp_path: Path) -> None:
    """``python train.py`` (what each rank of ``composer train.py`` runs): the line, status 2, no traceback."""
    cfg = tiny_train_config(scheduler={"name": "warmup_stable_decay", "t_warmup": "4ba", "alpha_f": 1.5})
    config = write_train_yaml(tmp_path / "bad.yaml", cfg)
    done = _run([str(REPO / "train.py"), str(config)], tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("foundry-ext: error: ")]
    assert errors == ["foundry-ext: error: scheduler.alpha_f: 1.5 is out of range; expected a number in [0, 1]"], lines
    assert "Traceback" not in done.stderr and "ConfigError" not in done.stderr, done.stderr[-3000:]


@pytest.mark.slow
def test_the_trainers_first_call_stops_with_one_line_and_status_2(tmp_path: Path) -> None:
    """A run in epochs: only the Trainer's dataloader says that t_max 0.01dur is 0 batches; uncaught, exit 2."""
    script = tmp_path / "build.py"
    script.write_text(
        textwrap.dedent(
            """
            from foundry_ext.trainer.schedulers import WarmupStableDecayScheduler
            from tests.support.trainer_utils import make_trainer

            scheduler = WarmupStableDecayScheduler(t_warmup="0ba", t_decay="0ba", t_max="0.01dur")
            make_trainer([scheduler], max_duration="2ep")
            print("built")
            """
        )
    )
    done = _run([str(script)], tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "built" not in done.stdout
    assert done.stderr.splitlines()[-1].startswith(
        "foundry-ext: error: scheduler.t_max: '0.01dur' converts to 0 batches"
    )
    assert "Traceback" not in done.stderr, done.stderr[-3000:]


@pytest.mark.slow
def test_train_py_says_validates_one_line_for_a_key_given_twice(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Issue 46: ``spike_guard`` twice in one YAML ended train.py in OmegaConf's ConstructorError traceback."""
    from foundry_ext.cli import main

    config = tmp_path / "twice.yaml"
    cfg = tiny_train_config()
    cfg.pop("callbacks", None)
    config.write_text(yaml.safe_dump(cfg) + "callbacks:\n  spike_guard:\n    window: 64\n  spike_guard: {}\n")
    assert main(["validate", str(config)]) == 2
    said = capsys.readouterr().err.strip().removeprefix("foundry-ext validate: error: ")
    assert "found duplicate key spike_guard" in said, said
    done = _run([str(REPO / "train.py"), str(config)], tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.strip().splitlines() == [f"foundry-ext: error: {said}"], done.stderr[-3000:]
