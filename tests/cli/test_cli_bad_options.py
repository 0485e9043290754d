"""Every command: a bad option or argument exits 2 with one line naming it, before torch or Composer is imported.

Each case runs the CLI in a fresh interpreter and reads ``sys.modules`` at the end (the heavy imports take seconds:
a bad option must not pay them).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from foundry_ext.cli import SUBCOMMANDS
from tests.support.launcher import REPO

HEAVY = ("torch", "composer", "llmfoundry")

PROBE = """
import sys
from foundry_ext.cli import main
rc = main(sys.argv[1:])
print("LOADED", *sorted(m for m in {heavy!r} if m in sys.modules))
sys.exit(rc)
"""

# command -> (argv, the one line it prints, after "foundry-ext COMMAND: error: ")
CASES = {
    "plot": (["plot", "yamls/tiny-wsd.yaml", "--out", "{tmp}/nodir/lr.png"], "--out {tmp}/nodir/lr.png: the folder"),
    "plot --at": (["plot", "yamls/tiny-wsd.yaml", "--at", "250", "--out", "{tmp}/lr.png"], "--at 250: the run trains"),
    "validate": (["validate", "{tmp}/missing.yaml"], "missing.yaml"),
    "schedulers": (["schedulers", "wsd"], "wsd"),
    "schema": (["schema", "--out", "{tmp}/nodir/s.json"], "{tmp}/nodir does not exist"),
    "inspect": (["inspect", "{tmp}/missing.pt"], "missing.pt"),
    "lr-find": (["lr-find", "yamls/tiny-wsd.yaml", "--min", "abc"], "--min abc: not a number"),
    "lr-find --batches": (["lr-find", "yamls/tiny-wsd.yaml", "--batches", "3"], "--batches 3: too few"),
    "law": (["law", "fit", "a.csv", "b.csv", "--warmup", "-1"], "--warmup -1: must be >= 0"),
    "law predict": (["law", "predict", "{tmp}/missing.json", "yamls/tiny-wsd.yaml"], "missing.json"),
    "demo-data": (["demo-data", "{tmp}/full"], "full"),
    "average": (
        ["average", "{tmp}/a.pt", "{tmp}/b.pt", "--weights", "nan,1", "--out", "{tmp}/avg.pt"],
        "--weights nan,1: nan is not a finite number",
    ),
    "average --last": (["average", "{tmp}/full", "--last", "1", "--out", "{tmp}/avg.pt"], "--last 1: must be >= 2"),
    "anneal": (
        ["anneal", "{tmp}/missing.pt", "yamls/tiny-wsd.yaml", "--decay", "0ba", "--out", "{tmp}/b.yaml"],
        "--decay 0ba: a decay of 0 batches",
    ),
}


def test_every_command_has_a_case() -> None:
    assert {name.split()[0] for name in CASES} == set(SUBCOMMANDS)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_option_fails_in_one_line_without_torch(case: str, tmp_path: Path) -> None:
    argv, expected = CASES[case]
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "someone-else.txt").write_text("not demo data\n")  # demo-data refuses a foreign folder
    argv = [a.format(tmp=tmp_path) for a in argv]
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *argv], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    command = argv[0]
    assert len(lines) == 1 and lines[0].startswith(f"foundry-ext {command}: error: "), done.stderr
    assert expected.format(tmp=tmp_path) in lines[0]
    assert "Traceback" not in done.stderr
    loaded = [x for x in done.stdout.splitlines() if x.startswith("LOADED")][-1].split()[1:]
    assert loaded == [], f"{case} imported {loaded} before failing"
