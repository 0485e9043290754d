"""The CLI starts without importing torch or Composer where it does not use them (bench/bench_cli_startup.py)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from foundry_ext.checkpoint import MAX_DEPTH
from tests.support.launcher import REPO

HEAVY = ("torch", "composer", "llmfoundry", "transformers", "matplotlib")

PROBE = """
import sys
from foundry_ext.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print("LOADED", *sorted(m for m in {heavy!r} if m in sys.modules))
"""


def loaded(*argv: str, heavy: tuple[str, ...] = HEAVY) -> tuple[set[str], str]:
    """Run the CLI in a fresh interpreter; return which of ``heavy`` it imported, and its output."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=heavy), *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    line = [x for x in done.stdout.splitlines() if x.startswith("LOADED")][-1]
    return set(line.split()[1:]), done.stdout + done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["--version"],
        ["schedulers"],
        ["schedulers", "warmup_stable_decay", "torch_lr_scheduler"],
        ["schema"],
        ["plot", "--help"],
        ["average", "--help"],
        ["validate", "yamls/tiny-wsd.yaml"],  # this package's schedule and llm-foundry's callbacks: nothing heavy
    ],
    ids=" ".join,
)
def test_no_heavy_import(argv: list[str]) -> None:
    modules, output = loaded(*argv)
    assert modules == set(), output


def with_scheduler(tmp_path: Path, block: str) -> Path:
    text = (REPO / "yamls" / "tiny-wsd.yaml").read_text()
    start = text.index("\nscheduler:") + 1
    end = text.index("\n\n", start)
    config = tmp_path / "cfg.yaml"
    config.write_text(text[:start] + f"scheduler: {block}" + text[end:])
    return config


def test_validate_imports_torch_only_for_a_torch_scheduler(tmp_path: Path) -> None:
    config = with_scheduler(tmp_path, "{name: torch_lr_scheduler, type: StepLR, step_size: 10}")
    modules, output = loaded("validate", str(config))
    assert "OK: torch_lr_scheduler" in output
    assert modules == {"torch"}


def test_plot_of_this_package_s_schedule_imports_no_torch(tmp_path: Path) -> None:
    modules, output = loaded("plot", "yamls/tiny-wsd.yaml", "--out", str(tmp_path / "lr.png"))
    assert "wrote" in output
    assert modules == {"matplotlib"}


@pytest.mark.parametrize(
    ("override", "line"),
    [
        ("optimizer=null", "optimizer: missing; the range test trains the YAML's optimizer, e.g. {name: "),
        ("max_seq_len=${variables.nope}", "max_seq_len: cannot resolve: Interpolation key 'variables.nope' not found"),
    ],
    ids=["no optimizer", "an interpolation that does not resolve"],
)
def test_lr_find_refuses_a_bad_yaml_before_importing_torch(override: str, line: str, tmp_path: Path) -> None:
    """It used to import torch and Composer (~7 s) before reading the YAML."""
    modules, output = loaded("lr-find", "yamls/tiny-wsd.yaml", override, "--out", str(tmp_path / "lr.png"))
    errors = [x for x in output.splitlines() if x.startswith("foundry-ext lr-find: error: ")]
    assert len(errors) == 1 and errors[0].startswith(f"foundry-ext lr-find: error: {line}"), output
    assert modules == set(), output
    assert not (tmp_path / "lr.png").exists()


def test_version_names_the_stack() -> None:
    _, output = loaded("--version")
    assert output.startswith("foundry-ext ") and "composer 0.32" in output and "torch 2.7" in output


def test_llm_foundry_s_own_schedule_validates_without_composer_and_plots_without_llm_foundry(tmp_path: Path) -> None:
    config = with_scheduler(tmp_path, "{name: cosine_with_warmup, t_warmup: 20ba}")
    modules, output = loaded("validate", str(config))
    assert "OK: cosine_with_warmup" in output and modules == set()
    modules, output = loaded("plot", str(config), "--out", str(tmp_path / "lr.png"))
    assert "wrote" in output
    assert "composer" in modules and "llmfoundry" not in modules  # Composer's formula: its class, not llm-foundry


