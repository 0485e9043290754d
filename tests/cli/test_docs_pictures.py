"""The docs' pictures are what the program draws today: each is re-rendered with the command docs/cli.md shows for it
and compared with the file, byte for byte (matplotlib's PNG output is deterministic for one version)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from foundry_ext.cli import main
from tests.support.launcher import REPO

IMG = REPO / "docs" / "img"
# picture -> the command of docs/cli.md that makes it (without `.venv/bin/foundry-ext` and `--out`)
COMMANDS = {
    "wsd.png": "plot yamls/tiny-wsd.yaml max_duration=10000ba scheduler.t_warmup=500ba variables.max_seq_len=2048 "
    "global_train_batch_size=256 optimizer.lr=6.0e-4",
    "plateau.png": "plot yamls/tiny-plateau.yaml --metrics docs/img/plateau-metrics.csv",
}
# the batches at which the real run behind plateau-metrics.csv (composer train.py yamls/tiny-plateau.yaml, as it is)
# logged a rise of lr_plateau/cuts
REAL_RUN_CUTS = [2625, 3250, 3750, 4250, 4750]


def test_cli_md_shows_these_commands() -> None:
    text = " ".join((REPO / "docs" / "cli.md").read_text().replace("\\\n", " ").split())
    for picture, command in COMMANDS.items():
        assert f"$ .venv/bin/foundry-ext {command} --out docs/img/{picture}" in text, picture


@pytest.mark.parametrize("picture", list(COMMANDS))
def test_the_picture_is_the_program_output(
    picture: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(REPO)  # the commands' relative paths, as the docs run them
    out = tmp_path / picture
    assert main([*shlex.split(COMMANDS[picture]), "--out", str(out)]) == 0
    capsys.readouterr()
    remake = f"`.venv/bin/foundry-ext {COMMANDS[picture]} --out docs/img/{picture}`"
    assert out.read_bytes() == (IMG / picture).read_bytes(), f"docs/img/{picture} is stale: re-make it with {remake}"


def test_the_plateau_example_cuts_where_its_real_run_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(REPO)
    assert main([*shlex.split(COMMANDS["plateau.png"]), "--out", str(tmp_path / "p.png")]) == 0
    out = capsys.readouterr().out
    marks = [line for line in out.splitlines() if line.startswith("marks: ")]
    assert marks == [
        "marks: warmup end at batch 101, "
        + ", ".join(f"cut {i} (x0.5) at batch {b}" for i, b in enumerate(REAL_RUN_CUTS, start=1))
        + " (the first batch trained at each: Composer steps the LR at the end of a batch, so a change at timestamp T "
        "first trains batch T+1)"
    ]
    assert "plateau: simulated 39 evaluations, 1 at or after the end of the run ignored: 5 cuts" in out
    rows = (IMG / "plateau-metrics.csv").read_text().splitlines()
    assert rows[0] == "batch,value" and len(rows) == 41 and rows[-1].startswith("5000,")
