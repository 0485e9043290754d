"""Batch-size warmup without a Trainer: the stage, batch and LR factor of every step, the preview, the bad inputs.

The Trainer side (the same numbers in a real ``composer train.py`` run) is ``tests/batch_size/test_ramp_training.py``.
"""

from __future__ import annotations

import copy
import itertools
import math
import re
import traceback
from pathlib import Path
from typing import Any

import pytest
import yaml

from foundry_ext.catalog.batch_size import batch_size_transform, check_batch_size_schedule
from foundry_ext.cli import main
from foundry_ext.config.base import build
from foundry_ext.config.errors import ConfigError
from foundry_ext.config.train_yaml import load_train_config
from foundry_ext.preview.batch_size import ramp_steps, replay_plateau
from foundry_ext.schedules.batch_size import BatchPlan, BatchSizeSchedule, plan_of
from tests.support.configs import tiny_train_config, write_train_yaml
from tests.support.launcher import REPO

RAMP_YAML = REPO / "yamls" / "tiny-batch-ramp.yaml"

# The issue's example: first stage 8 samples of 128 tokens; 20480 tok = 160 samples, 61440 tok = 480 samples.
ISSUE = {
    "stages": [{"at": "20480tok", "global_train_batch_size": 16}, {"at": "61440tok", "global_train_batch_size": 32}],
    "lr_scaling": "sqrt",
}


def plan(block: dict[str, Any] = ISSUE, base: int = 8, seq: int = 128) -> BatchPlan:
    result, problems = plan_of(build(BatchSizeSchedule, block), base, seq)
    assert not problems, problems
    assert result is not None
    return result


def test_the_issues_example_in_samples() -> None:
    p = plan()
    assert (p.starts, p.sizes, p.lr_scaling) == ((0, 160, 480), (8, 16, 32), "sqrt")
    steps = list(p.steps(samples=800))
    sizes = [s.size for s in steps]
    # 160 / 8 = 20 steps of 8, (480 - 160) / 16 = 20 steps of 16, then (800 - 480) / 32 = 10 steps of 32
    assert sizes == [8] * 20 + [16] * 20 + [32] * 10
    assert [s.sample for s in steps[18:23]] == [144, 152, 160, 176, 192]
    assert {s.stage: s.factor for s in steps} == {0: 1.0, 1: math.sqrt(2.0), 2: 2.0}


@pytest.mark.parametrize(
    ("rule", "factors"),
    [
        pytest.param("none", [1.0, 1.0, 1.0], id="none"),
        pytest.param("sqrt", [1.0, math.sqrt(2.0), 2.0], id="sqrt"),
        pytest.param("linear", [1.0, 2.0, 4.0], id="linear"),
    ],
)
def test_lr_scaling_rules(rule: str, factors: list[float]) -> None:
    p = plan({**ISSUE, "lr_scaling": rule})
    assert [p.factor(i) for i in range(3)] == factors


def test_a_point_inside_a_batch_takes_effect_at_the_next_batch() -> None:
    # 100 samples is inside the batch that starts at 96 (base 8): the batch at 104 is the first of 16
    p = plan({"stages": [{"at": "100sp", "global_train_batch_size": 16}]})
    sizes = {s.sample: s.size for s in p.steps(samples=136)}
    assert (sizes[96], sizes[104], sizes[120]) == (8, 16, 16)


def test_tokens_round_up_to_whole_samples() -> None:
    p = plan({"stages": [{"at": "1000tok", "global_train_batch_size": 16}]}, seq=128)  # 7.8 samples -> 8
    assert p.starts == (0, 8)


def test_next_factor_is_the_factor_of_the_next_step() -> None:
    """What the LambdaLR sets at the end of a batch (the next batch's LR) uses the next batch's stage."""
    p = plan({**ISSUE, "lr_scaling": "linear"})
    steps = list(p.steps(samples=800))
    for step, following in itertools.pairwise(steps):
        assert p.next_factor(step.sample) == following.factor


