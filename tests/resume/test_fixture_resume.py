"""A checkpoint written by foundry-ext before the layout of issue 20 still resumes, with the same LR at every batch.

``tests/resume/fixtures/plateau_resume/`` holds the batch-12 checkpoint of a 24-batch run (``reduce_lr_on_plateau`` over
a WSD base, its callback, ``checkpoint_guard`` and the ``ScheduleResumeCheck``) and the LR of every batch of that
uninterrupted run, written by ``tests/resume/fixtures/make_plateau_resume.py`` with the code of main at 1ad175c.
Composer keys each callback's saved state by its class ``__qualname__`` and unpickles the objects of the checkpoint by
module path: a renamed class or a module that moved without a way back would lose the plateau state or fail to load.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from foundry_ext import ReduceLROnPlateauCallback, ReduceLROnPlateauScheduler, WarmupStableDecayScheduler
from foundry_ext.trainer.checkpoint_guard import CheckpointGuard
from tests.resume.fixtures.make_plateau_resume import BASE, CHECKPOINT, EVAL_VALUES, HERE, RUN, SETTINGS
from tests.support.trainer_utils import make_trainer


def test_the_fixture_checkpoint_resumes_with_the_same_lr_at_every_batch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    expected = {int(batch): lrs for batch, lrs in json.loads((HERE / "lrs.json").read_text()).items()}
    assert sorted(expected) == list(range(24))
    assert len({lrs[0] for lrs in expected.values()}) > 10  # the LR really moves: warmup, cuts and the decay
    load = tmp_path / "load" / CHECKPOINT
    load.parent.mkdir()
    shutil.copyfile(HERE / CHECKPOINT, load)  # the repository's copy is never written

    scheduler = ReduceLROnPlateauScheduler(**SETTINGS, base=WarmupStableDecayScheduler(**BASE))
    callback = ReduceLROnPlateauCallback()
    trainer, recorder = make_trainer(
        [scheduler],
        eval_values=EVAL_VALUES[3:],  # the evaluations at batches 4, 8 and 12 are in the checkpoint
        callbacks=[callback, CheckpointGuard()],
        save_folder=str(tmp_path / "save"),
        save_interval="12ba",
        load_path=str(load),
        **RUN,
    )
    with caplog.at_level(logging.WARNING, logger="foundry_ext"):
        trainer.fit()
    trainer.close()

    assert sorted(recorder.lrs) == list(range(12, 24))
    for batch, lrs in recorder.lrs.items():
        assert lrs == pytest.approx(expected[batch], rel=1e-12, abs=0), batch
    assert [r.getMessage() for r in caplog.records if "resume" in r.getMessage().lower()] == []
