"""Arguments as a person types them: overrides anywhere, optional in the usage, outputs checked first, short names."""

from __future__ import annotations

from pathlib import Path

import pytest

from foundry_ext.cli import main
from foundry_ext.outputs import OUTPUT_FOLDER

WSD = "yamls/tiny-wsd.yaml"


def test_overrides_may_follow_the_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "lr.csv"
    assert main(["plot", WSD, "--out", str(tmp_path / "lr.png"), "--csv", str(csv), "max_duration=100ba"]) == 0
    rows = csv.read_text().splitlines()
    assert rows[-1].startswith("99,")  # the override applied: 100 batches, not the YAML's 250
    assert "max_duration=100ba = batches 0 to 99" in capsys.readouterr().out


def test_the_usage_shows_overrides_as_optional(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["plot"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "the following arguments are required: CONFIG.yaml\n" in err
    assert "CONFIG.yaml [key=value ...]" in err


def test_an_output_folder_that_does_not_exist_fails_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plot", WSD, "--out", str(tmp_path / "nodir" / "lr.png")]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # no chart was drawn first
    folder = tmp_path / "nodir"
    assert err == (
        f"foundry-ext plot: error: --out {folder}/lr.png: the folder {folder} does not exist; make it first "
        "(only out/, the docs' output folder, is made for you)\n"
    )


@pytest.mark.parametrize(
    ("command", "option"),
    [
        (["plot", WSD], "--csv"),
        (["lr-find", WSD], "--json"),
        (["law", "fit", "curve.csv"], "--out"),
        (["anneal", "ep0-ba4-rank0.pt", WSD, "--decay", "4ba"], "--out"),
        (["average", "ep0-ba4-rank0.pt", "ep0-ba8-rank0.pt"], "--out"),
    ],
    ids=lambda value: value[0] if isinstance(value, list) else value,
)
def test_every_command_refuses_a_missing_output_folder_with_the_same_line(
    command: list[str], option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One rule for every ``--out``/``--csv``/``--json`` (foundry_ext/outputs.py): the same line, before the inputs
    are read (here empty files, which no command could use), nothing written."""
    for name in ("curve.csv", "ep0-ba4-rank0.pt", "ep0-ba8-rank0.pt"):
        (tmp_path / name).write_bytes(b"")
    args = [str(tmp_path / a) if a.endswith((".csv", ".pt")) else a for a in command]
    target = tmp_path / "nodir" / "x"
    assert main([*args, option, str(target)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(
        f"error: {option} {target}: the folder {target.parent} does not exist; make it first "
        f"(only {OUTPUT_FOLDER}/, the docs' output folder, is made for you)"
    ), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["curve.csv", "ep0-ba4-rank0.pt", "ep0-ba8-rank0.pt"]


@pytest.mark.parametrize(
    ("command", "option", "example"),
    [
        (["plot", WSD], "--out", "out"),
        (["plot", WSD], "--csv", "out"),
        (["lr-find", WSD], "--json", "out"),
        (["schema"], "--out", "out"),
        (["law", "fit", "curve.csv"], "--out", "out"),
        (["anneal", "ep0-ba4-rank0.pt", WSD, "--decay", "4ba"], "--out", "branch.yaml"),
    ],
    ids=lambda value: value[0] if isinstance(value, list) else value,
)
def test_every_command_refuses_an_output_that_is_a_folder_with_the_same_line(
    command: list[str], option: str, example: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder given as a file to write is refused before any work: ``plot --out out`` wrote ``out.png`` beside the
    folder and said ``wrote out``; ``--csv`` and ``schema --out`` failed only once the work was done."""
    for name in ("curve.csv", "ep0-ba4-rank0.pt"):
        (tmp_path / name).write_bytes(b"")
    args = [str(tmp_path / a) if a.endswith((".csv", ".pt")) else a for a in command]
    target = tmp_path / "a-folder"
    target.mkdir()
    assert main([*args, option, str(target)]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith(
        f"error: {option} {target}: is a folder; expected a file name, e.g. {target}/{example}"
    ), lines
    assert "wrote" not in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-folder", "curve.csv", "ep0-ba4-rank0.pt"]
    assert list(target.iterdir()) == []


@pytest.mark.parametrize(
    ("typed", "meant"),
    [("wsd", "warmup_stable_decay"), ("cosine_warmup", "cosine_with_warmup"), ("plateau", "reduce_lr_on_plateau")],
)
def test_short_scheduler_names_get_a_did_you_mean(typed: str, meant: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", WSD, f"scheduler.name={typed}"]) == 2
    err = capsys.readouterr().err
    assert f"scheduler.name: '{typed}' is not a registered scheduler (did you mean '{meant}'?)" in err


def test_a_unitless_duration_override_says_its_unit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", WSD, "max_duration=100"]) == 0
    out, err = capsys.readouterr()
    # validate's own warning (one line, exit 0 without --strict), not the note the other commands print
    assert err == (
        f"{WSD}: warning: max_duration: 100 has no unit: Composer reads it as 100ep (100 epochs); write 100ep to say "
        "so, or 100ba for batches\n"
    )
    assert "max_duration=100 = 25600 batches" in out  # what the warning says is what the run gets (256 batches/epoch)


def test_the_docs_output_folder_out_is_made_on_demand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--out out/...`` (the docs' one output folder) makes ``out/``; any other missing folder is still refused."""
    wsd = str(Path(WSD).resolve())
    monkeypatch.chdir(tmp_path)
    assert main(["plot", wsd, "--out", "out/lr.png", "--csv", "out/csv/lr.csv"]) == 0
    assert (tmp_path / "out" / "lr.png").stat().st_size > 0 and (tmp_path / "out" / "csv" / "lr.csv").exists()
    assert main(["schema", "--out", "out/train.schema.json"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    capsys.readouterr()
    assert main(["plot", wsd, "--out", "outs/lr.png"]) == 2
    assert "--out outs/lr.png: the folder" in capsys.readouterr().err
