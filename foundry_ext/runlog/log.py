"""What a run log holds for the law: LR and loss points, and how the LR runs between two LR points."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["LrLossLog"]


@dataclass
class LrLossLog:
    """The LR and the loss of one run, as logged.

    Attributes:
        name: a short name for reports (a CSV's file stem, an MLflow run's name).
        source: the source as given (a path or ``runs:/RUN_ID``).
        lr_steps: increasing steps at which the LR is known.
        lrs: the LR at ``lr_steps``.
        loss_steps: increasing batch counts after which a loss was measured.
        losses: the losses at ``loss_steps``.
        batches: the batches the run covers (``lr_per_batch()``'s length).
        between: ``"linear"`` (a CSV: ``lrs[i]`` is the LR of 0-indexed batch ``lr_steps[i]``, linear between rows)
            or ``"mlflow"`` (``lr_monitor``: the value at step ``b`` is the LR of batch ``b``, batch 0 has step 1's,
            a batch without a value has the last one logged: the logger drops repeated values).
    """

    name: str
    source: str
    lr_steps: np.ndarray
    lrs: np.ndarray
    loss_steps: np.ndarray
    losses: np.ndarray
    batches: int
    between: str

    def lr_per_batch(self) -> np.ndarray:
        """The LR of every 0-indexed batch ``0 .. batches - 1`` (``batches`` is bounded by the reader)."""
        batches = np.arange(self.batches)
        if self.between == "linear":
            return np.interp(batches, self.lr_steps.astype(np.float64), self.lrs)
        return self.lrs[np.maximum(np.searchsorted(self.lr_steps, batches, side="right") - 1, 0)]
