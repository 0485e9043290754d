"""A batch-size ramp with the schedules stepped at run time, in a real Composer ``Trainer.fit()`` (tiny regression).

The LR the optimizer really gets for every batch is the schedule's (torch's own ``StepLR`` by the step; torch's own
``ReduceLROnPlateau`` cut by the evaluations) times the stage's factor. Both are previewed with a ramp (``foundry-ext
plot`` / ``validate --steps``, :func:`foundry_ext.preview.batch_size.ramp_steps`; the plateau's cuts replayed from
the run's evaluations, ``plot --metrics``, :func:`~foundry_ext.preview.batch_size.replay_plateau`): the preview of
every batch is the optimizer's LR, bit for bit. The ramp: 4 samples per batch, 8 from sample 24 (batch 6 on),
``lr_scaling: linear`` (x 2; the bitwise checks use ``sqrt``).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from composer.core import Callback, State
from composer.loggers import Logger

from foundry_ext import ReduceLROnPlateauScheduler, TorchLRScheduler
from foundry_ext.preview.batch_size import ramp_steps, replay_plateau
from foundry_ext.trainer.batch_size import BatchSizeScheduleCallback, RampDataLoader
from tests.batch_size.test_ramp_spike_guard import Regression
from tests.plateau.test_plateau import MONITOR, torch_lrs
from tests.support.configs import tiny_train_config
from tests.support.launcher import REPO
from tests.support.trainer_utils import BASE_LR, make_trainer

pytestmark = pytest.mark.slow  # real Trainer.fit() runs (~2 s each)

CHANGE = 6  # the first batch of 8 samples


RAMP = {"stages": [{"at": f"{CHANGE * 4}sp", "global_train_batch_size": 8}], "lr_scaling": "linear"}


def ramp_fit(scheduler: object, ramp_keys: dict[str, Any] = RAMP, **kwargs: object) -> dict[int, list[float]]:
    ramp = BatchSizeScheduleCallback(**ramp_keys)
    loader = RampDataLoader(Regression(), batch_size=4, drop_last=True)
    trainer, recorder = make_trainer([scheduler], callbacks=[ramp], train_dataloader=loader, **kwargs)  # type: ignore[arg-type]
    trainer.fit()
    return recorder.lrs


def factor(batch: int) -> float:
    return 2.0 if batch >= CHANGE else 1.0


def test_torch_step_lr_with_a_ramp_is_the_step_s_lr_times_the_stage_factor() -> None:
    lrs = ramp_fit(TorchLRScheduler(type="StepLR", step_size=4, gamma=0.5), max_duration="12ba")
    assert sorted(lrs) == list(range(12))
    for b, got in lrs.items():
        step = max(b - 1, 0)  # Composer's rule: batch b trains with the LambdaLR value at timestamp b - 1
        assert got == [BASE_LR * (0.5 ** (step // 4) * factor(b))], b


def test_plateau_with_a_ramp_cuts_as_torch_and_keeps_the_stage_factor() -> None:
    values = [3.0, 3.0, 3.0]  # no improvement: torch cuts at the second evaluation (patience 0)
    lrs = ramp_fit(
        ReduceLROnPlateauScheduler(monitor=MONITOR, factor=0.5, patience=0),
        max_duration="12ba",
        eval_values=values,
        eval_interval="4ba",
    )
    expected = torch_lrs(values, factor=0.5, patience=0)
    assert expected[1] < BASE_LR  # a cut happened
    for b, got in lrs.items():
        evals_done = b // 4  # evaluation i runs after batch (i + 1) * 4 - 1
        want = BASE_LR if evals_done == 0 else expected[evals_done - 1]
        assert got == [pytest.approx(want * factor(b), rel=1e-12)], b


# torch classes whose LR changes inside both stages; OneCycleLR's 11 steps are the ramp's (12 batches in 72 samples,
# the last one's step never trained), where a fixed batch of 4 would need 17
TORCH = [
    pytest.param({"type": "StepLR", "step_size": 4, "gamma": 0.5}, id="StepLR"),
    pytest.param({"type": "OneCycleLR", "max_lr": 1.0, "total_steps": 11}, id="OneCycleLR"),
    pytest.param(
        {"type": "SequentialLR", "milestones": [3], "schedulers": [
            {"type": "LinearLR", "start_factor": 0.25, "total_iters": 3}, {"type": "CosineAnnealingLR", "T_max": 7}]},
        id="SequentialLR",
    ),
]  # fmt: skip


# the sqrt rule: x sqrt(2) is not exact, so the preview must multiply in the optimizer's order to equal its bits
RAMP_SQRT = {**RAMP, "lr_scaling": "sqrt"}


def ramp_yaml(scheduler: dict[str, Any], max_duration: str) -> dict[str, Any]:
    """The train YAML of the run below: base batch 4, :data:`RAMP_SQRT`, the optimizer's LR, the length."""
    cfg = tiny_train_config(max_duration=max_duration, batch_size_schedule=RAMP_SQRT)
    cfg["train_loader"]["dataset"]["local"] = str(REPO / "demo-data")  # the ramp's check reads its epoch's size
    cfg["optimizer"]["lr"] = BASE_LR
    cfg["scheduler"] = {"name": "torch_lr_scheduler", **scheduler}
    return cfg


