"""``warmup_stable_decay``'s ``t_decay_start``: the decay placed at an absolute time, as a branch writes it.

The branch (resumed from a stable checkpoint at batch ``s`` with ``t_decay_start: {s}ba``) must train bitwise as a
planned run whose ``t_decay`` ends the same decay at the same ``t_max``, trained on its own from batch 0.
"""

from __future__ import annotations

import math

import pytest
import torch

from foundry_ext import ConfigError, WarmupStableDecayScheduler
from tests.schedules.test_wsd import at, make_state
from tests.support.trainer_utils import BASE_LR, make_trainer

WSD = WarmupStableDecayScheduler


@pytest.mark.parametrize(
    "kwargs,max_duration,times,expected",
    [
        pytest.param(
            {"t_warmup": "10ba", "t_decay_start": "80ba"},
            "100ba",
            ["0ba", "5ba", "10ba", "79ba", "80ba", "90ba", "100ba", "150ba"],
            [0.0, 0.5, 1.0, 1.0, 1.0, 0.5, 0.0, 0.0],
            id="linear",
        ),
        pytest.param(  # the same start when max_duration grows: the decay is longer, its start does not move
            {"t_warmup": "10ba", "t_decay_start": "80ba"},
            "120ba",
            ["79ba", "80ba", "100ba", "120ba"],
            [1.0, 1.0, 0.5, 0.0],
            id="relaunch-longer",
        ),
        pytest.param(
            {"t_decay_start": "60ba", "decay_type": "sqrt", "alpha_f": 0.1},
            "160ba",
            ["0ba", "60ba", "85ba", "160ba"],
            [1.0, 1.0, 0.1 + 0.9 * (1 - math.sqrt(0.25)), 0.1],
            id="sqrt-floor",
        ),
        pytest.param(
            {"t_decay_start": "2000tok", "t_max": "4000tok"},
            "10000tok",
            ["1000tok", "2000tok", "3000tok", "4000tok", "5000tok"],
            [1.0, 1.0, 0.5, 0.0, 0.0],
            id="tokens",
        ),
        pytest.param(  # the start at t_max: constant, then alpha_f at t_max
            {"t_decay_start": "100ba", "alpha_f": 0.2},
            "100ba",
            ["99ba", "100ba"],
            [1.0, 0.2],
            id="start-at-end",
        ),
    ],
)
def test_multipliers(kwargs: dict, max_duration: str, times: list[str], expected: list[float]) -> None:
    scheduler = WSD(**kwargs)
    state = make_state(max_duration)
    assert [scheduler(at(state, t)) for t in times] == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    "kwargs,max_duration",
    [(dict(t_decay_start=f"{s}ba", decay_type=k), f"{s + n}ba") for s in (0, 7, 100) for n in (1, 9, 250)
     for k in ("linear", "sqrt", "cosine", "square")],
)  # fmt: skip
def test_equals_the_planned_t_decay_bitwise(kwargs: dict, max_duration: str) -> None:
    """``t_decay_start: s`` with ``max_duration: s + n`` is ``t_decay: n``, every batch to the last bit."""
    start, end = int(kwargs["t_decay_start"][:-2]), int(max_duration[:-2])
    branch = WSD(**kwargs, alpha_f=0.1)
    planned = WSD(t_decay=f"{end - start}ba", decay_type=kwargs["decay_type"], alpha_f=0.1)
    state = make_state(max_duration)
    for t in range(end + 2):
        assert branch(at(state, f"{t}ba")) == planned(at(state, f"{t}ba")), t


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (
            {"t_decay_start": "0.8dur"},
            "scheduler.t_decay_start: '0.8dur' is relative to max_duration, which a relaunch may change; expected an "
            "absolute duration",
        ),
        (
            {"t_decay_start": "80ba", "t_decay": "20ba"},
            "scheduler.t_decay_start: 80ba cannot be given with t_decay=20ba",
        ),
        ({"t_decay_start": "-5ba"}, "scheduler.t_decay_start: '-5ba' must be >= 0"),
        ({"t_decay_start": "2.5ba"}, "scheduler.t_decay_start: '2.5ba': batches must be a whole number"),
        ({"t_decay_start": 80}, "scheduler.t_decay_start: 80 (int) is not a duration"),
        (
            {"t_warmup": "20ba", "t_decay_start": "10ba", "t_max": "100ba"},
            "scheduler.t_decay_start: the decay does not start between the warmup's end and t_max",
        ),
        (
            {"t_decay_start": "200ba", "t_max": "100ba"},
            "scheduler.t_decay_start: the decay does not start between the warmup's end and t_max",
        ),
    ],
)
def test_bad_values_name_the_key(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        WSD(**kwargs)
    assert str(e.value).startswith(message), str(e.value)
    assert "\n" not in str(e.value)


def test_a_start_past_the_run_is_refused_when_the_trainer_calls_it() -> None:
    scheduler = WSD(t_decay_start="150ba")  # t_max 1dur = 100ba: known only with the run
    with pytest.raises(ConfigError, match=r"scheduler\.t_decay_start: the decay does not start .* 150, 100 ba"):
        scheduler(at(make_state("100ba"), "0ba"))


def test_the_decay_start_in_the_schema_and_the_validated_yaml() -> None:
    from foundry_ext.catalog.preflight import check_train_config
    from foundry_ext.catalog.schema import train_yaml_schema

    schema = train_yaml_schema()
    assert "t_decay_start" in str(schema)
    cfg = {"max_duration": "100ba", "scheduler": {"name": "warmup_stable_decay", "t_decay_start": "0.5dur"}}
    problems = [str(p) for p in check_train_config(cfg).errors]
    assert any(p.startswith("scheduler.t_decay_start: '0.5dur' is relative") for p in problems), problems


@pytest.mark.parametrize("decay_type", ["linear", "sqrt"])
def test_a_branch_from_a_stable_checkpoint_trains_as_the_planned_run(tmp_path, decay_type: str) -> None:
    """Real Trainers: stable run -> checkpoint at batch 16 -> branch with t_decay_start=16ba, against a planned run.

    The planned run (t_decay=14ba, max_duration=30ba) is trained on its own from batch 0: every LR of batches 16..29
    and the final weights are bitwise those of the branch.
    """
    stable, _ = make_trainer(
        [WSD(t_warmup="4ba", t_decay="0ba", t_max="1000ba")],
        max_duration="1000ba", save_folder=str(tmp_path / "stable"), save_interval="16ba", train_size=4000,
    )  # fmt: skip
    stable.fit(duration="16ba")
    stable.close()
    ckpt = tmp_path / "stable" / "ep0-ba16-rank0.pt"

    branch_scheduler = WSD(t_warmup="4ba", t_decay_start="16ba", decay_type=decay_type, alpha_f=0.1)
    branch, branch_lrs = make_trainer([branch_scheduler], max_duration="30ba", load_path=str(ckpt), train_size=4000)
    branch.fit()
    planned, planned_lrs = make_trainer(
        [WSD(t_warmup="4ba", t_decay="14ba", decay_type=decay_type, alpha_f=0.1)], max_duration="30ba", train_size=4000
    )
    planned.fit()

    assert sorted(branch_lrs.lrs) == list(range(16, 30))
    for k in range(16, 30):
        assert branch_lrs.lrs[k] == planned_lrs.lrs[k], k
    assert branch_lrs.lrs[16] == [BASE_LR] and branch_lrs.lrs[17] == [BASE_LR]  # the decay's p = 0 is the peak
    assert branch_lrs.lrs[29][0] < BASE_LR
    for a, b in zip(branch.state.model.parameters(), planned.state.model.parameters(), strict=True):
        assert torch.equal(a, b)