def test_preview_of_the_example_yaml() -> None:
    """Hand-computed: WSD warmup 4096 tok, lr 3e-3, sqrt rule; batch k's LR uses the timestamp after batch k-1."""
    cfg = load_train_config(str(RAMP_YAML))
    _, steps = ramp_steps(cfg)
    assert [s.size for s in steps] == [8] * 4 + [16] * 4 + [32] * 5
    assert [s.token for s in steps[:6]] == [0, 1024, 2048, 3072, 4096, 6144]
    # batch 4 (first of 16): multiplier at token 3072 (after batch 3) = 0.75, times sqrt(2)
    assert steps[4].lr == 3.0e-3 * 0.75 * math.sqrt(2.0)
    assert steps[2].lr == 3.0e-3 * 0.25 and steps[0].lr == 0.0 and steps[1].lr == 0.0
    assert steps[8].lr == 3.0e-3 * 1.0 * 2.0


def test_transform_moves_the_block_where_llm_foundry_builds_it() -> None:
    cfg = load_train_config(str(RAMP_YAML))
    block = dict(cfg["batch_size_schedule"])
    out = batch_size_transform(cfg)
    assert "batch_size_schedule" not in out
    assert out["train_loader"]["name"] == "text_batch_ramp"
    assert out["callbacks"]["batch_size_schedule"] == block
    assert list(out["callbacks"]) == ["lr_monitor", "batch_size_schedule"]


def test_without_a_ramp_the_transform_changes_nothing() -> None:
    cfg = tiny_train_config()
    before = yaml.safe_dump(cfg)
    assert yaml.safe_dump(batch_size_transform(cfg)) == before


STAGES_OK = [{"at": "2048tok", "global_train_batch_size": 8}, {"at": "4096tok", "global_train_batch_size": 16}]


def ramp_config(**changes: Any) -> dict[str, Any]:
    """A valid config (base batch 4, 64-token samples) with a ramp, a text loader over the demo data."""
    cfg = tiny_train_config(max_duration="16384tok", t_warmup="1024tok")
    cfg["train_loader"] = {
        "name": "text",
        "dataset": {"local": str(REPO / "demo-data"), "split": "train", "max_seq_len": 64},
        "drop_last": True,
    }
    cfg["tokenizer"] = {"name": str(REPO / "demo-data" / "tokenizer")}
    cfg["batch_size_schedule"] = {"stages": STAGES_OK, "lr_scaling": "sqrt"}
    for key, value in changes.items():
        if key.startswith("ramp."):
            cfg["batch_size_schedule"][key.removeprefix("ramp.")] = value
        else:
            cfg[key] = value
    return cfg


def stage(at: str, size: int) -> dict[str, Any]:
    return {"at": at, "global_train_batch_size": size}


# case -> (config changes, world size, the field named, a fragment of its line)
BAD: dict[str, tuple[dict[str, Any], int, str, str]] = {
    "not-a-multiple": (
        {"ramp.stages": [stage("2048tok", 6)]},
        1, "batch_size_schedule.stages[0].global_train_batch_size", "not a whole multiple of global_train_batch_size 4",
    ),
    "out-of-order": (
        {"ramp.stages": [stage("4096tok", 8), stage("2048tok", 16)]},
        1, "batch_size_schedule.stages[1].at", "is not after the previous stage's start (64 samples)",
    ),
    "repeated": (
        {"ramp.stages": [stage("2048tok", 8), stage("32sp", 16)]},
        1, "batch_size_schedule.stages[1].at", "strictly increasing, each stage once",
    ),
    "ranks-cannot-divide": (
        {}, 3, "global_train_batch_size", "4 cannot be divided among 3 ranks",
    ),
    "a-point-in-batches": (
        {"ramp.stages": [stage("20ba", 8)]},
        1, "batch_size_schedule.stages[0].at", "is in batches, which are ambiguous once the batch grows",
    ),
    "non-streaming-loader": (
        {"train_loader": {"name": "finetuning", "dataset": {"hf_name": "x"}}},
        1, "train_loader.name", "'finetuning' cannot resume a batch-size ramp exactly; allowed: text",
    ),
    "unknown-coupling-rule": (
        {"ramp.lr_scaling": "cubic"},
        1, "batch_size_schedule.lr_scaling", "'cubic' is not allowed; allowed: none, sqrt, linear",
    ),
    "more-than-one-epoch": (
        {"ramp.stages": [stage("2048tok", 8192)]},
        1, "batch_size_schedule.stages[0].global_train_batch_size", "8192 is more than the 4096 samples of one epoch",
    ),
}  # fmt: skip


