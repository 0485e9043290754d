"""``inverse_sqrt``: a linear warmup, then an inverse square root decay (T5 / Noam; OLMo-core's, Hugging Face's)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydantic import Field, model_validator

from foundry_ext.config.base import NonNegativeDuration, PositiveDuration
from foundry_ext.config.errors import ConfigError, Problem
from foundry_ext.schedules.base import Mark, RunContext, ScheduleModel, _unit_name

if TYPE_CHECKING:
    import numpy as np

__all__ = ["InverseSqrt", "linear_warmup"]


def linear_warmup(alpha_i: float, peak: float, t: int, t_warmup: int) -> float:
    """``alpha_i + (peak - alpha_i) t / t_warmup`` for ``t < t_warmup``, computed as OLMo-core's ``_linear_warmup``."""
    return alpha_i + (peak - alpha_i) * t / t_warmup


class InverseSqrt(ScheduleModel):
    r"""A linear warmup from ``alpha_i`` to 1, then an inverse square root decay towards ``alpha_f``.

    With :math:`t_w` = ``t_warmup`` and :math:`\tau` = ``t_timescale`` (default :math:`t_w`), converted to one unit
    (batches unless every duration is in tokens or samples), and :math:`t` the current time in that unit:

    .. math::
        \alpha(t) = \begin{cases}
            \alpha_i + (1 - \alpha_i)\, t / t_w, & t < t_w \\
            \alpha_f + (1 - \alpha_f) \big/ \sqrt{(t + \tau - t_w) / \tau}, & t \ge t_w
        \end{cases}

    The decay is 1 at :math:`t_w` and tends to ``alpha_f``; it does not depend on ``max_duration`` (there is no
    ``t_max``). With :math:`\tau = t_w` it is :math:`\alpha_f + (1 - \alpha_f) \sqrt{t_w / t}`: OLMo-core's
    ``InvSqrtWithWarmup`` (``alpha_i = warmup_min_lr / lr``). With ``alpha_i = alpha_f = 0`` it is Hugging Face's
    ``get_inverse_sqrt_schedule(num_warmup_steps=t_w, timescale=tau)``.

    ``t_warmup: 0ba`` (no warmup) needs an explicit ``t_timescale``, since the time scale defaults to the warmup.
    ``scale_schedule_ratio`` scales ``t_timescale`` like every Composer duration and ``t_warmup`` only with
    ``scale_warmup``; an unset ``t_timescale`` is the warmup as resolved.
    """

    name = "inverse_sqrt"
    summary = "linear warmup from alpha_i, then alpha_f + (1 - alpha_f) / sqrt((t + tau - t_w) / tau) (T5/Noam)"
    adapter = "foundry_ext.trainer.schedulers:InverseSqrtScheduler"
    warmup_field = "t_warmup"
    has_formula = True

    t_warmup: NonNegativeDuration = Field(description="warmup length; the decay starts at 1 here")
    t_timescale: PositiveDuration | None = Field(
        None, description="time scale tau of the decay (null: t_warmup); half way to alpha_f at t_warmup + 3 tau"
    )
    alpha_i: float = Field(0.0, ge=0.0, le=1.0, description="multiplier at which the warmup starts")
    alpha_f: float = Field(0.0, ge=0.0, le=1.0, description="multiplier the decay tends to")
    scale_warmup: bool = Field(False, description="whether scale_schedule_ratio also scales t_warmup")

    @model_validator(mode="after")
    def _timescale(self) -> InverseSqrt:
        if self.t_warmup.value == 0 and self.t_timescale is None:
            raise ConfigError([self._no_timescale()])
        return self

    def _no_timescale(self, resolved: str = "") -> Problem:
        return Problem(
            "t_timescale",
            f"is required when the warmup is 0 (t_warmup={self.t_warmup}{resolved}): the decay's time scale defaults "
            "to t_warmup; set t_timescale (Hugging Face's timescale) or a warmup > 0",
        )

    def run_problems(self, d: Mapping[str, int], run: RunContext) -> list[Problem]:
        unit = _unit_name(run.unit)
        if d["t_warmup"] == 0 and "t_timescale" not in d:
            return [self._no_timescale(f" = 0 {unit} in this run")]
        if d.get("t_timescale", 1) == 0:
            return [Problem("t_timescale", f"{self.t_timescale} is 0 {unit} in this run; it must be > 0")]
        return []

    def marks(self, d: Mapping[str, int], units: Mapping[str, str], total: int) -> list[Mark]:
        del total
        return [("warmup end", d["t_warmup"], units["t_warmup"])] if d["t_warmup"] > 0 else []

    def multiplier(self, t: int, d: Mapping[str, int]) -> float:
        t_warmup = d["t_warmup"]
        if t < t_warmup:
            return linear_warmup(self.alpha_i, 1.0, t, t_warmup)
        tau = d.get("t_timescale", t_warmup)
        # the integer sum first, as Hugging Face computes it: (t + (tau - t_w)) / tau
        return self.alpha_f + (1.0 - self.alpha_f) / math.sqrt((t + tau - t_warmup) / tau)

    def multipliers(self, t: np.ndarray, d: Mapping[str, int]) -> np.ndarray:
        import numpy as np

        t_warmup = d["t_warmup"]
        out = np.empty(len(t), dtype=np.float64)
        warm = t < t_warmup
        out[warm] = linear_warmup(self.alpha_i, 1.0, t[warm], t_warmup)  # type: ignore[arg-type]
        rest = ~warm
        tau = d.get("t_timescale", t_warmup)
        out[rest] = self.alpha_f + (1.0 - self.alpha_f) / np.sqrt((t[rest] + tau - t_warmup) / tau)
        return out
