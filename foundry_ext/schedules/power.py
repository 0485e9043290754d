"""``power``: IBM's power scheduler as OLMo-core's ``PowerLR``: warmup, ``(t / t_w)^b``, then a linear tail."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydantic import Field, model_validator

from foundry_ext.config.base import NonNegativeDuration, PositiveDuration
from foundry_ext.config.durations import Duration
from foundry_ext.config.errors import ConfigError, Problem
from foundry_ext.schedules.base import Mark, RunContext, ScheduleModel, _unit_name, elementwise
from foundry_ext.schedules.inverse_sqrt import linear_warmup

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Power"]


class Power(ScheduleModel):
    r"""A linear warmup, a power-law decay that does not depend on the run's length, and a final linear tail.

    With :math:`t_w` = ``t_warmup``, :math:`t_d` = ``t_decay``, :math:`t_{max}` = ``t_max`` (converted to one unit,
    batches unless every duration is in tokens or samples), :math:`b` = ``b`` (< 0) and :math:`t` the current time:

    .. math::
        \alpha(t) = \begin{cases}
            \alpha_i + (1 - \alpha_i)\, t / t_w, & t < t_w \\
            (t / t_w)^b, & t_w \le t < t_{max} - t_d \\
            \alpha_f + (s - \alpha_f)\, (t_{max} - t) / t_d, \; s = ((t_{max} - t_d) / t_w)^b,
                & t_{max} - t_d \le t < t_{max} \\
            \alpha_f, & t \ge t_{max}
        \end{cases}

    The power phase is 1 at :math:`t_w` and falls as :math:`t^b`; the tail goes linearly from the power law's value
    :math:`s` at :math:`t_{max} - t_d` to ``alpha_f`` at :math:`t_{max}`, where ``alpha_f`` then holds. This is
    OLMo-core's ``PowerLR`` (``alpha_i = warmup_min_lr / lr``, ``alpha_f = decay_min_lr / lr``, its ``t_max`` the
    run's ``max_steps``: ``t_max: 1dur``). ``t_decay: 0ba`` drops the tail: the power law runs until ``t_max``.

    ``t_warmup + t_decay > t_max`` is an error (the tail would start inside the warmup, above 1), and so is an
    ``alpha_f`` above :math:`s` (the LR would rise at the tail, or at ``t_max`` without one).
    ``scale_schedule_ratio`` scales ``t_decay`` and ``t_max``, and ``t_warmup`` only with ``scale_warmup``.
    """

    name = "power"
    summary = "linear warmup, then (t / t_warmup)^b (b < 0), then a linear tail to alpha_f ending at t_max (PowerLR)"
    adapter = "foundry_ext.trainer.schedulers:PowerScheduler"
    warmup_field = "t_warmup"
    has_formula = True

    t_warmup: PositiveDuration = Field(description="warmup length; the power law starts at 1 here")
    b: float = Field(-0.51, lt=0.0, description="exponent of the power law (t / t_warmup)^b")
    t_decay: NonNegativeDuration = Field(Duration(0.1, "dur"), description="length of the linear tail ending at t_max")
    t_max: PositiveDuration = Field(Duration(1.0, "dur"), description="when the tail ends")
    alpha_i: float = Field(0.0, ge=0.0, le=1.0, description="multiplier at which the warmup starts")
    alpha_f: float = Field(0.0, ge=0.0, le=1.0, description="multiplier at the end of the tail, and after t_max")
    scale_warmup: bool = Field(False, description="whether scale_schedule_ratio also scales t_warmup")

    @model_validator(mode="after")
    def _fits(self) -> Power:
        durations = (self.t_warmup, self.t_decay, self.t_max)
        units = {t.unit for t in durations if t.value > 0}
        if len(units) == 1:  # one unit: checked now, before any model is built
            unit = units.pop()
            d = {"t_warmup": self.t_warmup.value, "t_decay": self.t_decay.value, "t_max": self.t_max.value}
            # alpha_f against the tail's start needs whole units: 'dur' fractions are truncated per run
            problems = self._check(d, None if unit == "dur" else _unit_name(unit), with_alpha_f=unit != "dur")
            if problems:
                raise ConfigError(problems)
        return self

    def _check(self, d: Mapping[str, float], unit: str | None = None, with_alpha_f: bool = True) -> list[Problem]:
        t_warmup, t_decay, t_max = d["t_warmup"], d["t_decay"], d["t_max"]
        where = f" (= {t_warmup:g} + {t_decay:g} > {t_max:g} {unit})" if unit else ""
        if t_warmup + t_decay > t_max:
            return [
                Problem(
                    "t_decay",
                    f"warmup and tail do not fit before t_max: t_warmup={self.t_warmup}, t_decay={self.t_decay}, "
                    f"t_max={self.t_max}{where}; need t_warmup + t_decay <= t_max (shorten t_warmup or t_decay, or "
                    "raise t_max/max_duration)",
                )
            ]
        if with_alpha_f and t_warmup > 0:
            start = ((t_max - t_decay) / t_warmup) ** self.b
            if self.alpha_f > start:
                at = f"t_max - t_decay = {t_max - t_decay:g}{' ' + unit if unit else ''}"
                return [
                    Problem(
                        "alpha_f",
                        f"{self.alpha_f:g} is above the multiplier where the tail starts ({start:.6g}, at {at}): the "
                        "LR would rise there; lower alpha_f, end the power law earlier, or use a b closer to 0",
                    )
                ]
        return []

    def run_problems(self, d: Mapping[str, int], run: RunContext) -> list[Problem]:
        unit = _unit_name(run.unit)
        if d["t_warmup"] == 0:
            return [Problem("t_warmup", f"{self.t_warmup} is 0 {unit} in this run; the power law needs t_warmup > 0")]
        return self._check({k: float(v) for k, v in d.items()}, unit)

    def marks(self, d: Mapping[str, int], units: Mapping[str, str], total: int) -> list[Mark]:
        del total
        unit = units["t_max"]
        marks = [("warmup end", d["t_warmup"], unit)]
        if d["t_decay"] > 0:
            marks.append(("tail start", d["t_max"] - d["t_decay"], unit))
        return [*marks, ("tail end", d["t_max"], unit)]

    def multiplier(self, t: int, d: Mapping[str, int]) -> float:
        t_warmup, t_decay, t_max = d["t_warmup"], d["t_decay"], d["t_max"]
        if t < t_warmup:
            return linear_warmup(self.alpha_i, 1.0, t, t_warmup)
        if t >= t_max:
            return self.alpha_f
        tail = t_max - t_decay
        if t < tail:
            return (t / t_warmup) ** self.b
        start = (tail / t_warmup) ** self.b
        # OLMo-core's _linear_decay with the steps left to t_max
        return self.alpha_f + (start - self.alpha_f) * (t_max - t) / t_decay

    def multipliers(self, t: np.ndarray, d: Mapping[str, int]) -> np.ndarray:
        import numpy as np

        t_warmup, t_decay, t_max = d["t_warmup"], d["t_decay"], d["t_max"]
        tail = t_max - t_decay
        out = np.full(len(t), self.alpha_f, dtype=np.float64)  # t >= t_max
        warm = t < t_warmup
        out[warm] = linear_warmup(self.alpha_i, 1.0, t[warm], t_warmup)  # type: ignore[arg-type]
        law = ~warm & (t < t_max) & (t < tail)
        b = self.b
        out[law] = elementwise(lambda x: x**b, t[law] / t_warmup)  # Python's float ** (the C library's pow)
        end = ~warm & (t < t_max) & (t >= tail)
        if end.any():
            start = (tail / t_warmup) ** b
            out[end] = self.alpha_f + (start - self.alpha_f) * (t_max - t[end]) / t_decay
        return out
