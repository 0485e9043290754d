"""``scale_schedule_ratio: 2.0`` under a real ``Trainer.fit()``, for every scheduler name this package registers.

Composer passes ``ssr`` only to a scheduler whose signature (of the instance) has two parameters; the LR at each batch
must then be the schedule at the scaled times: every duration in batches times ``ssr`` (truncated), the warmup
unscaled unless ``scale_warmup`` (Composer's rule), ``max_duration`` already scaled by the Trainer. The expected LR
comes from the schedule's formula with the durations scaled here by hand, from Composer's own class for Composer's
schedules, and from real torch for ``torch_lr_scheduler``.
"""

from __future__ import annotations

import inspect
import math
from importlib.metadata import entry_points
from typing import Any

import pytest
import torch

from foundry_ext import ConfigError, ReduceLROnPlateauScheduler, TorchLRScheduler
from foundry_ext.catalog.registry import SCHEDULE_MODELS
from foundry_ext.config.base import build
from foundry_ext.config.durations import timestamp_of_batch
from foundry_ext.trainer.composer_schedulers import COMPOSER_SCHEDULERS
from tests.support.trainer_utils import BASE_LR, make_trainer

SSR = 2.0
MAX = "16ba"  # the Trainer trains 32 batches
BATCHES = 32

#: One block per registered name: every duration in batches, so the scaled times are plain arithmetic.
BLOCKS: dict[str, dict[str, Any]] = {
    "warmup_stable_decay": {"t_warmup": "3ba", "t_decay": "6ba", "t_max": "14ba", "alpha_f": 0.1, "decay_type": "sqrt"},
    "wsd_periods": {"periods": ["6ba", "8ba"], "t_warmup": "2ba", "t_decay": "3ba", "alpha_f": 0.2},
    "inverse_sqrt": {"t_warmup": "3ba", "t_timescale": "2ba", "alpha_f": 0.05, "scale_warmup": True},
    "power": {"t_warmup": "3ba", "b": -0.5, "t_decay": "4ba", "t_max": "15ba"},
    "stages": {
        "stages": [{"duration": "4ba", "start": 0.0, "end": 1.0}, {"duration": "10ba", "end": 0.2, "shape": "cosine"}]
    },
    "step": {"step_size": "3ba", "gamma": 0.5},
    "multistep": {"milestones": ["3ba", "9ba"], "gamma": 0.5},
    "multistep_with_warmup": {"t_warmup": "2ba", "milestones": ["5ba", "11ba"], "gamma": 0.5},
    "constant": {"alpha": 0.5, "t_max": "7ba"},
    "linear": {"alpha_i": 1.0, "alpha_f": 0.1, "t_max": "12ba"},
    "exponential": {"gamma": 0.9},
    "cosine": {"t_max": "13ba", "alpha_f": 0.1},
    "cosine_with_restarts": {"t_0": "4ba", "t_mult": 2.0, "alpha_f": 0.1},
    "polynomial": {"power": 2.0, "t_max": "14ba", "alpha_f": 0.1},
    "polynomial_with_warmup": {"t_warmup": "3ba", "power": 2.0, "t_max": "16ba", "alpha_f": 0.1},
    "torch_lr_scheduler": {"type": "StepLR", "step_size": 3, "gamma": 0.5},
    "reduce_lr_on_plateau": {
        "monitor": "loss/train/total",  # checked every 100ba (x ssr): no cut in this run, the scale stays 1
        "check_interval": "100ba",
        "t_warmup": "3ba",
        "base": {"name": "warmup_stable_decay", "t_decay": "6ba", "t_max": "16ba", "alpha_f": 0.1},
    },
}


def _fit(scheduler: Any) -> list[float]:
    """The LR of each of the 32 batches of a real Trainer with ``scale_schedule_ratio=2.0``."""
    trainer, recorder = make_trainer([scheduler], max_duration=MAX, scale_schedule_ratio=SSR, train_size=128)
    trainer.fit()
    trainer.close()
    assert sorted(recorder.lrs) == list(range(BATCHES))
    return [recorder.lrs[b][0] for b in range(BATCHES)]


