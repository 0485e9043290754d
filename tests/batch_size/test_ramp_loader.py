"""The ramped loader in-process: each batch is the stage's number of base batches, decided by the samples trained.

The Trainer's side is ``tests/batch_size/test_ramp_training.py``; here a real ``DataLoader`` over a real dataset,
advanced with Composer's own ``Timestamp.to_next_batch`` as the Trainer does after every batch.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from composer.core import Timestamp
from torch.utils.data import Dataset

from foundry_ext.config.base import build
from foundry_ext.schedules.batch_size import BatchSizeSchedule, plan_of
from foundry_ext.trainer.batch_size import RampDataLoader, concat


class Numbers(Dataset):
    """Sample ``i`` is a dict like llm-foundry's text batches: a tensor row and per-sample list values."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> dict[str, object]:
        return {"input_ids": torch.full((3,), i), "total_tokens": 3}


def collate(rows: list[dict[str, object]]) -> dict[str, object]:
    return {"input_ids": torch.stack([r["input_ids"] for r in rows]), "total_tokens": [r["total_tokens"] for r in rows]}


def ramp_loader(stages: list[dict[str, object]], base: int = 4) -> tuple[RampDataLoader, SimpleNamespace]:
    plan, problems = plan_of(build(BatchSizeSchedule, {"stages": stages}), base, 3)
    assert not problems and plan is not None
    loader = RampDataLoader(Numbers(), batch_size=base, collate_fn=collate, drop_last=True)
    state = SimpleNamespace(timestamp=Timestamp())
    loader.ramp_state, loader.ramp_plan = state, plan  # what the callback binds at FIT_START
    return loader, state


def test_batches_grow_with_the_samples_trained() -> None:
    loader, state = ramp_loader(
        [{"at": "8sp", "global_train_batch_size": 8}, {"at": "24sp", "global_train_batch_size": 16}]
    )
    seen = []
    for batch in loader:
        n = batch["input_ids"].shape[0]
        seen.append(batch["input_ids"][:, 0].tolist())
        assert batch["total_tokens"] == [3] * n
        state.timestamp = state.timestamp.to_next_batch(samples=n, tokens=3 * n)
    # 2 batches of 4 (samples 0-7), 2 of 8 (8-23), then 16 (24-39, 40-55); 56-63 cannot fill a group: dropped
    assert [len(b) for b in seen] == [4, 4, 8, 8, 16, 16]
    assert [i for b in seen for i in b] == list(range(56))  # every sample once, in the loader's order


def test_a_loader_not_bound_to_a_run_says_so() -> None:
    loader = RampDataLoader(Numbers(), batch_size=4, collate_fn=collate)
    with pytest.raises(RuntimeError, match=r"needs callbacks\.batch_size_schedule"):
        next(iter(loader))
    with pytest.raises(TypeError, match="no length in batches"):
        len(loader)


def test_concat_refuses_rows_of_different_lengths() -> None:
    with pytest.raises(RuntimeError, match="padded to max_seq_len"):
        concat([torch.zeros(2, 3), torch.zeros(2, 4)])
