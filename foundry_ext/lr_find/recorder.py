"""The Composer callback of the range test: records (LR, loss) per batch, smooths, stops on divergence.

It is the only stateful part of ``lr-find`` (the ramp is a pure function of time). Every rank records rank 0's
loss (broadcast once per batch), so every rank computes the same smoothed curve, stops at the same batch and
makes the same suggestion, without trusting an all-reduce to be bitwise equal on every rank.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any

import torch
from composer.core import Callback, State
from composer.loggers import Logger
from composer.utils import dist

from foundry_ext.lr_find.rules import DEFAULT_BETA, DIVERGENCE_FACTOR

__all__ = ["LOSS_KEY", "LRFindRecorder", "TrainLoaderTooShortError"]

LOSS_KEY = "loss/train/total"  # Composer's all-reduced mean train loss of the batch, as it logs it


class TrainLoaderTooShortError(RuntimeError):
    """The train dataloader has fewer batches in an epoch than the range test needs."""


class LRFindRecorder(Callback):
    r"""Record the LR and train loss of every batch, smooth the loss, and stop once it diverges.

    At ``BATCH_START`` it reads the LR of the optimizer's first parameter group (the group llm-foundry gives
    ``optimizer.lr``), which is the LR this batch trains with. At ``BATCH_END`` it reads Composer's all-reduced
    ``state.total_loss_dict['loss/train/total']``, smooths it (:func:`~foundry_ext.lr_find.rules.smooth`, written out
    incrementally) and calls ``state.stop_training()`` when the smoothed loss is not finite or exceeds
    ``4 x`` its minimum so far.

    At ``FIT_START`` it checks that one epoch of the train loader has at least ``batches`` batches (Composer's
    ``state.dataloader_len``: what this world size and ``train_subset_num_batches`` give), and raises
    :class:`TrainLoaderTooShortError` before the first batch otherwise: repeating data would bend the curve. A loader
    without a length is caught when its epoch ends early.

    Args:
        batches (int): Planned batches (``--batches``).
        beta (float): Smoothing factor of the EMA. Default = ``0.9`` (fastai and Lightning use 0.98; see
            :mod:`foundry_ext.lr_find.rules`).
        progress (bool): Show progress on rank 0: a tqdm bar (ETA, current LR and smoothed loss) when stdout is a
            terminal, and one closing line ``lr-find: batch N/M ...`` in any case. Default = ``True``.
    """

    def __init__(self, batches: int, beta: float = DEFAULT_BETA, progress: bool = True) -> None:
        self.batches = batches
        self.beta = beta
        self.progress = progress
        self.lrs: list[float] = []
        self.losses: list[float] = []
        self.smoothed: list[float] = []
        self.stop_reason: str | None = None
        self._avg = 0.0
        self._min = math.inf
        self._start = 0.0
        self._bar: Any = None

    @property
    def stopped_early(self) -> bool:
        return self.stop_reason is not None

    def state_dict(self) -> dict[str, Any]:
        return {
            "lrs": list(self.lrs),
            "losses": list(self.losses),
            "smoothed": list(self.smoothed),
            "stop_reason": self.stop_reason,
            "avg": self._avg,
            "min": self._min,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.lrs = list(state["lrs"])
        self.losses = list(state["losses"])
        self.smoothed = list(state["smoothed"])
        self.stop_reason = state["stop_reason"]
        self._avg = state["avg"]
        self._min = state["min"]

    def fit_start(self, state: State, logger: Logger) -> None:
        del logger  # unused
        self._start = time.perf_counter()
        n = state.dataloader_len
        if n is not None and int(n) < self.batches:
            raise TrainLoaderTooShortError(
                f"--batches {self.batches}: the train loader yields only {int(n)} batches per epoch here (world size "
                f"{dist.get_world_size()}); lower --batches to at most {int(n)} or use more train data"
            )
        if self.progress and dist.get_global_rank() == 0 and sys.stdout.isatty():
            from tqdm import tqdm  # Composer's own progress bars use it

            self._bar = tqdm(total=self.batches, desc="lr-find", unit="ba", file=sys.stdout, dynamic_ncols=True)

    def batch_start(self, state: State, logger: Logger) -> None:
        del logger  # unused
        self.lrs.append(float(state.optimizers[0].param_groups[0]["lr"]))

    def batch_end(self, state: State, logger: Logger) -> None:
        del logger  # unused
        loss = float(state.total_loss_dict.get(LOSS_KEY, math.nan))
        if dist.get_world_size() > 1:  # the same value on every rank, so that every rank decides the same
            value = torch.tensor([loss], dtype=torch.float64)
            dist.broadcast(value, src=0)
            loss = float(value.item())
        i = len(self.losses)
        self.losses.append(loss)
        self._avg = self.beta * self._avg + (1.0 - self.beta) * loss
        smoothed = self._avg / (1.0 - self.beta ** (i + 1))
        self.smoothed.append(smoothed)
        self._min = min(self._min, smoothed)
        if not math.isfinite(smoothed):
            self.stop_reason = f"the smoothed loss is {smoothed} at batch {i}"
        elif smoothed > DIVERGENCE_FACTOR * self._min:
            self.stop_reason = (
                f"the smoothed loss {smoothed:.4g} exceeds {DIVERGENCE_FACTOR:g} x its minimum {self._min:.4g} at "
                f"batch {i}"
            )
        if self.stop_reason is not None:
            state.stop_training()
        self._print_progress(i)

    def epoch_end(self, state: State, logger: Logger) -> None:
        del state, logger  # unused
        if len(self.losses) < self.batches and self.stop_reason is None:
            self._close_bar()
            raise TrainLoaderTooShortError(
                f"--batches {self.batches}: the train loader ended after {len(self.losses)} batches (one epoch); "
                f"lower --batches to at most {len(self.losses)} or use more train data"
            )

    def fit_end(self, state: State, logger: Logger) -> None:
        del state, logger  # unused
        self._close_bar()

    def _close_bar(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def _print_progress(self, i: int) -> None:
        """Advance the bar (a terminal); after the last batch, or a stop, close it and print one line."""
        if not self.progress or dist.get_global_rank() != 0:
            return
        if self._bar is not None:
            self._bar.set_postfix(lr=f"{self.lrs[i]:.3e}", smoothed=f"{self.smoothed[i]:.4f}", refresh=False)
            self._bar.update(1)
        done = i + 1
        if done == self.batches or self.stop_reason is not None:
            self._close_bar()
            print(
                f"lr-find: batch {done}/{self.batches}  lr {self.lrs[i]:.3e}  loss {self.losses[i]:.4f}  "
                f"smoothed {self.smoothed[i]:.4f}  {time.perf_counter() - self._start:.1f}s",
                flush=True,
            )
