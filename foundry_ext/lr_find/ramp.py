r"""The exponential LR ramp of the range test: a pure function of the batch count, with Composer's timing written out.

Composer steps its ``LambdaLR`` at the end of batch :math:`k` *before* the timestamp advances, so 0-indexed batch
:math:`b` trains with the multiplier evaluated at timestamp :math:`\max(b - 1, 0)`: batches 0 and 1 both train at
:math:`\alpha(0)`. :func:`ramp_lr` gives the LR a batch really trains with, and :func:`ramp_for_batches` picks
``t_max`` so that the first batch trains at ``lr_min`` and the last at ``lr_max`` exactly.
"""

from __future__ import annotations

import math
from typing import Any

from composer.core import State
from composer.optim import ComposerScheduler
from pydantic import Field, field_validator

from foundry_ext.config.base import ConfigModel, build
from foundry_ext.config.durations import timestamp_of_batch

__all__ = ["ExponentialRampConfig", "ExponentialRampScheduler", "ramp_for_batches", "ramp_lr"]


class ExponentialRampConfig(ConfigModel):
    """The keys of :class:`ExponentialRampScheduler` (the ``scheduler`` block ``lr-find`` gives llm-foundry)."""

    alpha_i: float = Field(gt=0.0, le=1.0, description="multiplier at batch 0 (lr_min / lr_max)")
    t_max: int = Field(ge=1, description="batches over which the multiplier rises from alpha_i to 1 (int or 'Nba')")

    @field_validator("t_max", mode="before")
    @classmethod
    def _batches(cls, value: Any) -> Any:
        """Accept ``"98ba"`` as well as ``98``; no other unit: the range test counts batches."""
        if isinstance(value, str):
            text = value.strip()
            if not text.endswith("ba") or not text[:-2].isdigit():
                raise ValueError(f"expected a number of batches such as 98 or '98ba', got {value!r}")
            return int(text[:-2])
        return value


class ExponentialRampScheduler(ComposerScheduler):
    r"""Raise the LR multiplier exponentially from ``alpha_i`` to 1 over ``t_max`` batches, then hold it at 1.

    With :math:`t` the batch count of ``state.timestamp`` and :math:`T` = ``t_max``:

    .. math::
        \alpha(t) = \alpha_i^{\,1 - \min(t, T) / T}

    so :math:`\alpha(0) = \alpha_i` and :math:`\alpha(T) = 1`; the log of the multiplier rises linearly. With
    ``optimizer.lr`` = :math:`lr_{max}` and :math:`\alpha_i = lr_{min} / lr_{max}`, batch :math:`b` trains with
    (Composer's timing, see the module docstring)

    .. math::
        lr_b = lr_{max}\, \alpha(\max(b - 1, 0))
             = lr_{min} \left(\frac{lr_{max}}{lr_{min}}\right)^{\min(\max(b - 1, 0), T) / T}

    ``ssr`` (``scale_schedule_ratio``) is ignored: the range test is defined in batches.

    Args:
        alpha_i (float): Multiplier at batch 0, in (0, 1].
        t_max (int | str): Batches of the ramp, ``>= 1`` (``98`` or ``"98ba"``).
    """

    def __init__(self, alpha_i: float, t_max: int | str) -> None:
        config = build(ExponentialRampConfig, {"alpha_i": alpha_i, "t_max": t_max}, "scheduler")
        self.alpha_i = config.alpha_i
        self.t_max = config.t_max
        self._log_alpha_i = math.log(config.alpha_i)

    def __call__(self, state: State, ssr: float = 1.0) -> float:
        del ssr  # unused: see the docstring
        t = min(state.timestamp.batch.value, self.t_max)
        return math.exp(self._log_alpha_i * (1.0 - t / self.t_max))


def ramp_for_batches(lr_min: float, lr_max: float, batches: int) -> ExponentialRampScheduler:
    """The ramp under which batch 0 trains at ``lr_min`` and batch ``batches - 1`` at ``lr_max`` (``batches >= 3``).

    Batch ``batches - 1`` trains with the multiplier at timestamp ``batches - 2``, hence ``t_max = batches - 2``.
    """
    if batches < 3:
        raise ValueError(f"batches: {batches} is too few for a ramp; at least 3")
    return ExponentialRampScheduler(alpha_i=lr_min / lr_max, t_max=batches - 2)


def ramp_lr(lr_max: float, alpha_i: float, t_max: int, batch: int) -> float:
    """The LR 0-indexed batch ``batch`` trains with under the ramp, computed as Composer's ``LambdaLR`` does.

    ``LambdaLR`` sets ``lr = initial_lr * multiplier``; batch ``b`` gets the multiplier at timestamp ``max(b - 1, 0)``.
    """
    t = min(timestamp_of_batch(batch), t_max)
    return lr_max * math.exp(math.log(alpha_i) * (1.0 - t / t_max))