@pytest.mark.parametrize("scheduler", TORCH)
def test_torch_scheduler_with_a_ramp_trains_the_preview_bit_for_bit(scheduler: dict[str, Any]) -> None:
    """plot's and validate's rows (ramp_steps) against the LR the optimizer received in a real fit, every batch."""
    _, steps = ramp_steps(ramp_yaml(scheduler, "72sp"))
    assert [s.size for s in steps] == [4] * CHANGE + [8] * 6  # 72 samples: 6 batches of 4, then 6 of 8
    lrs = ramp_fit(TorchLRScheduler(**scheduler), RAMP_SQRT, max_duration="72sp")
    assert sorted(lrs) == [s.batch for s in steps]
    assert len({s.multiplier for s in steps[:CHANGE]}) > 1 and len({s.multiplier for s in steps[CHANGE:]}) > 1
    for s in steps:
        assert lrs[s.batch] == [s.lr], (s, lrs[s.batch])  # exactly: LambdaLR's base_lr * (m * f)
    assert steps[-1].factor == 2**0.5


def test_plateau_with_a_ramp_trains_the_replayed_preview_bit_for_bit() -> None:
    """The time part (a 36-sample warmup that ends inside the second stage) and a cut after the stage change.

    Evaluations every 2 batches, all 3.0, patience 0: those at timestamps 2, 4 and 6 (8, 16, 24 samples) fall in the
    warmup and are not counted, 8 (40 samples: batches 6 and 7 are 8 each) sets the best, 10 cuts (x 0.5); 12 is the
    run's end. At a fixed batch of 4, timestamp 8 would be 32 samples, still in the warmup, and no cut would come.
    """
    keys = {"monitor": MONITOR, "factor": 0.5, "patience": 0, "t_warmup": "36sp"}
    values = [3.0] * 6
    lrs = ramp_fit(ReduceLROnPlateauScheduler(**keys), RAMP_SQRT, max_duration="72sp", eval_values=values,
                   eval_interval="2ba")  # fmt: skip
    cfg = ramp_yaml({"name": "reduce_lr_on_plateau", **keys}, "72sp")
    _, time_part = ramp_steps(cfg)
    steps, replay = replay_plateau(cfg, time_part, list(zip(range(2, 13, 2), values, strict=True)))
    assert (replay.skipped, replay.ignored, [c.batch for c in replay.cuts]) == (3, 1, [10])
    assert sorted(lrs) == [s.batch for s in steps]
    assert 0 < steps[7].multiplier < 1 and steps[7].factor == 2**0.5  # inside the warmup, in the second stage
    for s in steps:
        assert lrs[s.batch] == [s.lr], (s, lrs[s.batch])  # exactly: LambdaLR's base_lr * ((m * scale) * f)
    assert [s.lr for s in steps[:10]] == [s.lr for s in time_part[:10]] and steps[10].lr == time_part[10].lr / 2


class MicrobatchCounter(Callback):
    """The samples of every forward pass in training (one per microbatch)."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def before_forward(self, state: State, logger: Logger) -> None:
        del logger  # unused
        self.sizes.append(int(state.batch[0].shape[0]))


def test_one_microbatch_size_serves_every_stage() -> None:
    """``device_train_microbatch_size: 2`` splits the first stage's batches of 4 in two and the second's of 8 in four,
    and the run ends with the weights of the same run unsplit (Composer scales each microbatch's loss by its share of
    the batch): equal to float rounding, after 12 batches across the stage change."""
    weights, counts = {}, {}
    for micro in (2, 8):
        counter = MicrobatchCounter()
        loader = RampDataLoader(Regression(), batch_size=4, drop_last=True)
        ramp = BatchSizeScheduleCallback(**RAMP)
        trainer, _ = make_trainer([], callbacks=[ramp, counter], train_dataloader=loader, max_duration="72sp",
                                  device_train_microbatch_size=micro)  # fmt: skip
        start = [p.detach().clone() for p in trainer.state.model.parameters()]
        trainer.fit()
        weights[micro] = [p.detach().clone() for p in trainer.state.model.parameters()]
        counts[micro] = counter.sizes
        assert not any(torch.equal(a, b) for a, b in zip(start, weights[micro], strict=True))  # it trained
    assert counts[2] == [2] * (2 * CHANGE + 4 * 6)  # 6 batches of 4 in two, 6 of 8 in four
    assert counts[8] == [4] * CHANGE + [8] * 6
    for split, whole in zip(weights[2], weights[8], strict=True):
        torch.testing.assert_close(split, whole, rtol=1e-6, atol=1e-7)