def _formula(name: str, block: dict[str, Any]) -> list[float]:
    """``BASE_LR x`` the model's formula, every duration scaled by ssr by hand (the warmup as Composer does)."""
    model = build(SCHEDULE_MODELS[name], block)
    unscaled = model.unscaled()
    d = {}
    for key, time in model.durations().items():
        assert time.unit == "ba", (key, time)  # the blocks above give batches
        d[key] = int(time.value) if key in unscaled else int(time.value * SSR)
    return [BASE_LR * model.multiplier(timestamp_of_batch(b), d) for b in range(BATCHES)]


def _torch(block: dict[str, Any]) -> list[float]:
    """Real torch: the scheduler stepped floor(t / ssr) times for the batch evaluated at timestamp t."""
    kwargs = {k: v for k, v in block.items() if k != "type"}
    lrs = []
    for b in range(BATCHES):
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=BASE_LR)
        sched = getattr(torch.optim.lr_scheduler, block["type"])(opt, **kwargs)
        for _ in range(int(timestamp_of_batch(b) / SSR)):
            opt.step()
            sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    return lrs


def test_every_registered_name_has_a_block() -> None:
    ours = {ep.name for ep in entry_points(group="llmfoundry_schedulers") if ep.dist and ep.dist.name == "foundry-ext"}
    assert set(BLOCKS) == ours


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_the_instance_signature_takes_ssr(name: str) -> None:
    """What Composer inspects: the instance's signature has (state, ssr); the class's still shows the YAML keys."""
    cls = entry_points(group="llmfoundry_schedulers", name=name)[0].load()
    block = dict(BLOCKS[name])
    if name == "reduce_lr_on_plateau":
        block["base"] = None
    assert list(inspect.signature(cls(**block)).parameters) == ["state", "ssr"]


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_fit_with_scale_schedule_ratio_follows_the_scaled_schedule(name: str) -> None:
    block = BLOCKS[name]
    cls = entry_points(group="llmfoundry_schedulers", name=name)[0].load()
    got = _fit(cls(**block))
    if name in COMPOSER_SCHEDULERS:
        expected = _fit(COMPOSER_SCHEDULERS[name][1](**block))  # Composer's own class, same Trainer, same ssr
    elif name == "torch_lr_scheduler":
        expected = _torch(block)
    elif name == "reduce_lr_on_plateau":
        base = {k: v for k, v in block["base"].items() if k != "name"}
        warmup = _formula(name, {k: v for k, v in block.items() if k != "base"})
        expected = [w * f / BASE_LR for w, f in zip(warmup, _formula("warmup_stable_decay", base), strict=True)]
    else:
        expected = _formula(name, block)
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert len(set(got)) >= 2  # the schedule moves within the run (constant: alpha, then 1 after t_max)


def test_a_base_that_cannot_scale_says_so_in_one_line() -> None:
    """A plateau over a one-argument base (a plain function of the state) cannot follow ssr: one line, the field."""
    scheduler = ReduceLROnPlateauScheduler(monitor="loss/train/total", check_interval="100ba", base=lambda s: 1.0)
    with pytest.raises(ConfigError) as info:
        make_trainer([scheduler], max_duration=MAX, scale_schedule_ratio=SSR)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("scheduler.base: ")
    assert "scale_schedule_ratio=2.0" in message


def test_a_base_that_cannot_scale_runs_without_ssr() -> None:
    scheduler = ReduceLROnPlateauScheduler(
        monitor="loss/train/total", check_interval="100ba", t_warmup="4ba", base=lambda s: 0.5
    )
    trainer, recorder = make_trainer([scheduler], max_duration="8ba")
    trainer.fit()
    trainer.close()
    assert recorder.lrs[6][0] == pytest.approx(BASE_LR * 0.5 * 1.0)
    assert recorder.lrs[2][0] == pytest.approx(BASE_LR * 0.5 * 1 / 4)


def test_torch_lr_scheduler_under_ssr_was_refused_before() -> None:
    """The defect: with the YAML keys as the instance's signature, a one-key scheduler looked like ``f(state)``."""
    scheduler = TorchLRScheduler(type="ExponentialLR", gamma=0.9)
    assert len(inspect.signature(scheduler).parameters) == 2
    lrs = _fit(scheduler)
    assert lrs[5] == pytest.approx(BASE_LR * 0.9 ** math.floor(4 / SSR), rel=1e-12)
