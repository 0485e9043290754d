"""tests/support/cpu_profile.py: one JSON line per test with the CPU of the processes it waited for (issue 42)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.launcher import REPO

INNER = """
import subprocess, sys

def test_burns_a_child():
    subprocess.run([sys.executable, "-c", "sum(i * i for i in range(3_000_000))"], check=True)

def test_burns_itself():
    sum(i * i for i in range(3_000_000))
"""


@pytest.mark.slow  # a pytest run of its own
def test_each_test_gets_its_own_and_its_childrens_cpu(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(INNER)
    out = tmp_path / "cpu.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO), "FOUNDRY_EXT_CPU_PROFILE": str(out)}
    cmd = [sys.executable, "-m", "pytest", "-p", "tests.support.cpu_profile", "-q", "-p", "no:randomly",
           "-p", "no:cacheprovider", "test_inner.py"]  # fmt: skip
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {row["test"]: row for row in map(json.loads, out.read_text().splitlines())}
    child, own = rows["test_inner.py::test_burns_a_child"], rows["test_inner.py::test_burns_itself"]
    # the same loop, once in a child process and once in the test's own: each counted where it ran
    assert child["children"] > 0.05 and child["children"] > 5 * child["self"], child
    assert own["self"] > 0.05 and own["children"] == 0, own
    assert all(row["wall"] >= row["self"] * 0.5 for row in rows.values()), rows
    # one timeline: the second test starts after the first (run in file order, one process)
    assert {row["worker"] for row in rows.values()} == {"main"}, rows
    assert child["start"] + child["wall"] <= own["start"] + 0.1, rows
