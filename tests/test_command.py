"""The commands ``anneal`` and the spike guard print paste into the user's shell (issue 46).

They printed ``composer train.py ...`` where the docs' environment has ``.venv/bin/composer`` (not on ``PATH``), and
absolute paths where the docs show relative ones. Each case sets up the folder a user runs from: a ``.venv/bin``
holding ``composer``, and ``PATH`` with or without it.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from foundry_ext._command import composer_command, shown_path
from foundry_ext.trainer.spike_guard.rollback import Continuation


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder, the working folder, with ``.venv/bin/{python,composer,foundry-ext}``; PATH without them."""
    bin_ = tmp_path / "my project" / ".venv" / "bin"
    bin_.mkdir(parents=True)
    for name in ("python", "composer", "foundry-ext"):
        (bin_ / name).write_text("#!/bin/sh\n")
        (bin_ / name).chmod(0o755)
    monkeypatch.chdir(bin_.parents[1])
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setattr(sys, "argv", [".venv/bin/foundry-ext", "anneal"])  # as the user typed it
    monkeypatch.setattr(sys, "executable", str(bin_ / "python"))  # what the script's shebang names: absolute
    return bin_.parents[1]


def test_the_composer_beside_the_typed_command_when_not_on_path(project: Path) -> None:
    assert composer_command("train.py", "out/branch-8.yaml") == ".venv/bin/composer train.py out/branch-8.yaml"


def test_plain_composer_when_path_finds_that_one(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{project / '.venv' / 'bin'}:/usr/bin:/bin")  # an activated venv
    assert composer_command("train.py", "b.yaml", processes=2) == "composer -n 2 train.py b.yaml"


def test_a_training_rank_uses_the_composer_beside_its_python(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["train.py", "yamls/x.yaml"])  # a rank: argv[0] has no folder
    assert composer_command("train.py") == ".venv/bin/composer train.py"
    (project.parent / "elsewhere").mkdir()
    monkeypatch.chdir(project.parent / "elsewhere")  # launched from outside the project: the absolute path
    assert composer_command("train.py") == f"{shlex.quote(str(project / '.venv' / 'bin' / 'composer'))} train.py"


def test_paths_inside_the_working_folder_are_relative_and_every_word_is_quoted(project: Path) -> None:
    assert shown_path(str(project / "runs" / "x" / "ep0-ba8-rank0.pt")) == "runs/x/ep0-ba8-rank0.pt"
    assert shown_path("/elsewhere/ep0-ba8-rank0.pt") == "/elsewhere/ep0-ba8-rank0.pt"
    line = composer_command("train.py", shown_path(str(project / "out" / "a b.yaml")), "scheduler={name: x}")
    assert line == ".venv/bin/composer train.py 'out/a b.yaml' 'scheduler={name: x}'"
    assert shlex.split(line)[2:] == ["out/a b.yaml", "scheduler={name: x}"]


def test_the_rollback_prints_a_command_that_pastes(project: Path) -> None:
    plan = Continuation(
        load_path=str(project / "runs" / "x" / "checkpoints" / "ep0-ba4-rank0.pt"),
        at_batch=4,
        skip=6,
        save_folder=str(project / "runs" / "x" / "checkpoints-rollback-ba4"),
        run_name="x-rollback-ba4",
    )
    assert plan.command() == (
        ".venv/bin/composer train.py YOUR.yaml load_path=runs/x/checkpoints/ep0-ba4-rank0.pt "
        "save_folder=runs/x/checkpoints-rollback-ba4 run_name=x-rollback-ba4 autoresume=true "
        "callbacks.spike_guard.skip_data.at_batch=4 callbacks.spike_guard.skip_data.batches=6"
    )
    plan.write(project / "rollback.yaml", "why")
    assert f"#   {plan.command()}\n" in (project / "rollback.yaml").read_text()
