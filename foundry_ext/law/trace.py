"""A run as the law sees it: the LR of every batch, and the losses measured after some numbers of batches.

Conventions (the same as ``foundry-ext plot`` and :mod:`foundry_ext.preview`): ``lr[b]`` is the LR that 0-indexed
batch ``b`` trains with; a loss at step ``t`` is measured after ``t`` batches, i.e. after batches ``0 .. t - 1``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Trace", "find_warmup"]


def find_warmup(lr: np.ndarray, rtol: float = 1e-9) -> int:
    """The number of warmup batches: batches ``0 .. W - 1`` rise (non-strictly) to the first peak, ``lr[W - 1]``.

    0 when the LR's first change is not a rise (no warmup). A rise is an increase of more than ``rtol`` of the peak;
    equal values before it (Composer gives batches 0 and 1 the same LR, 0 for a linear warmup) belong to the warmup.
    """
    if len(lr) < 2:
        return 0
    tol = rtol * float(np.max(np.abs(lr))) if len(lr) else 0.0
    diff = np.diff(lr)
    changes = np.nonzero(np.abs(diff) > tol)[0]
    if not len(changes) or diff[changes[0]] < 0:
        return 0
    falls = np.nonzero(diff < -tol)[0]
    end = int(falls[0]) + 1 if len(falls) else len(lr)  # the LR is non-decreasing on [0, end)
    # the warmup ends at the last strict rise before the first fall: a plateau after it is the stable phase
    rises = np.nonzero(diff[: end - 1] > tol)[0]
    return int(rises[-1]) + 2 if len(rises) else 0


@dataclass
class Trace:
    """One run: ``lr`` per batch (length ``n``), and ``loss[i]`` measured after ``steps[i]`` batches.

    Attributes:
        name: how reports name the run (a file or folder name).
        lr: the LR of every batch ``0 .. n - 1``.
        steps: increasing batch counts at which a loss is known (may be empty: a trace to predict).
        loss: the losses at ``steps``.
        warmup: warmup batches (``lr[warmup - 1]`` is the peak the decay term starts from); ``None``: found.
    """

    name: str
    lr: np.ndarray
    steps: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    loss: np.ndarray = field(default_factory=lambda: np.zeros(0))
    warmup: int | None = None

    def __post_init__(self) -> None:
        self.lr = np.asarray(self.lr, dtype=np.float64)
        self.steps = np.asarray(self.steps, dtype=np.int64)
        self.loss = np.asarray(self.loss, dtype=np.float64)
        if self.warmup is None:
            self.warmup = find_warmup(self.lr)

    @property
    def batches(self) -> int:
        """The number of batches whose LR the trace knows."""
        return len(self.lr)

    def fit_mask(self) -> np.ndarray:
        """The losses a fit uses: measured after the warmup ended (the law does not describe the warmup)."""
        return self.steps > max(int(self.warmup or 0), 0)
