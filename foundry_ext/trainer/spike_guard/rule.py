r"""The skip rule, pure Python (no torch): a running window of accepted steps, a z-score, a decision.

For a step with training loss :math:`x` (and gradient norm :math:`g`), over the last ``window`` *accepted* steps
:math:`x_1..x_n` (:math:`n \ge` ``min_history``):

.. math::
    \bar{x} = \frac{1}{n}\sum_i x_i, \qquad s = \sqrt{\frac{1}{n-1}\sum_i (x_i - \bar{x})^2}, \qquad
    z = \frac{x - \bar{x}}{s}

and the step is skipped when :math:`x - \bar{x} > \tau s` (``threshold`` :math:`\tau`), or the same holds for
:math:`g`, or either is not finite (always, even before ``min_history``). This is OLMo-core's
``SkipStepOptimizer.get_step_factor`` test, with one difference: its window keeps every step, skipped ones included,
so a burst widens its own threshold; this window keeps only accepted steps.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any

__all__ = ["Decision", "SpikeRule", "mean_std", "olmo_core_rule", "z_score"]


@dataclass(frozen=True)
class Decision:
    """What the rule decided for one step: ``skip``, the loss's z-score (``nan`` before ``min_history``), why."""

    skip: bool
    z: float
    grad_z: float
    reason: str  # "" when accepted; "loss", "grad_norm", "non-finite"


def mean_std(values: Any) -> tuple[float, float]:
    """Mean and sample standard deviation (Bessel's n - 1, as ``torch.std``) of at least two values."""
    values = list(values)
    n = len(values)
    mean = math.fsum(values) / n
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var)


def z_score(value: float, mean: float, std: float) -> float:
    r""":math:`(x - \bar{x}) / s`; ``+inf`` / ``0`` / ``-inf`` when :math:`s = 0`."""
    if std > 0:
        return (value - mean) / std
    return math.copysign(math.inf, value - mean) if value != mean else 0.0


class SpikeRule:
    r"""The decision of :mod:`foundry_ext.trainer.spike_guard` for one step at a time (the same on every rank).

    Args:
        threshold (float): :math:`\tau`, in standard deviations.
        window (int): Accepted steps kept.
        min_history (int): Accepted steps needed before a z-score can skip.
        max_skips (int): Consecutive skips after which :meth:`stop_reason` names it.
        ceiling (float, optional): A loss above it makes :meth:`stop_reason` name it.
    """

    def __init__(
        self,
        threshold: float = 6.0,
        window: int = 128,
        min_history: int = 64,
        max_skips: int = 10,
        ceiling: float | None = None,
    ) -> None:
        self.threshold = threshold
        self.window = window
        self.min_history = min_history
        self.max_skips = max_skips
        self.ceiling = ceiling
        self.losses: deque[float] = deque(maxlen=window)
        self.grad_norms: deque[float] = deque(maxlen=window)
        self.skips = 0  # skips in the whole run
        self.consecutive = 0
        self.first_skip_batch: int | None = None  # the first batch of the current burst

    def _test(self, value: float, history: deque[float]) -> tuple[bool, float]:
        if len(history) < self.min_history:
            return False, math.nan
        mean, std = mean_std(history)
        return value - mean > self.threshold * std, z_score(value, mean, std)

    def decide(self, loss: float, grad_norm: float | None = None) -> Decision:
        """Decide on a step (without recording it: see :meth:`record`)."""
        if not math.isfinite(loss) or (grad_norm is not None and not math.isfinite(grad_norm)):
            z = self._test(loss, self.losses)[1] if math.isfinite(loss) else math.nan
            return Decision(True, z, math.nan, "non-finite")
        skip_loss, z = self._test(loss, self.losses)
        skip_grad, gz = (False, math.nan) if grad_norm is None else self._test(grad_norm, self.grad_norms)
        reason = "loss" if skip_loss else "grad_norm" if skip_grad else ""
        return Decision(skip_loss or skip_grad, z, gz, reason)

    def record(self, decision: Decision, loss: float, grad_norm: float | None, batch: int) -> None:
        """Add an accepted step to the window, or count a skip."""
        if decision.skip:
            self.skips += 1
            self.consecutive += 1
            if self.first_skip_batch is None:
                self.first_skip_batch = batch
            return
        self.consecutive = 0
        self.first_skip_batch = None
        self.losses.append(loss)
        if grad_norm is not None:
            self.grad_norms.append(grad_norm)

    def step(self, loss: float, grad_norm: float | None = None, batch: int = 0) -> Decision:
        """:meth:`decide` then :meth:`record`."""
        decision = self.decide(loss, grad_norm)
        self.record(decision, loss, grad_norm, batch)
        return decision

    def stop_reason(self, loss: float) -> str | None:
        """Why the run must stop after the step just recorded, or ``None``."""
        if self.ceiling is not None and not loss <= self.ceiling:
            return f"loss {loss:.6g} is above ceiling {self.ceiling:g}"
        if self.consecutive >= self.max_skips:
            return f"{self.consecutive} consecutive skips (max_skips {self.max_skips})"
        return None

    def state_dict(self) -> dict[str, Any]:
        return {
            "losses": list(self.losses),
            "grad_norms": list(self.grad_norms),
            "skips": self.skips,
            "consecutive": self.consecutive,
            "first_skip_batch": self.first_skip_batch,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.losses = deque((float(v) for v in state["losses"]), maxlen=self.window)
        self.grad_norms = deque((float(v) for v in state["grad_norms"]), maxlen=self.window)
        self.skips = int(state["skips"])
        self.consecutive = int(state["consecutive"])
        self.first_skip_batch = state["first_skip_batch"]


def olmo_core_rule(losses: list[float], threshold: float = 6.0, window: int = 128) -> list[bool]:
    """OLMo-core's decision (``SkipStepOptimizer.get_step_factor``, loss only) over a loss sequence: skipped or not.

    Its list keeps the last ``window + 1`` losses, skipped ones included; a step is tested once the list (with the
    step itself) holds ``max(2, window // 2)``; a NaN loss is skipped (the comparison is false) only then.
    """
    kept: list[float] = []
    out: list[bool] = []
    for x in losses:
        kept.append(x)
        while len(kept) > window + 1:
            kept.pop(0)
        if len(kept) < max(2, window // 2):
            out.append(False)
            continue
        mean, std = mean_std(kept[:-1])
        out.append(not (x - mean <= threshold * std))
    return out
