"""A branch of a ramped run, planned from its ramp (foundry_ext.anneal.ramp) without training: tiny-batch-ramp.yaml.

Its ramp: 8 samples per batch, 16 from sample 32 (batch 4), 32 from sample 96 (batch 8); 128 tokens per sample.
The branch of a real checkpoint is trained in tests/batch_size/test_ramp_training.py.
"""

from __future__ import annotations

import pytest

from foundry_ext.anneal.options import AnnealError, parse_decay
from foundry_ext.anneal.ramp import last_lr, plan_of_checkpoint, ramp_branch
from foundry_ext.config.train_yaml import load_train_config
from tests.support.launcher import REPO

YAML = str(REPO / "yamls" / "tiny-batch-ramp.yaml")
SAVED = {"BatchSizeScheduleCallback": {"starts": [0, 32, 96], "sizes": [8, 16, 32], "lr_scaling": "sqrt"}}


def branch_of(decay: str, batch: int = 6, sample: int = 64, overrides: tuple[str, ...] = ()):
    plan = plan_of_checkpoint(SAVED)
    assert plan is not None
    cfg = load_train_config(YAML, list(overrides))
    return ramp_branch(cfg, plan, batch, sample, sample * 128, parse_decay(decay).duration, decay)


def test_a_decay_in_tokens_is_the_ramp_s_batches_over_those_tokens_across_a_stage_change() -> None:
    branch = branch_of("8192tok")  # batches 6, 7 of 16 samples (2048 tokens each), 8 of 32 (4096)
    assert (branch.length, branch.end.batch, branch.end.sample) == (3, 9, 128)
    assert branch.max_duration == "16384tok"
    assert branch.scheduler("linear", 0.0) == {
        "name": "warmup_stable_decay",
        "t_warmup": "4096tok",  # the stable run's, in the decay's unit
        "t_decay_start": "8192tok",
        "decay_type": "linear",
        "alpha_f": 0.0,
    }
    assert (branch.factor, branch.last_factor) == (2**0.5, 2.0)
    # batch 8 trains at stage 2 (x 2) with the decay's value at batch 7's start (token 10240: a quarter done)
    cfg = {
        **load_train_config(YAML, []),
        "max_duration": branch.max_duration,
        "scheduler": branch.scheduler("linear", 0.0),
    }
    assert last_lr(cfg) == pytest.approx(3e-3 * 0.75 * 2, rel=1e-15)


def test_a_decay_in_samples_or_batches_keeps_its_unit() -> None:
    samples = branch_of("64sp")
    assert (samples.length, samples.max_duration, samples.scheduler("linear", 0.0)["t_decay_start"]) == (
        3,
        "128sp",
        "64sp",
    )
    batches = branch_of("3ba")
    assert (batches.length, batches.max_duration) == (3, "9ba")
    assert "t_warmup" in batches.scheduler("linear", 0.0) and batches.scheduler("linear", 0.0)["t_warmup"] == "4ba"


@pytest.mark.parametrize(
    ("decay", "overrides", "line"),
    [
        pytest.param(
            "4000tok",
            (),
            "--decay 4000tok: does not end where a batch of the ramp ends (batch_size_schedule: 8 from sample 0, 16 "
            "from sample 32, 32 from sample 96 (lr_scaling sqrt), from batch 6); give a length that does, e.g. "
            "2048tok, 4096tok",
            id="not-on-a-batch",
        ),
        pytest.param(
            "0.2dur",
            (),
            "--decay 0.2dur: a fraction of the branched run is ambiguous once the batch grows (batch_size_schedule); "
            "give the decay in tokens, samples or batches, e.g. '8192tok'",
            id="dur",
        ),
        pytest.param(
            "8192tok",
            ("batch_size_schedule.lr_scaling=none",),
            "batch_size_schedule: the checkpoint's run grew its batch as 8 from sample 0, 16 from sample 32, 32 from "
            "sample 96 (lr_scaling sqrt); the config's is another: keep the stable run's batch_size_schedule (the "
            "branch continues its batches)",
            id="another-ramp",
        ),
        pytest.param(
            "32768tok",
            (),
            "--decay 32768tok: the branch would end at 40960tok (batch 15), past the run's budget "
            "max_duration=32768tok; shorten the decay, or raise the budget with max_duration=...",
            id="past-the-budget",
        ),
    ],
)
def test_refusals_are_one_line(decay: str, overrides: tuple[str, ...], line: str) -> None:
    with pytest.raises(AnnealError) as e:
        branch_of(decay, overrides=overrides)
    assert str(e.value) == line


def test_a_checkpoint_without_the_ramp_s_state_has_no_plan() -> None:
    assert plan_of_checkpoint({"ScheduleResumeCheck": {}}) is None
    assert plan_of_checkpoint(None) is None
