"""Bad batches on purpose, to watch the spike guard act: a callback that spoils chosen batches of a run.

At ``Event.AFTER_DATALOADER`` of each chosen batch (0-indexed), before the forward pass, it replaces the batch: the
token ids of a language-model batch (``input_ids``, ``labels``) by uniform random tokens (a seeded generator), the
targets of a ``(inputs, targets)`` batch by targets shifted by ``shift``. In a train YAML it is
``callbacks.inject_bad_batches`` (keys: :class:`foundry_ext.catalog.callbacks.InjectBadBatchesConfig`, checked by
``validate`` and before the first batch); in code, list it in ``callbacks=`` of a ``Trainer``. The tests and the
benchmark spoil batches with it; never list it in a run whose model you keep.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
from composer.core import Callback, State
from composer.loggers import Logger

__all__ = ["InjectBadBatches"]


class InjectBadBatches(Callback):
    """Spoil the batches ``at`` (0-indexed batch numbers of the run).

    Args:
        at (Iterable[int]): The batches to spoil.
        vocab_size (int): Random tokens are drawn from ``[0, vocab_size)``. Default = ``512`` (the demo tokenizer).
        seed (int): Seed of the random tokens (the same on every rank: each rank's batch differs anyway). Default = 0.
        shift (float): Added to the targets of a tuple batch. Default = ``100``.
    """

    def __init__(self, at: Iterable[int], vocab_size: int = 512, seed: int = 0, shift: float = 100.0) -> None:
        # the YAML's keys are checked, one line each, by the pre-flight (catalog/callbacks.InjectBadBatchesConfig)
        self.at = set(int(b) for b in at)
        self.vocab_size = int(vocab_size)
        self.seed = int(seed)
        self.shift = float(shift)
        self.spoiled: list[int] = []

    def after_dataloader(self, state: State, logger: Logger) -> None:
        del logger  # unused
        batch = state.timestamp.batch.value
        if batch not in self.at:
            return
        state.batch = self._spoil(state.batch, batch)
        self.spoiled.append(batch)

    def _spoil(self, batch: Any, index: int) -> Any:
        if isinstance(batch, Mapping) and "input_ids" in batch:
            ids = batch["input_ids"]
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
            noise = torch.randint(0, self.vocab_size, tuple(ids.shape), generator=g).to(ids.device, ids.dtype)
            out = dict(batch)
            out["input_ids"] = noise
            if "labels" in batch:
                labels = noise.clone()
                labels[batch["labels"] == -100] = -100  # padding stays padding
                out["labels"] = labels
            return out
        if isinstance(batch, (list, tuple)) and len(batch) == 2:
            x, y = batch
            return type(batch)((x, y + self.shift)) if isinstance(batch, tuple) else [x, y + self.shift]
        raise TypeError(f"InjectBadBatches: cannot spoil a batch of type {type(batch).__name__}")
