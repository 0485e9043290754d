"""A batch-size ramp with the schedules stepped at run time, in a real Composer ``Trainer.fit()`` (tiny regression).

``torch_lr_scheduler`` and ``reduce_lr_on_plateau`` are not previewed for a ramped run (docs/batch_size.md); these
show that they train with one: the LR the optimizer really gets for every batch is the schedule's (torch's own
``StepLR`` by the step; torch's own ``ReduceLROnPlateau`` cut by the evaluations) times the stage's factor. The ramp:
4 samples per batch, 8 from sample 24 (batch 6 on), ``lr_scaling: linear`` (x 2).
"""

from __future__ import annotations

import pytest

from foundry_ext import ReduceLROnPlateauScheduler, TorchLRScheduler
from foundry_ext.trainer.batch_size import BatchSizeScheduleCallback, RampDataLoader
from tests.batch_size.test_ramp_spike_guard import Regression
from tests.plateau.test_plateau import MONITOR, torch_lrs
from tests.support.trainer_utils import BASE_LR, make_trainer

pytestmark = pytest.mark.slow  # real Trainer.fit() runs (~2 s each)

CHANGE = 6  # the first batch of 8 samples


def ramp_fit(scheduler: object, **kwargs: object) -> dict[int, list[float]]:
    ramp = BatchSizeScheduleCallback(
        stages=[{"at": f"{CHANGE * 4}sp", "global_train_batch_size": 8}], lr_scaling="linear"
    )
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
