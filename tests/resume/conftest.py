"""Reference runs shared by the resume tests: each is trained once per session, then only read."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.multirank import launch, lost_shm_race
from tests.support.references import TINY_RESUME, uninterrupted_overrides


@pytest.fixture(scope="session")
def uninterrupted_12ba(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One uninterrupted ``composer -n 2`` run of :func:`uninterrupted_overrides`: its folder (``checkpoints/``,
    ``metrics-rank0.jsonl``, ``metrics-rank1.jsonl``), the oracle of the kill-and-resume chain
    (test_checkpoint_faults.py) and of the two launchers on one folder (test_folder_owner.py). Read it, never write.

    The checkpoint guard's settings differ between those tests and do not reach the checkpoints (the guard keeps no
    state), so one run serves both: a 2-rank launch less per suite (~1 min on 2 cores).
    """
    run_dir = tmp_path_factory.mktemp("uninterrupted")
    for attempt in range(2):
        log = run_dir.parent / f"{run_dir.name}-{attempt}.log"
        proc = launch(TINY_RESUME, uninterrupted_overrides(demo_data, run_dir), nproc=2, log=log)
        status = proc.wait(timeout=900)
        if status == 0:
            return run_dir
        assert attempt == 0 and lost_shm_race(log.read_text()), log.read_text()[-4000:]
    raise AssertionError("unreachable")
