"""Reference runs shared by the resume tests: each is trained once per session, then only read (the sharded one,
:func:`tests.support.fsdp.fsdp_reference`, is shared with tests/average too)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fsdp import fsdp_reference  # noqa: F401 (a fixture: the sharded tests' reference run)
from tests.support.multirank import launch_and_wait
from tests.support.references import TINY_RESUME, trained_once, uninterrupted_overrides


@pytest.fixture(scope="session")
def uninterrupted_12ba(
    demo_data: Path, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Path:
    """One uninterrupted ``composer -n 2`` run of :func:`uninterrupted_overrides`: its folder (``checkpoints/``,
    ``metrics-rank0.jsonl``, ``metrics-rank1.jsonl``), the oracle of the kill-and-resume chain
    (test_checkpoint_faults.py) and of the two launchers on one folder (test_folder_owner.py). Read it, never write.

    The checkpoint guard's settings differ between those tests and do not reach the checkpoints (the guard keeps no
    state), so one run serves both, and the finished-run relaunch (test_finished_relaunch.py): two 2-rank launches less
    per suite (~1 min each on 2 cores).
    """
    return trained_once(
        "uninterrupted_12ba",
        tmp_path_factory,
        request,
        lambda run_dir, log: launch_and_wait(
            TINY_RESUME, uninterrupted_overrides(demo_data, run_dir), nproc=2, log=log, timeout=900
        ),
    )
