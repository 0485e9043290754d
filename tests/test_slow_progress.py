"""The full suite says which slow test runs (issue 46): a line when one starts, one when it ends with its duration.

Checked in a small pytest run of its own, in one process and on two pytest-xdist workers (where a worker's output is
otherwise seen only when a test ends), with the hooks ``tests/conftest.py`` registers.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tests.conftest
from tests.support import slow_progress
from tests.support.launcher import REPO

INNER = """\
import time
import pytest

@pytest.mark.slow
def test_long():
    time.sleep(0.2)

@pytest.mark.slow
def test_long_fails():
    assert False

def test_quick():
    pass
"""


def test_the_suites_conftest_registers_the_hooks() -> None:
    for name in ("pytest_collection_finish", "pytest_runtest_logstart", "pytest_runtest_logreport",
                 "pytest_runtest_logfinish"):  # fmt: skip
        assert getattr(tests.conftest, name) is getattr(slow_progress, name), name


@pytest.mark.slow  # two pytest runs, one with two xdist workers: ~5 s idle
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "two-workers"])
def test_a_slow_test_says_when_it_starts_and_ends(workers: list[str], tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(INNER)
    # not the outer run's xdist worker variables (PYTEST_XDIST_WORKER, ...): the inner run is a session of its own
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "pytest", "-p", "tests.support.slow_progress", "-o", "markers=slow", "-q",
           "-p", "no:randomly", "-p", "no:cacheprovider", *workers, "test_inner.py"]  # fmt: skip
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    text = done.stdout + done.stderr
    assert done.returncode == 1, text  # test_long_fails
    where = r"\[(main|gw[01]) \d\d:\d\d:\d\d\]"
    # ends before starts, then by test name: under two workers either worker may run either test
    lines = sorted(
        (line for line in text.splitlines() if line.startswith("slow test")),
        key=lambda line: (line.split(" [")[0], line.split("]: ", 1)[-1]),
    )
    assert len(lines) == 4, text  # nothing for test_quick
    ended = re.fullmatch(rf"slow test ends   {where}: test_inner.py::test_long: passed in (\d+\.\d) s", lines[0])
    assert ended and float(ended[2]) >= 0.2, lines  # it sleeps 0.2 s
    assert re.fullmatch(rf"slow test ends   {where}: test_inner.py::test_long_fails: failed in \d+\.\d s", lines[1])
    assert re.fullmatch(rf"slow test starts {where}: test_inner.py::test_long", lines[2]), lines
    assert re.fullmatch(rf"slow test starts {where}: test_inner.py::test_long_fails", lines[3]), lines
    assert ("[main " in text) == (not workers)
