"""Switching the scheduler from the command line, over a YAML that has another one, works the same everywhere.

OmegaConf merges ``scheduler={name: reduce_lr_on_plateau}`` into the file's block, so the file's other keys stay
(llm-foundry's ``train_from_yaml`` merges the same way). ``validate``, ``plot``, ``law`` and training each say so in
one line naming the leftover keys and the way out; with those keys cleared (``key: null``) each of them takes the
switched scheduler.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from foundry_ext.cli import main
from tests.support.launcher import REPO

YAML = "yamls/tiny-wsd.yaml"  # warmup_stable_decay: t_warmup, t_decay, decay_type, alpha_f
SWITCH = "scheduler={name: reduce_lr_on_plateau}"
CLEARED = "scheduler={name: reduce_lr_on_plateau, t_decay: null, decay_type: null, alpha_f: null}"
HINT = (
    "scheduler: t_decay, decay_type, alpha_f: keys of warmup_stable_decay, not of reduce_lr_on_plateau; an override "
    "scheduler={name: reduce_lr_on_plateau} is merged into the YAML's scheduler block, whose other keys stay: clear "
    "them in the override (a null key is unset), "
    "'scheduler={name: reduce_lr_on_plateau, t_decay: null, decay_type: null, alpha_f: null}', or edit the YAML"
)


@pytest.fixture(scope="module")
def law_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("law") / "law.json"
    runs = [f"bench/data/loss-curves/25M/{name}.csv" for name in ("cosine_24000", "constant_24000", "wsdcon_9")]
    assert main(["law", "fit", *runs, "--out", str(out)]) == 0
    return out


def _commands(tmp_path: Path, law_json: Path) -> dict[str, list[str]]:
    return {
        "validate": ["validate", YAML],
        "plot": ["plot", YAML, "--out", str(tmp_path / "lr.png")],
        "law": ["law", "predict", str(law_json), YAML],
    }


@pytest.mark.parametrize("command", ["validate", "plot", "law"])
def test_the_leftover_keys_are_named_with_the_way_out(
    command: str, tmp_path: Path, law_json: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main([*_commands(tmp_path, law_json)[command], SWITCH]) == 2
    err = capsys.readouterr().err
    assert HINT in err and "Traceback" not in err
    assert not (tmp_path / "lr.png").exists()


@pytest.mark.parametrize("command", ["validate", "plot", "law"])
def test_cleared_keys_switch_the_scheduler(
    command: str, tmp_path: Path, law_json: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main([*_commands(tmp_path, law_json)[command], CLEARED]) == 0
    out = capsys.readouterr().out
    if command == "validate":
        assert "OK: reduce_lr_on_plateau (t_warmup=20ba), max_duration=250ba" in out
    if command == "plot":
        assert "plateau: monitor metrics/eval/LanguageCrossEntropy (min), factor 0.1, patience 10" in out
        assert (tmp_path / "lr.png").stat().st_size > 0


def test_the_plot_of_the_switch_is_the_plateau_with_the_file_warmup(tmp_path: Path) -> None:
    """The LR the switched config gives: the file's 20-batch warmup (kept: a plateau key too), then a flat scale 1."""
    csv = tmp_path / "lr.csv"
    assert main(["plot", YAML, CLEARED, "--csv", str(csv), "--out", str(tmp_path / "lr.png")]) == 0
    rows = [line.split(",") for line in csv.read_text().splitlines()[1:]]
    multipliers = [float(row[1]) for row in rows]
    assert len(rows) == 250
    assert multipliers[:3] == [0.0, 0.0, 0.05]  # batch b trains with the multiplier at b - 1
    assert multipliers[21:] == [1.0] * 229  # no t_decay: the WSD cooldown is gone


@pytest.mark.slow
def test_training_says_the_same_and_trains_with_the_keys_cleared(run_composer, tmp_path: Path) -> None:
    bad = run_composer(YAML, SWITCH, cwd=tmp_path, check=False)
    assert bad.returncode != 0
    assert f"foundry-ext: error: {HINT}" in bad.stderr
    assert "Traceback" not in bad.output and "ConfigError" not in bad.output, bad.output[-3000:]
    assert bad.returncode == 2  # RunStopped: the one line is the whole answer
    assert not (tmp_path / "runs" / "tiny-wsd" / "checkpoints").exists()

    run_composer(YAML, CLEARED, "max_duration=4ba", "eval_interval=2ba", cwd=tmp_path)
    checkpoint = tmp_path / "runs" / "tiny-wsd" / "checkpoints" / "latest-rank0.pt"
    done = subprocess.run(
        [str(REPO / ".venv" / "bin" / "foundry-ext"), "inspect", str(checkpoint)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "ReduceLROnPlateau" in done.stdout, done.stdout
    assert "WarmupStableDecay" not in done.stdout, done.stdout
