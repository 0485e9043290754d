"""spike_guard with reduce_lr_on_plateau watching the train loss: a skipped batch's loss is left out of its mean."""

from __future__ import annotations

import pytest
from composer.core import Callback, State
from composer.loggers import Logger

from foundry_ext.trainer.plateau.scheduler import ReduceLROnPlateauScheduler
from foundry_ext.trainer.spike_guard.callback import SpikeGuard
from foundry_ext.trainer.spike_guard.inject import InjectBadBatches
from tests.support.trainer_utils import make_trainer


class Losses(Callback):
    def __init__(self) -> None:
        self.losses: list[float] = []

    def batch_end(self, state: State, logger: Logger) -> None:
        del logger
        self.losses.append(float(state.total_loss_dict["loss/train/total"]))


@pytest.mark.parametrize("guarded", [True, False])
def test_plateau_mean_leaves_the_skipped_loss_out(guarded: bool) -> None:
    scheduler = ReduceLROnPlateauScheduler(monitor="loss/train/total", check_interval="14ba", patience=100)
    losses = Losses()
    callbacks: list[Callback] = [losses, InjectBadBatches([12])]
    if guarded:
        callbacks.insert(0, SpikeGuard(threshold=6.0, window=16, min_history=6))
    trainer, _ = make_trainer([scheduler], max_duration="14ba", callbacks=callbacks)
    trainer.fit()
    kept = [x for i, x in enumerate(losses.losses) if not (guarded and i == 12)]
    assert losses.losses[12] > 100 * losses.losses[11]  # the bad batch's loss is logged all the same
    assert scheduler.callback.plateau.best == pytest.approx(sum(kept) / len(kept), rel=1e-12)
