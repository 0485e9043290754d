"""Checks that need the run fire when the Trainer is built or at FIT_START, before the first batch, never later."""

from __future__ import annotations

import logging

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset

from foundry_ext.config import notices
from foundry_ext.config.errors import ConfigError
from foundry_ext.trainer.composer_schedulers import MultiStepWithWarmupScheduler
from foundry_ext.trainer.schedulers import WarmupStableDecayScheduler
from foundry_ext.trainer.torch_lr import TorchLRScheduler
from tests.support.trainer_utils import make_trainer


def test_onecycle_shorter_than_the_run_fails_when_the_trainer_is_built() -> None:
    scheduler = TorchLRScheduler(type="OneCycleLR", max_lr=1.0, total_steps=20)
    with pytest.raises(
        ConfigError, match=r"^scheduler\.total_steps: OneCycleLR is defined for 20 steps but the run needs 39"
    ):
        make_trainer([scheduler], max_duration="40ba")


def test_warmup_longer_than_the_run_is_one_warning_at_the_first_call(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(notices, "_seen", set())
    scheduler = MultiStepWithWarmupScheduler(t_warmup="30ba", milestones=["10ba"])
    with caplog.at_level(logging.WARNING, logger="foundry_ext"):
        trainer, recorder = make_trainer([scheduler], max_duration="20ba")
        assert recorder.lrs == {}  # said while the Trainer was built, before the first batch
        warnings = [r.getMessage() for r in caplog.records if "longer than the run" in r.getMessage()]
        trainer.fit()
    assert warnings == [
        "foundry-ext: warning: scheduler.t_warmup: the warmup (30ba = 30 batches) is longer than the run "
        "(max_duration=20ba = 20 batches): the LR never reaches its peak; shorten t_warmup or raise max_duration"
    ]
    assert [r.getMessage() for r in caplog.records].count(warnings[0]) == 1  # once, not at every call


class _NoLength(IterableDataset):
    def __iter__(self):  # type: ignore[no-untyped-def]
        g = torch.Generator().manual_seed(0)
        for _ in range(16):
            x = torch.randn(4, 4, generator=g)
            yield x, x.sum(dim=1, keepdim=True)


def test_epochs_without_a_dataloader_length_fail_before_the_first_batch() -> None:
    """A dataloader without ``len``: a duration in epochs cannot be converted; one line names the field."""
    from composer import Trainer

    from tests.support.trainer_utils import TinyModel

    model = TinyModel()
    scheduler = WarmupStableDecayScheduler(t_warmup="1ep", t_decay="0ba", t_max="10ba")
    with pytest.raises(ConfigError, match=r"scheduler\.t_warmup=1ep .* need the number of batches per epoch"):
        Trainer(
            model=model,
            train_dataloader=DataLoader(_NoLength(), batch_size=None),
            max_duration="10ba",
            optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
            schedulers=[scheduler],
            device="cpu",
            progress_bar=False,
        )
