"""The commands of the reference runs the resume tests share (the runs themselves: tests/resume/conftest.py)."""

from __future__ import annotations

from pathlib import Path

from tests.support.launcher import REPO
from tests.support.multirank import FAULT_HOOKS, JSONL_LOGGER

__all__ = ["FSDP_ENV", "TINY_FSDP", "TINY_RESUME", "fsdp_overrides", "uninterrupted_overrides"]

TINY_RESUME = REPO / "yamls" / "tiny-resume.yaml"
TINY_FSDP = REPO / "yamls" / "tiny-fsdp.yaml"
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


def fsdp_overrides(data: Path, run_dir: Path) -> list[str]:
    """yamls/tiny-fsdp.yaml (FSDP2, sharded checkpoints; launch with :data:`FSDP_ENV`) for 12 batches, a checkpoint
    and an evaluation every 4, autoresume and the guard, JSONL metrics per rank."""
    return [
        f"variables.data_local={data}",
        f"save_folder={run_dir}/checkpoints",
        "max_duration=12ba",
        "save_interval=4ba",
        "eval_interval=4ba",
        "autoresume=true",
        "save_overwrite=false",
        "callbacks.checkpoint_guard={}",
        f"code_paths=[{JSONL_LOGGER},{FAULT_HOOKS}]",
        f"loggers.jsonl.path={run_dir}/metrics-rank{{rank}}.jsonl",
    ]
