"""The spike guard across a batch-size stage change, in a real Composer ``Trainer.fit()`` (a tiny regression model).

The guard's window counts accepted steps and holds each step's loss, the mean over the batch's samples (Composer
normalises by the samples seen), which estimates the same expected loss whatever the batch: doubling the batch keeps
its mean and shrinks its spread. So the window's history from the smaller batch over-states the spread after a change
(a looser threshold, never a false trip from the change itself), and is replaced step by step within ``window`` steps.
Here the loss has reached its noise floor by the change (batch 60: 4 -> 8 samples, the LR times sqrt 2): no batch is
skipped at or after it, and a real spike 3 batches later, when a reset window would not yet hold ``min_history``
steps, is caught.
"""

from __future__ import annotations

import statistics

import pytest
import torch
from composer import Trainer
from composer.core import Callback, State
from composer.loggers import Logger
from torch.utils.data import Dataset

from foundry_ext.trainer.batch_size import BatchSizeScheduleCallback, RampDataLoader
from foundry_ext.trainer.spike_guard.callback import SpikeGuard
from tests.support.trainer_utils import BASE_LR, TinyModel

pytestmark = pytest.mark.slow  # two real Trainer.fit() runs (~4 s)

CHANGE, SPIKE, END = 60, 63, 90  # batches: the first of 8 samples, the spoilt one, the run's length


class Regression(Dataset):
    """``y = sum(x) + 0.1 noise``; a sample is ``{0: x, 1: y}`` (a mapping: the ramp loader joins mappings)."""

    def __init__(self, n: int = 1024) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 4, generator=g)
        self.y = self.x.sum(dim=1, keepdim=True) + 0.1 * torch.randn(n, 1, generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[int, torch.Tensor]:
        return {0: self.x[i], 1: self.y[i]}


class Spoil(Callback):
    """Shift the targets of one batch by 10 before the forward pass: a finite loss spike (~100 against ~0.01)."""

    def __init__(self, at: int) -> None:
        self.at = at

    def after_dataloader(self, state: State, logger: Logger) -> None:
        del logger  # unused
        if state.timestamp.batch.value == self.at:
            state.batch = {0: state.batch[0], 1: state.batch[1] + 10.0}


class Sizes(Callback):
    """The samples and the loss of every batch the Trainer trains."""

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.losses: list[float] = []

    def after_dataloader(self, state: State, logger: Logger) -> None:
        del logger  # unused
        self.sizes.append(int(state.batch[0].shape[0]))

    def after_loss(self, state: State, logger: Logger) -> None:
        del logger  # unused
        self.losses.append(float(state.loss))  # type: ignore[arg-type]


def fit(*callbacks: Callback) -> tuple[SpikeGuard, Sizes]:
    torch.manual_seed(0)
    model = TinyModel()
    guard, sizes = SpikeGuard(threshold=6.0, window=16, min_history=6), Sizes()
    ramp = BatchSizeScheduleCallback(
        stages=[{"at": f"{CHANGE * 4}sp", "global_train_batch_size": 8}], lr_scaling="sqrt"
    )
    Trainer(
        model=model,
        train_dataloader=RampDataLoader(Regression(), batch_size=4, drop_last=True),
        max_duration=f"{END}ba",
        optimizers=torch.optim.SGD(model.parameters(), lr=BASE_LR),
        callbacks=[ramp, sizes, *callbacks, guard],
        device="cpu",
        progress_bar=False,
        log_to_console=False,
        seed=0,
    ).fit()
    return guard, sizes


def test_no_false_trip_at_the_stage_change_and_a_spike_after_it_is_caught() -> None:
    clean, sizes = fit()
    assert sizes.sizes == [4] * CHANGE + [8] * (END - CHANGE)  # the ramp really changed the batch
    assert [b for b, skipped, _ in clean.decisions if skipped] == []
    z_after = [z for b, _, z in clean.decisions if b >= CHANGE]
    assert max(z_after) < 6.0, z_after
    # at the floor, the per-batch loss's spread over 16 steps shrinks with the batch: the old steps loosen the test
    spread_4 = statistics.stdev(sizes.losses[CHANGE - 16 : CHANGE])
    spread_8 = statistics.stdev(sizes.losses[END - 16 : END])
    assert spread_8 < spread_4, (spread_4, spread_8)

    spoilt, _ = fit(Spoil(SPIKE))
    assert [(b, skipped) for b, skipped, _ in spoilt.decisions if skipped] == [(SPIKE, True)]
    z = next(z for b, _, z in spoilt.decisions if b == SPIKE)
    assert z > 100, z