def write(tmp_path: Path, cfg: dict[str, Any]) -> Path:
    return write_train_yaml(tmp_path / "train.yaml", cfg)


@pytest.mark.parametrize("case", list(BAD))
def test_bad_ramp_is_one_line_naming_the_field(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    changes, world, field, fragment = BAD[case]
    config = write(tmp_path, ramp_config(**changes))
    rc = main(["validate", str(config), "--world-size", str(world)])
    out, err = capsys.readouterr()
    assert rc == 2, out + err
    named = [line.removeprefix(f"{config}: ") for line in err.splitlines() if line.startswith(f"{config}: {field}: ")]
    assert len(named) == 1 and fragment in named[0], err
    assert "Traceback" not in err and not re.search(r"\b(TypeError|AttributeError|KeyError)\b", err)


@pytest.mark.slow  # imports llm-foundry (~10 s of CPU) in the test process
@pytest.mark.parametrize("case", list(BAD))
def test_bad_ramp_stops_training_before_anything_is_built(case: str, tmp_path: Path, monkeypatch: Any) -> None:
    """llm-foundry's own entry point: the config transform refuses it before the tokenizer, model or data."""
    from llmfoundry.command_utils import train_from_yaml

    changes, world, field, fragment = BAD[case]
    config = write(tmp_path, ramp_config(**changes))
    monkeypatch.setenv("WORLD_SIZE", str(world))
    monkeypatch.setattr("foundry_ext.config.errors.let_rank_zero_exit_first", lambda: None)
    with pytest.raises(ConfigError) as raised:
        train_from_yaml(str(config), [])
    frames = [frame.f_code.co_name for frame, _ in traceback.walk_tb(raised.value.__traceback__)]
    assert "build_composer_model" not in frames and "build_tokenizer" not in frames
    assert any(line.startswith(f"{field}: ") and fragment in line for line in str(raised.value).splitlines())


def test_a_valid_ramp_passes_validate_with_its_stages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write(tmp_path, ramp_config())
    assert main(["validate", str(config), "--steps"]) == 0
    out = capsys.readouterr().out
    assert "ramp: stage 1: global batch 8, batches 8-11 (4 steps), tokens 2048-4096" in out
    rows = [line for line in out.splitlines() if re.match(r"^\d+,", line)]
    # 16384 tok = 256 samples of 64: 8 steps of 4, 4 of 8, then 12 of 16 (samples 64..256)
    assert len(rows) == 8 + 4 + 12
    assert rows[8].split(",")[:5] == ["8", "2048", "32", "8", "1"]


PLATEAU = {"name": "reduce_lr_on_plateau", "monitor": "metrics/eval/LanguageCrossEntropy"}
STEP_LR = {"name": "torch_lr_scheduler", "type": "StepLR", "step_size": 4, "gamma": 0.5}


def test_a_ramp_with_the_plateau_validates_with_its_time_part(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """validate --steps shows the steps of a plateau run with a ramp (the time part times each stage's factor: the LR
    until a cut, test_ramp_schedulers.py holds it to a real fit's bits) and says that cuts come on top; the ramp's own
    keys are still checked (a stage that is no multiple of the base batch is refused)."""
    cfg = copy.deepcopy(ramp_config())  # its stages are shared with the other tests: changed below
    cfg["scheduler"] = PLATEAU
    _, steps = ramp_steps(cfg)
    assert main(["validate", str(write(tmp_path, cfg)), "--steps"]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert "ramp: reduce_lr_on_plateau: the LR shown is the time part (base x warmup) times each stage's factor" in out
    assert "OK: " in out and "not previewed" not in out
    rows = [line.split(",") for line in out.splitlines() if re.match(r"^\d+,", line)]
    assert [(int(r[0]), int(r[3]), float(r[6])) for r in rows] == [(s.batch, s.size, s.lr) for s in steps]
    assert len({s.lr for s in steps}) == 3  # one LR per stage (no warmup): 1e-3 x 1, sqrt 2, 2
    cfg["batch_size_schedule"]["stages"][0]["global_train_batch_size"] = 6  # the base batch is 4
    assert main(["validate", str(write(tmp_path, cfg))]) == 2
    err = capsys.readouterr().err
    assert "batch_size_schedule.stages[0].global_train_batch_size: 6 is not a whole multiple" in err, err


def test_plot_of_a_ramp_with_the_plateau_replays_a_past_run_s_cuts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --metrics: the time part, and the line saying no cut is drawn. With --metrics: the cuts the rule makes
    on those evaluations, from the evaluation's batch on, in the CSV and the report (replay_plateau's rows, which
    test_ramp_schedulers.py holds to a real fit's bits). --at and --law stay refused with a ramp."""
    import csv

    cfg = ramp_config(scheduler={**PLATEAU, "patience": 0, "factor": 0.5})
    config, table, png = write(tmp_path, cfg), tmp_path / "lr.csv", tmp_path / "lr.png"
    _, time_part = ramp_steps(cfg)

    def plotted(*extra: str) -> list[tuple[int, float]]:
        assert main(["plot", str(config), "--out", str(png), "--csv", str(table), *extra]) == 0
        with open(table) as f:
            return [(int(r["batch"]), float(r["lr"])) for r in csv.DictReader(f)]

    assert plotted() == [(s.batch, s.lr) for s in time_part] and png.exists()
    assert "plateau: drawn without cuts (the time part base x warmup)" in capsys.readouterr().out
    metrics = tmp_path / "metrics.csv"
    metrics.write_text("batch,value\n6,3.0\n10,3.0\n14,2.0\n18,2.5\n30,1.0\n")  # 30: past the run's 24 batches
    steps, replay = replay_plateau(cfg, time_part, [(6, 3.0), (10, 3.0), (14, 2.0), (18, 2.5), (30, 1.0)])
    assert [c.batch for c in replay.cuts] == [10, 18] and replay.ignored == 1  # across the stage change at 12
    assert plotted("--metrics", str(metrics)) == [(s.batch, s.lr) for s in steps]
    assert steps[18].lr == 1e-3 * ((1.0 * 0.25) * 2.0) and steps[9].lr == time_part[9].lr
    out = capsys.readouterr().out
    assert "plateau: simulated 4 evaluations, 1 at or after the end of the run ignored: 2 cuts" in out, out
    assert "  cut at the evaluation after batch 9 (timestamp 10), from batch 10 on: scale 1 -> 0.5" in out
    assert main(["plot", str(config), "--at", "3", "--out", str(png)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert err == ["foundry-ext plot: error: --law and --at are not available for a config with a batch_size_schedule"]
    no_plateau = write(tmp_path, ramp_config(scheduler=STEP_LR))
    assert main(["plot", str(no_plateau), "--metrics", str(metrics), "--out", str(png)]) == 2
    err = capsys.readouterr().err
    assert "--metrics: only for scheduler.name: reduce_lr_on_plateau, not 'torch_lr_scheduler'" in err, err


def test_validate_and_plot_show_the_steps_of_a_ramp_with_a_torch_scheduler(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch's LR by the step times the stage factor: validate --steps and plot --csv give ramp_steps' rows (which
    test_ramp_schedulers.py holds to a real fit's bits)."""
    import csv

    config = write(tmp_path, ramp_config(scheduler=STEP_LR))
    _, steps = ramp_steps(load_train_config(str(config)))
    # 16384 tok = 256 samples of 64: 8 steps of 4, 4 of 8, then 12 of 16; StepLR halves every 4 steps
    assert [s.multiplier for s in steps[:6]] == [1.0] * 5 + [0.5]
    assert [s.lr for s in steps[7:9]] == [1e-3 * (0.5 * 1.0), 1e-3 * (0.5 * math.sqrt(2.0))]
    assert main(["validate", str(config), "--steps"]) == 0
    out = capsys.readouterr().out
    assert "ramp: stage 2: global batch 16, batches 12-23 (12 steps)" in out and "not previewed" not in out
    rows = [line.split(",") for line in out.splitlines() if re.match(r"^\d+,", line)]
    assert [(int(r[0]), float(r[6])) for r in rows] == [(s.batch, s.lr) for s in steps]
    table = tmp_path / "lr.csv"
    assert main(["plot", str(config), "--out", str(tmp_path / "lr.png"), "--csv", str(table)]) == 0
    with open(table) as f:
        assert [(int(r["batch"]), float(r["lr"])) for r in csv.DictReader(f)] == [(s.batch, s.lr) for s in steps]


def test_a_torch_scheduler_is_checked_against_the_ramp_s_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """OneCycleLR's total_steps against the ramp's 24 batches (not the 64 of a fixed batch of 4), in validate and
    before training (the torch config transform): one line naming the field."""
    from foundry_ext.config.errors import RunStopped
    from foundry_ext.trainer.torch_lr import torch_run_transform

    one_cycle = {"name": "torch_lr_scheduler", "type": "OneCycleLR", "max_lr": 1.0}
    ok = ramp_config(scheduler={**one_cycle, "total_steps": 23})  # the last batch, 23, is the step after 22
    assert main(["validate", str(write(tmp_path, ok))]) == 0, capsys.readouterr()
    assert torch_run_transform(copy.deepcopy(ok)) == ok
    short = ramp_config(scheduler={**one_cycle, "total_steps": 22})
    assert main(["validate", str(write(tmp_path, short))]) == 2
    line = ("scheduler.total_steps: OneCycleLR is defined for 22 steps but the run needs 23 (max_duration=16384tok: 24 "
            "batches of the ramp)")  # fmt: skip
    assert line in capsys.readouterr().err
    with pytest.raises(RunStopped, match=re.escape(line)):
        torch_run_transform(copy.deepcopy(short))


def test_the_check_accepts_the_callbacks_spelling() -> None:
    cfg = ramp_config()
    block = cfg.pop("batch_size_schedule")
    cfg["callbacks"]["batch_size_schedule"] = block
    p, problems, _ = check_batch_size_schedule(cfg)
    assert not problems and p is not None and p.sizes == (4, 8, 16)
    cfg["batch_size_schedule"] = block
    _, problems, _ = check_batch_size_schedule(cfg)
    assert [p.field for p in problems] == ["batch_size_schedule"]


@pytest.fixture(scope="module")
def law_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.law.paper import CURVES, TRAIN

    law = tmp_path_factory.mktemp("law") / "law.json"
    assert main(["law", "fit", *(str(CURVES / f"{n}.csv") for n in TRAIN), "--out", str(law)]) == 0
    return law


@pytest.mark.parametrize("command", ["predict", "tune"])
def test_the_loss_law_refuses_a_ramp_in_one_line(
    command: str, law_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``law`` has no batch term: predicting a ramped run's loss from its LRs alone would be wrong, so it refuses."""
    capsys.readouterr()
    extra = ["--grid", "scheduler.t_decay=0.1dur,0.2dur"] if command == "tune" else []
    assert main(["law", command, str(law_file), str(RAMP_YAML), *extra]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "batch_size_schedule: the loss law has no batch-size term" in lines[0], err


def test_plot_draws_the_steps_of_the_ramp(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """plot of a ramped config: every step's batch and LR (the preview's, which the real runs equal), CSV and PNG."""
    import csv

    png, table = tmp_path / "lr.png", tmp_path / "lr.csv"
    assert main(["plot", str(RAMP_YAML), "--out", str(png), "--csv", str(table)]) == 0
    out = capsys.readouterr().out
    assert "ramp: stage 2: global batch 32, batches 8-12 (5 steps)" in out and "LR max 0.006 at batch 8" in out
    _, steps = ramp_steps(load_train_config(str(RAMP_YAML)))
    with open(table) as f:
        rows = list(csv.DictReader(f))
    assert [(int(r["batch"]), int(r["token"]), int(r["global_batch"]), float(r["lr"])) for r in rows] == [
        (s.batch, s.token, s.size, s.lr) for s in steps
    ]
    assert png.stat().st_size > 10_000
