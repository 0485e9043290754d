"""``scripts/test.sh``'s own option, ``FOUNDRY_EXT_TEST_WORKERS`` (docs/contributing.md, "Test tiers")."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.support.launcher import REPO


@pytest.mark.parametrize("value", ["abc", "0", "-1", "07", "1.5", "2 3", "99999999999999999999", "12345"])
def test_a_bad_worker_count_is_one_line_before_anything_is_set_up(value: str) -> None:
    """Read first: one line naming it, exit 2, neither setup nor pytest started (nothing on stdout)."""
    env = {**os.environ, "FOUNDRY_EXT_TEST_WORKERS": value}
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "test.sh")], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    most = 4 * len(os.sched_getaffinity(0))  # nproc's count
    assert done.stderr.splitlines() == [
        f"test.sh: error: FOUNDRY_EXT_TEST_WORKERS='{value}': expected a whole number of workers from 1 to {most} "
        "(4 per core here)"
    ]
