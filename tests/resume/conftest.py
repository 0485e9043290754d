"""Reference runs shared by the resume tests: each is trained once per session, then only read."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.multirank import launch_and_wait
from tests.support.references import (
    FSDP_ENV,
    TINY_FSDP,
    TINY_RESUME,
    fsdp_overrides,
    trained_once,
    uninterrupted_overrides,
)


@pytest.fixture(scope="session")
def uninterrupted_12ba(
    demo_data: Path, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Path:
    """One uninterrupted ``composer -n 2`` run of :func:`uninterrupted_overrides`: its folder (``checkpoints/``,
    ``metrics-rank0.jsonl``, ``metrics-rank1.jsonl``), the oracle of the kill-and-resume chain
    (test_checkpoint_faults.py) and of the two launchers on one folder (test_folder_owner.py). Read it, never write.

    The checkpoint guard's settings differ between those tests and do not reach the checkpoints (the guard keeps no
    state), so one run serves both, and the finished-run relaunch (test_clean_exit.py): two 2-rank launches less per
    suite (~1 min each on 2 cores).
    """
    return trained_once(
        "uninterrupted_12ba",
        tmp_path_factory,
        request,
        lambda run_dir, log: launch_and_wait(
            TINY_RESUME, uninterrupted_overrides(demo_data, run_dir), nproc=2, log=log, timeout=900
        ),
    )


@pytest.fixture(scope="session")
def uninterrupted_fsdp_12ba(
    demo_data: Path, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Path:
    """One uninterrupted ``FSDP_VERSION=2 composer -n 2`` run of :func:`fsdp_overrides` (sharded checkpoints
    ``ep0-ba4``, ``ep0-ba8``, ``ep0-ba12``): the oracle of the sharded kill-and-resume chain
    (test_checkpoint_guard_sharded.py) and the finished run of test_finished_relaunch.py. Read it, never write.
    Trained once per session, as :func:`uninterrupted_12ba`."""
    return trained_once(
        "uninterrupted_fsdp_12ba",
        tmp_path_factory,
        request,
        lambda run_dir, log: launch_and_wait(
            TINY_FSDP, fsdp_overrides(demo_data, run_dir), nproc=2, log=log, env=FSDP_ENV, timeout=900
        ),
    )