# what `inspect` must not import for a path that is not a torch file (torch imports numpy; llmfoundry imports both)
INSPECT_HEAVY = ("torch", "numpy", "composer", "llmfoundry")


@pytest.fixture(scope="module")
def not_checkpoints(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One path per kind of input that is refused before its bytes could be a torch file."""
    folder = tmp_path_factory.mktemp("not-checkpoints")
    (folder / "config.yaml").write_text((REPO / "yamls" / "tiny-wsd.yaml").read_text())
    (folder / "empty.pt").write_bytes(b"")
    (folder / "lr.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    os.mkfifo(folder / "fifo.pt")
    (folder / "loop-a.pt").symlink_to("loop-b.pt")
    (folder / "loop-b.pt").symlink_to("loop-a.pt")
    (folder / "folder").mkdir()
    with zipfile.ZipFile(folder / "no-data-pkl.pt", "w") as archive:
        archive.writestr("archive/version", "3\n")
    deep: list[Any] = []
    for _ in range(MAX_DEPTH):
        deep = [deep]
    with zipfile.ZipFile(folder / "deep.pt", "w") as archive:  # as torch.save lays out a zip, with a too deep pickle
        archive.writestr("archive/data.pkl", pickle.dumps({"state": deep}, protocol=2))
    return folder


@pytest.mark.parametrize(
    "name, message",
    [
        ("config.yaml", "{path} is not a checkpoint: it is a text file"),
        ("empty.pt", "{path} is not a checkpoint: it is an empty file"),
        ("lr.png", "{path} is not a checkpoint: it is a PNG image"),
        ("fifo.pt", "{path} is a FIFO (named pipe), not a checkpoint"),
        ("loop-a.pt", "{path} is a symlink loop: {path} -> loop-b.pt -> loop-a.pt"),
        ("missing.pt", "no such file or folder: {path}"),
        ("folder", "{path} is a folder but not a sharded checkpoint (no .metadata)"),
        ("no-data-pkl.pt", "{path} is not a checkpoint: it is a zip archive without data.pkl"),
        ("deep.pt", f"{{path}} is not a checkpoint: it nests containers more than {MAX_DEPTH} levels deep"),
    ],
    ids=["text", "empty", "png", "fifo", "symlink-loop", "missing", "folder-without-metadata", "zip", "too-deep"],
)
def test_inspect_of_a_non_checkpoint_imports_no_torch(not_checkpoints: Path, name: str, message: str) -> None:
    """Answered in a fraction of a second: refused from ``stat`` or the first bytes, before torch is imported."""
    path = not_checkpoints / name
    modules, output = loaded("inspect", str(path), heavy=INSPECT_HEAVY)
    assert f"foundry-ext inspect: error: {message.format(path=path)}" in output, output
    assert modules == set(), output


def test_inspect_of_the_repo_yaml_imports_no_torch() -> None:
    modules, output = loaded("inspect", "yamls/tiny-wsd.yaml", heavy=INSPECT_HEAVY)
    assert "yamls/tiny-wsd.yaml is not a checkpoint: it is a text file" in output, output
    assert modules == set(), output


def test_inspect_of_a_real_checkpoint_imports_torch(tmp_path: Path) -> None:
    """The counterpart: a real Composer checkpoint is read with torch.load, so torch (and numpy) are imported."""
    from tests.support.trainer_utils import make_trainer

    trainer, _ = make_trainer([], max_duration="2ba", save_folder=str(tmp_path), save_interval="2ba")
    trainer.fit()
    trainer.close()
    modules, output = loaded("inspect", str(tmp_path / "ep0-ba2-rank0.pt"), heavy=INSPECT_HEAVY)
    assert "timestamp    epoch 0, batch 2" in output, output
    assert modules == {"torch", "numpy"}, output
