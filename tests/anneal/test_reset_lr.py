"""``callbacks.schedule_resume_check.reset_lr``: a resumed run trains at its config's LR, from its first batch.

Real Trainers: a stable run (SGD, LR 0.1) saves at batch 8; the resumed run's optimizer has LR 0.05.
"""

from __future__ import annotations

import logging

import pytest
import torch

from foundry_ext import ConfigError, WarmupStableDecayScheduler
from foundry_ext.trainer.resume_check import ScheduleResumeCheck
from tests.support.trainer_utils import make_trainer

WSD = WarmupStableDecayScheduler


@pytest.fixture
def checkpoint(tmp_path):
    stable, _ = make_trainer(
        [WSD(t_decay="0ba", t_max="1000ba")], max_duration="1000ba", save_folder=str(tmp_path), save_interval="8ba",
        train_size=4000,
    )  # fmt: skip
    stable.fit(duration="8ba")
    stable.close()
    return tmp_path / "ep0-ba8-rank0.pt"


def _resume(checkpoint, **keys):
    callbacks = [ScheduleResumeCheck(**keys)] if keys else []
    return make_trainer(
        [WSD(t_decay_start="8ba", alpha_f=0.1)], max_duration="16ba", load_path=str(checkpoint), train_size=4000,
        optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.05), callbacks=callbacks,
    )  # fmt: skip


def test_reset_lr_trains_at_the_new_lr_from_the_first_batch(checkpoint, caplog: pytest.LogCaptureFixture) -> None:
    trainer, recorder = _resume(checkpoint, reset_lr=True)
    with caplog.at_level(logging.WARNING):
        trainer.fit()
    assert recorder.lrs[8] == [0.05]  # exactly the new LR, announced
    assert recorder.lrs[9] == [0.05]  # the decay's p = 0
    new = WSD(t_decay_start="8ba", alpha_f=0.1)
    from tests.schedules.test_wsd import at, make_state

    state = make_state("16ba")
    for k in range(9, 16):
        assert recorder.lrs[k] == [0.05 * new(at(state, f"{k - 1}ba"))], k
    group = trainer.state.optimizers[0].param_groups[0]
    assert group["initial_lr"] == 0.05 and trainer.state.schedulers[0].base_lrs == [0.05]
    text = caplog.text + "".join(r.getMessage() for r in caplog.records)
    assert "reset_lr: resuming at batch 8 with this config's optimizer lr 0.05 instead of the checkpoint's 0.1" in text


def test_without_the_key_the_checkpoint_lr_is_kept_with_a_warning(checkpoint, caplog) -> None:
    trainer, recorder = _resume(checkpoint)
    with caplog.at_level(logging.WARNING):
        trainer.fit()
    assert recorder.lrs[8] == [0.1] and recorder.lrs[9] == [0.1]
    assert "optimizer lr 0.05 of this run's config is not used" in caplog.text


def test_a_bad_value_names_the_key() -> None:
    with pytest.raises(
        ConfigError, match=r"^callbacks\.schedule_resume_check\.reset_lr: 'yes' \(str\) is not a boolean"
    ):
        ScheduleResumeCheck(reset_lr="yes")


def test_reset_lr_applies_to_a_checkpoint_written_without_the_check(
    tmp_path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 46: a checkpoint of a run with Composer's own scheduler holds no ScheduleResumeCheck state.

    ``reset_lr: true`` was then ignored without a word (batch 8 and on trained at the checkpoint's 0.1); it asks for
    this config's LR whatever wrote the checkpoint, so it applies, announced as for any checkpoint.
    """
    from composer.optim import ConstantScheduler

    stable, _ = make_trainer(
        [ConstantScheduler()], max_duration="1000ba", save_folder=str(tmp_path), save_interval="8ba", train_size=4000
    )
    stable.fit(duration="8ba")
    stable.close()
    checkpoint = tmp_path / "ep0-ba8-rank0.pt"
    assert "ScheduleResumeCheck" not in torch.load(checkpoint, weights_only=False)["state"]["callbacks"]
    from foundry_ext.config import notices

    monkeypatch.setattr(notices, "_seen", set())  # the line is said once per process: another test may have said it
    trainer, recorder = _resume(checkpoint, reset_lr=True)
    with caplog.at_level(logging.WARNING):
        trainer.fit()
    assert recorder.lrs[8] == [0.05] and recorder.lrs[9] == [0.05]
    text = caplog.text + "".join(r.getMessage() for r in caplog.records)
    assert "reset_lr: resuming at batch 8 with this config's optimizer lr 0.05 instead of the checkpoint's 0.1" in text
