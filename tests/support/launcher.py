"""Real training runs for tests: ``composer train.py YAML override...`` through the installed launcher."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["COMPOSER", "REPO", "TRAIN_PY", "RunComposer", "TrainRun", "run_train"]

REPO = Path(__file__).resolve().parents[2]
TRAIN_PY = REPO / "train.py"
# The launcher installed next to this interpreter (.venv/bin/composer); not resolved: .venv/bin/python is a symlink.
COMPOSER = Path(sys.executable).with_name("composer")


@dataclass(frozen=True)
class TrainRun:
    """What one run printed. Composer's console metrics go to stderr; train.py's closing lines to stdout."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


# run_composer(yaml_path, *overrides, timeout=300, check=True, cwd=None) -> TrainRun
RunComposer = Callable[..., TrainRun]


def run_train(yaml_path: str | Path, *overrides: str, cwd: Path, timeout: float = 300, check: bool = True) -> TrainRun:
    """Run ``composer train.py yaml_path overrides...`` in ``cwd``; fail the test if it fails or runs too long.

    A relative ``yaml_path`` is taken from the repository root. On timeout the launcher *and* the training process
    it started are killed (they run in a session of their own).
    """
    yaml_path = Path(yaml_path)
    if not yaml_path.is_absolute():
        yaml_path = REPO / yaml_path
    cmd = [str(COMPOSER), str(TRAIN_PY), str(yaml_path), *overrides]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"composer train.py {yaml_path.name} ran over {timeout:g}s:\n{_tail(stdout + stderr)}")
    run = TrainRun(proc.returncode, stdout, stderr, time.perf_counter() - start)
    if check and run.returncode != 0:
        pytest.fail(f"composer train.py {yaml_path.name} exited {run.returncode}:\n{_tail(run.output)}")
    return run


def _tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.splitlines()[-lines:])
