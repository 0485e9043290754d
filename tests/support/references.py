"""The commands of the reference runs the resume tests share (the runs themselves: tests/resume/conftest.py)."""

from __future__ import annotations

from pathlib import Path

from tests.support.launcher import REPO
from tests.support.multirank import FAULT_HOOKS, JSONL_LOGGER

__all__ = ["TINY_RESUME", "uninterrupted_overrides"]

TINY_RESUME = REPO / "yamls" / "tiny-resume.yaml"


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
