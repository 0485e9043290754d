"""``foundry-ext plot``: real configs, real schedulers, real PNGs; exact values checked against the schedulers."""

from __future__ import annotations

import csv
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from composer.core import State, Timestamp
from composer.devices import DeviceCPU

from foundry_ext.trainer.schedulers import WarmupStableDecayScheduler
from tests.support.cli import run_cli
from tests.support.launcher import REPO

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

WSD_YAML = """\
variables:
  max_seq_len: 64
  warmup: 100ba
max_seq_len: ${variables.max_seq_len}
global_train_batch_size: 4
device_train_microbatch_size: 4
max_duration: 1000ba
optimizer: {name: decoupled_adamw, lr: 1.0e-3}
scheduler:
  name: warmup_stable_decay
  t_warmup: ${variables.warmup}
  t_decay: 0.2dur
  alpha_f: 0.1
callbacks:
  lr_monitor: {}
"""

PLATEAU_YAML = """\
max_seq_len: 64
global_train_batch_size: 4
device_train_microbatch_size: 4
max_duration: 2000ba
optimizer: {name: decoupled_adamw, lr: 1.0e-3}
eval_loader: {name: text, dataset: {local: x, split: val, max_seq_len: 64}}
scheduler:
  name: reduce_lr_on_plateau
  factor: 0.5
  patience: 1
  threshold: 0.01
  t_warmup: 250ba
"""


