"""Composer's schedules by name: the same multipliers as Composer's own classes, validated configs, a real fit."""

from __future__ import annotations

import pytest
from composer import optim
from llmfoundry.utils.builders import build_scheduler

from foundry_ext import ConfigError
from foundry_ext.trainer.composer_schedulers import COMPOSER_SCHEDULERS
from tests.schedules.test_wsd import at, make_state
from tests.support.trainer_utils import BASE_LR, make_trainer

CONFIGS = {
    "step": {"step_size": "7ba", "gamma": 0.5},
    "multistep": {"milestones": ["10ba", "0.5dur"], "gamma": 0.3},
    "multistep_with_warmup": {"t_warmup": "5ba", "milestones": ["20ba", "40ba"], "gamma": 0.5},
    "constant": {"alpha": 0.7, "t_max": "30ba"},
    "linear": {"alpha_i": 1.0, "alpha_f": 0.1, "t_max": "0.8dur"},
    "exponential": {"gamma": 0.97, "decay_period": "2ba"},
    "cosine": {"t_max": "1dur", "alpha_f": 0.05},
    "cosine_with_restarts": {"t_0": "10ba", "t_mult": 2.0, "alpha_f": 0.1},
    "polynomial": {"power": 2.0, "t_max": "1dur", "alpha_f": 0.0},
    "polynomial_with_warmup": {"t_warmup": "0.1dur", "power": 1.5, "alpha_f": 0.1},
}


def test_every_composer_schedule_is_configured_here() -> None:
    assert set(CONFIGS) == set(COMPOSER_SCHEDULERS)


@pytest.mark.parametrize("ssr", [1.0, 0.5])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_same_multiplier_as_composer(name: str, ssr: float) -> None:
    ours = build_scheduler(name, dict(CONFIGS[name]))
    ours_cls, composer_cls = COMPOSER_SCHEDULERS[name]
    assert isinstance(ours, ours_cls) and isinstance(ours, composer_cls)
    reference = composer_cls(**CONFIGS[name])
    state = make_state("100ba")
    for t in range(0, 121):
        s = at(state, f"{t}ba")
        assert ours(s, ssr) == reference(s, ssr), (name, t)


@pytest.mark.parametrize(
    "name,kwargs,match",
    [
        ("step", {}, r"scheduler\.step_size: is required"),
        ("step", {"step_size": "10ba", "gama": 0.5}, r"scheduler\.gama: unknown key \(did you mean 'gamma'\?\)"),
        ("step", {"step_size": "0ba"}, r"scheduler\.step_size: '0ba' must be > 0"),
        ("multistep", {"milestones": "10ba"}, r"scheduler\.milestones: '10ba' \(str\) is not a list; expected a list"),
        ("multistep", {"milestones": ["10ba", "x"]}, r"scheduler\.milestones\[1\]: 'x' is not a duration"),
        ("exponential", {"gamma": -1}, r"scheduler\.gamma: -1 is out of range; expected a number > 0"),
        ("cosine", {"alpha_f": -0.1}, r"scheduler\.alpha_f: -0\.1 is out of range"),
        ("cosine_with_restarts", {"t_0": "10ba", "t_mult": 0.5}, r"scheduler\.t_mult: 0\.5 is out of range"),
        (
            "polynomial_with_warmup",
            {"t_warmup": "5ba", "scale_warmup": 1},
            r"scheduler\.scale_warmup: 1 \(int\) is not a bool",
        ),
    ],
)
def test_errors(name: str, kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        build_scheduler(name, kwargs)


def test_trainer_lr_follows_composer_schedule() -> None:
    scheduler = build_scheduler("multistep_with_warmup", dict(CONFIGS["multistep_with_warmup"]))
    reference = optim.MultiStepWithWarmupScheduler(**CONFIGS["multistep_with_warmup"])
    trainer, recorder = make_trainer([scheduler], max_duration="48ba")
    trainer.fit()
    state = make_state("48ba")
    assert sorted(recorder.lrs) == list(range(48))
    for k, lrs in recorder.lrs.items():  # Composer: the LR of batch k is computed at timestamp k - 1
        assert lrs[0] == pytest.approx(BASE_LR * reference(at(state, f"{max(k - 1, 0)}ba")), rel=1e-12), k
    assert recorder.lrs[47][0] == pytest.approx(BASE_LR * 0.25)
