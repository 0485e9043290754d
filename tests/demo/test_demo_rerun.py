"""``scripts/demo.sh`` rerun with an override that continues the earlier run's checkpoints says so in one line."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.launcher import REPO


@pytest.mark.slow
def test_a_rerun_that_resumes_says_so(demo_data: Path, tmp_path: Path) -> None:
    # the demo in a folder of its own (it works from its scripts/ folder's parent): links to the repository's files
    shutil.copytree(REPO / "scripts", tmp_path / "scripts")
    (tmp_path / "scripts" / "setup.sh").write_text("exit 0\n")  # never reinstall the shared .venv from this copy
    for name in (".venv", ".uv", "yamls", "train.py", "pyproject.toml", "uv.lock"):
        (tmp_path / name).symlink_to(REPO / name)
    (tmp_path / "demo-data").symlink_to(demo_data)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def demo(*overrides: str) -> str:
        done = subprocess.run(
            ["bash", str(tmp_path / "scripts" / "demo.sh"), *overrides],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        return done.stdout

    first = demo("max_duration=30ba")
    assert "demo: resuming" not in first
    again = demo("max_duration=40ba", "autoresume=true")
    lines = [line for line in again.splitlines() if line.startswith("demo: resuming")]
    assert lines == [
        "demo: resuming from the earlier run's checkpoint ./runs/tiny-wsd/checkpoints/latest-rank0.pt -> "
        "ep0-ba30-rank0.pt (autoresume); delete ./runs/tiny-wsd to start over"
    ]
    latest = tmp_path / "runs" / "tiny-wsd" / "checkpoints" / "latest-rank0.pt"
    assert os.path.realpath(latest).endswith("ep0-ba40-rank0.pt")
