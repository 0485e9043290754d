"""The commands of the reference runs the resume tests share (the runs themselves: tests/resume/conftest.py and, for
the sharded path, tests/support/fsdp.py), and :func:`trained_once`, which trains such a run once per session."""

from __future__ import annotations

import fcntl
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.launcher import REPO
from tests.support.multirank import FAULT_HOOKS, JSONL_LOGGER

__all__ = ["FSDP_ENV", "TINY_RESUME", "trained_once", "uninterrupted_overrides"]

TINY_RESUME = REPO / "yamls" / "tiny-resume.yaml"
FSDP_ENV = {"FSDP_VERSION": "2"}  # FSDP2: runs on CPU with gloo (Composer's default FSDP1 needs CUDA)


def uninterrupted_overrides(data: Path, run_dir: Path) -> list[str]:
    """yamls/tiny-resume.yaml for 12 batches, a checkpoint every 2, autoresume and the guard, JSONL metrics per rank."""
    return [
        f"variables.data_local={data}",
        f"save_folder={run_dir}/checkpoints",
        "max_duration=12ba",
        "save_interval=2ba",
        "autoresume=true",
        "save_overwrite=false",
        "callbacks.checkpoint_guard={}",
        f"code_paths=[{JSONL_LOGGER},{FAULT_HOOKS}]",
        f"loggers.jsonl.path={run_dir}/metrics-rank{{rank}}.jsonl",
    ]


def trained_once(
    name: str,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
    train: Callable[[Path, Path], tuple[int, str]],
) -> Path:
    """The folder ``name`` of a reference run, trained by ``train(run_dir, log)`` once for the whole session.

    Under pytest-xdist each worker has its own base folder inside the session's: the run goes in the session's, where
    the first worker to need it trains it while the others wait on the lock, then read it. ``train`` returns the
    launcher's status and output (:func:`tests.support.multirank.launch_and_wait`); a failure fails the test with the
    output's tail.
    """
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if hasattr(request.config, "workerinput") else base
    run_dir = shared / name
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (run_dir / "trained").exists():
            return run_dir
        run_dir.mkdir(exist_ok=True)
        status, output = train(run_dir, shared / f"{name}.log")
        assert status == 0, output[-4000:]
        (run_dir / "trained").touch()
        return run_dir