def write(tmp_path: Path, text: str, name: str = "cfg.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def check_png(path: Path) -> None:
    import matplotlib.image

    assert path.read_bytes()[:8] == PNG_MAGIC
    height, width, channels = matplotlib.image.imread(str(path)).shape
    assert width > 300 and height > 200 and channels in (3, 4)


def wsd_multiplier(timestamp: int) -> float:
    """The scheduler's multiplier on an independently built Composer State (not the CLI's evaluator)."""
    scheduler = WarmupStableDecayScheduler(t_warmup="100ba", t_decay="0.2dur", alpha_f=0.1)
    state = State(
        model=torch.nn.Linear(1, 1), rank_zero_seed=0, run_name="t", device=DeviceCPU(), max_duration="1000ba"
    )
    state.timestamp = Timestamp(batch=timestamp, sample=4 * timestamp, token=256 * timestamp)
    return scheduler(state)


def lr_of_batch(batch: int) -> float:
    """Composer's order: 0-indexed batch b trains with the multiplier at timestamp b - 1 (batch 0 with the one at 0)."""
    return 1e-3 * wsd_multiplier(max(batch - 1, 0))


@pytest.mark.parametrize("yaml_path", sorted(REPO.glob("yamls/*.yaml")), ids=lambda p: p.name)
def test_every_example_yaml_renders(yaml_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "lr.png"
    rc, stdout, err = run_cli("plot", str(yaml_path), "--out", str(out), "--batches-per-epoch", "100")
    assert rc == 0, err
    check_png(out)
    assert "LR max" in stdout


def test_wsd_values_at_named_batches_are_exact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write(tmp_path, WSD_YAML)
    named = [0, 1, 50, 51, 100, 101, 500, 800, 801, 901, 999]
    table = tmp_path / "points.csv"
    argv = [str(config), "--out", str(tmp_path / "lr.png"), "--csv", str(table)]
    rc, stdout, err = run_cli("plot", *argv, *[a for b in named for a in ("--at", str(b))])
    assert rc == 0, err
    printed = {int(b): float(lr) for b, lr in re.findall(r"^batch (\d+): lr (\S+) ", stdout, re.MULTILINE)}
    assert printed == {b: lr_of_batch(b) for b in named}
    # batches 0 and 1 both train at 0; batch 51 at half the warmup; 101 at the peak; 901 half-way through the decay
    assert [printed[b] for b in (0, 1, 51, 100, 101, 901)] == [0.0, 0.0, 1e-3 * 0.5, 1e-3 * 0.99, 1e-3, 1e-3 * 0.55]
    with open(table) as f:
        rows = list(csv.DictReader(f))
    assert [int(r["batch"]) for r in rows] == list(range(1000))  # every batch that trains, and no batch 1000
    for row in rows:
        assert float(row["lr"]) == lr_of_batch(int(row["batch"]))
    marks = "marks: warmup end at batch 101, decay start at batch 801"  # t_warmup=100ba: the b-1 rule, said
    why = "(the first batch trained at each: Composer steps the LR at the end of a batch, so a change at timestamp T"
    assert f"{marks} {why} first trains batch T+1)" in stdout
    assert "global_train_batch_size 4 x max_seq_len 64" in stdout and "max_seq_len long" in stdout
    check_png(tmp_path / "lr.png")


def test_the_last_row_is_the_last_batch_that_trains(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A cosine_with_restarts run of 40 batches restarts at timestamp 40, which no batch trains with."""
    config = write(
        tmp_path,
        WSD_YAML.replace(
            "scheduler:\n  name: warmup_stable_decay\n  t_warmup: ${variables.warmup}\n"
            "  t_decay: 0.2dur\n  alpha_f: 0.1\n",
            "scheduler: {name: cosine_with_restarts, t_0: 20ba}\n",
        ),
    )
    table = tmp_path / "points.csv"
    rc, stdout, err = run_cli(
        "plot", str(config), "max_duration=40ba", "--out", str(tmp_path / "lr.png"), "--csv", str(table)
    )
    assert rc == 0, err
    with open(table) as f:
        rows = list(csv.DictReader(f))
    assert [int(r["batch"]) for r in rows] == list(range(40))
    assert float(rows[-1]["multiplier"]) < 0.05  # the end of the second cycle (timestamp 38), not the restart at 1.0
    assert "marks: restart 1 at batch 21" in stdout


def test_long_schedule_samples_points_but_keeps_marks_exact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write(tmp_path, WSD_YAML)
    table = tmp_path / "points.csv"
    rc, stdout, err = run_cli(
        "plot", str(config), "max_duration=1000000ba", "--out", str(tmp_path / "lr.png"), "--csv", str(table)
    )
    assert rc == 0, err
    with open(table) as f:
        batches = [int(r["batch"]) for r in csv.DictReader(f)]
    assert 2000 <= len(batches) <= 4100
    assert {0, 100, 101, 102, 800_000, 800_001, 800_002, 999_999} <= set(batches)
    assert max(batches) == 999_999
    assert "LR max 0.001 at batch 101, min 0 at batch 0" in stdout


def test_llm_foundry_builtin_scheduler_with_warmup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write(
        tmp_path,
        WSD_YAML.replace("  t_decay: 0.2dur\n  alpha_f: 0.1\n", "  t_max: 1dur\n").replace(
            "warmup_stable_decay", "cosine_with_warmup"
        ),
    )
    rc, stdout, err = run_cli("plot", str(config), "--out", str(tmp_path / "lr.png"), "--at", "101", "--at", "551")
    assert rc == 0, err
    assert "marks: warmup end at batch 101" in stdout
    assert "batch 101: lr 0.001 " in stdout
    half_way = re.search(r"batch 551: lr (\S+) ", stdout)
    assert half_way and float(half_way.group(1)) == pytest.approx(5e-4, rel=1e-12)  # cos(pi/2) is 6e-17, not 0
    check_png(tmp_path / "lr.png")


def torch_cuts(
    values: list[float], lr: float, factor: float, patience: int, threshold: float
) -> list[tuple[int, float]]:
    """(index, new LR / lr) of each LR change torch's ReduceLROnPlateau makes on ``values``."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, factor=factor, patience=patience, threshold=threshold
    )
    cuts = []
    for i, value in enumerate(values):
        before = optimizer.param_groups[0]["lr"]
        scheduler.step(value)
        after = optimizer.param_groups[0]["lr"]
        if after != before:
            cuts.append((i, after / lr))
    return cuts


def test_plateau_simulation_matches_torch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write(tmp_path, PLATEAU_YAML)
    # evaluations every 100 batches; those at 100 and 200 fall in warmup (250ba) and are not counted
    values = [9.0, 9.0, 3.0, 2.5, 2.49, 2.6, 2.0, 2.0, 2.0, 1.99, 1.0, 1.1, 1.2, 1.3, 0.9, 0.95, 0.96, 0.97, 0.98]
    batches = [100 * (i + 1) for i in range(len(values))]
    metrics = tmp_path / "metrics.csv"
    metrics.write_text("batch,value\n" + "".join(f"{b},{v}\n" for b, v in zip(batches, values, strict=True)))
    out = tmp_path / "lr.png"
    rc, stdout, err = run_cli("plot", str(config), "--out", str(out), "--metrics", str(metrics), "--at", "1999")
    assert rc == 0, err
    # the cut decided at the evaluation at timestamp T applies from 0-indexed batch T on
    printed = [(int(b), float(new)) for b, new in re.findall(r"from batch (\d+) on: scale \S+ -> (\S+) ", stdout)]
    counted = values[2:]  # after warmup
    cuts = torch_cuts(counted, lr=1e-3, factor=0.5, patience=1, threshold=0.01)
    expected = [(batches[2 + i], pytest.approx(scale, rel=1e-5)) for i, scale in cuts]
    assert len(expected) >= 2
    assert printed == expected
    assert "2 in warmup (not counted" in stdout
    last = re.search(r"batch 1999: lr (\S+) ", stdout)
    assert last and float(last.group(1)) == pytest.approx(1e-3 * cuts[-1][1], rel=1e-12)
    check_png(out)


def test_plateau_without_metrics_draws_time_part(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write(tmp_path, PLATEAU_YAML)
    rc, stdout, err = run_cli("plot", str(config), "--out", str(tmp_path / "lr.png"), "--at", "126", "--at", "1500")
    assert rc == 0, err
    assert "batch 126: lr 0.0005 (multiplier 0.5)" in stdout  # linear warmup to 250ba, at timestamp 125
    assert "batch 1500: lr 0.001 (multiplier 1.0)" in stdout
    assert "pass --metrics FILE.csv" in stdout


BAD_CASES = {
    "missing-file": (None, [], "no such file"),
    "invalid-yaml": ("a: [1, 2\n", [], "invalid YAML"),
    "unknown-scheduler": (WSD_YAML, ["scheduler.name=warmup_stabel_decay"], "did you mean 'warmup_stable_decay'"),
    "no-max-duration": (WSD_YAML.replace("max_duration: 1000ba\n", ""), [], "max_duration: missing"),
    "epochs-need-batches-per-epoch": (WSD_YAML, ["max_duration=2ep"], "--batches-per-epoch"),
    "bad-field": (WSD_YAML, ["scheduler.alpha_f=2"], "scheduler.alpha_f"),
    "overlap": (WSD_YAML, ["max_duration=110ba"], "scheduler.t_decay"),
    "unresolved-variable": (WSD_YAML.replace("${variables.warmup}", "${variables.nope}"), [], "variables.nope"),
    "metrics-not-plateau": (WSD_YAML, ["--metrics", "{tmp}/m.csv"], "only for scheduler.name: reduce_lr_on_plateau"),
}


@pytest.mark.parametrize("case", list(BAD_CASES))
def test_bad_input_is_one_line_exit_2(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text, extra, needle = BAD_CASES[case]
    config = tmp_path / "cfg.yaml"
    if text is not None:
        config.write_text(text)
    (tmp_path / "m.csv").write_text("100,1.0\n")
    extra = [a.replace("{tmp}", str(tmp_path)) for a in extra]
    rc, _, err = run_cli("plot", str(config), *extra, "--out", str(tmp_path / "lr.png"))
    assert rc == 2
    lines = [line for line in err.splitlines() if line.startswith("foundry-ext plot: error:")]
    assert len(lines) == 1 and needle in lines[0], err
    assert "Traceback" not in err


def test_installed_script_in_a_subprocess(tmp_path: Path) -> None:
    script = shutil.which("foundry-ext", path=str(Path(sys.executable).parent))
    assert script is not None
    config = write(tmp_path, WSD_YAML)
    out = tmp_path / "lr.png"
    done = subprocess.run(
        [script, "plot", str(config), "max_duration=2000ba", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "decay start at batch 1601" in done.stdout
    check_png(out)
