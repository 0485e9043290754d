"""``wsd_periods``: WSD-S for continual pretraining (arXiv 2410.05192), OLMo-core's ``WSDS``: WSD cycles in a row."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated

from pydantic import Field, model_validator

from foundry_ext.config.base import NonNegativeDuration, PositiveDuration
from foundry_ext.config.durations import Duration
from foundry_ext.config.errors import ConfigError, Problem
from foundry_ext.schedules.base import Mark, RunContext, ScheduleModel, _unit_name
from foundry_ext.schedules.inverse_sqrt import linear_warmup
from foundry_ext.schedules.wsd import DecayType, decay_shape, decay_shapes

if TYPE_CHECKING:
    import numpy as np

__all__ = ["WSDPeriods"]


class WSDPeriods(ScheduleModel):
    r"""Warmup once, then periods that each hold a peak and end with a decay to ``alpha_f`` (WSD-S).

    With :math:`L_i` = ``periods[i]``, the period ends :math:`T_i = L_0 + \dots + L_i`, :math:`p_i` = ``peaks[i]``
    (default 1), :math:`D_i` = ``t_decay`` or ``round(decay_fraction * L_i)``, :math:`t_w` = ``t_warmup`` (all
    converted to one unit, batches unless every duration is in tokens or samples) and :math:`t` the current time.
    Period :math:`i` covers :math:`T_{i-1} < t \le T_i` (period 0: :math:`0 \le t \le T_0`):

    .. math::
        \alpha(t) = \begin{cases}
            \alpha_i + (p_0 - \alpha_i)\, t / t_w, & t < t_w \text{ (in period 0)} \\
            p_i, & t < T_i - D_i \\
            \alpha_f + (p_i - \alpha_f)\, d(q), \; q = \frac{t - (T_i - D_i)}{D_i}, & T_i - D_i \le t \le T_i \\
            \alpha_f, & t > T_{last}
        \end{cases}

    so each decay reaches ``alpha_f`` exactly at its period's end :math:`T_i` (as ``warmup_stable_decay`` does at
    ``t_max``) and the next period's peak starts one step later. Decay shapes :math:`d(q)` are
    ``warmup_stable_decay``'s: ``linear`` :math:`1 - q`, ``sqrt`` :math:`1 - \sqrt{q}`, ``cosine``
    :math:`(1 + \cos \pi q) / 2`, ``square`` :math:`1 - q^2`. The warmup is part of the first period. With the
    ``linear`` shape this is OLMo-core's ``WSDS`` (``period_lengths``, ``period_lr_multipliers``,
    ``warmup_min_lr / lr``, ``decay_min_lr / lr``); ``round`` is Python's (ties to even), as there.

    Errors: ``t_warmup`` longer than the first period, a warmup and decay that do not fit in it, a decay longer than
    a period, ``alpha_f`` above a peak, ``alpha_i`` above the first peak. Warnings: a run longer than the periods
    (the rest trains at ``alpha_f``), or one that ends inside a period (before that period's decay ends).
    """

    name = "wsd_periods"
    summary = "WSD-S: one warmup, then periods that each hold a peak and decay to alpha_f at their end (WSDS)"
    adapter = "foundry_ext.trainer.schedulers:WSDPeriodsScheduler"
    warmup_field = "t_warmup"
    has_formula = True

    periods: list[PositiveDuration] = Field(description="length of each period, in order; the first includes t_warmup")
    peaks: list[Annotated[float, Field(gt=0.0)]] | None = Field(
        None, description="peak multiplier of each period, one per period (null: all 1)"
    )
    t_warmup: NonNegativeDuration = Field(Duration(0, "ba"), description="warmup length, at the start of period 0")
    t_decay: NonNegativeDuration | None = Field(
        None, description="decay length at the end of every period (or decay_fraction)"
    )
    decay_fraction: Annotated[float, Field(ge=0.0, le=1.0)] | None = Field(
        None, description="decay length as a fraction of each period's length (or t_decay)"
    )
    decay_type: DecayType = Field("linear", description="shape of each decay")
    alpha_i: float = Field(0.0, ge=0.0, description="multiplier at which the warmup starts (<= peaks[0])")
    alpha_f: float = Field(0.0, ge=0.0, description="multiplier at the end of every decay and after the last period")
    scale_warmup: bool = Field(False, description="whether scale_schedule_ratio also scales t_warmup")

    @model_validator(mode="after")
    def _valid(self) -> WSDPeriods:
        problems = []
        if not self.periods:
            problems.append(Problem("periods", "is empty; give the length of each period, e.g. [10000ba, 5000ba]"))
        if (self.t_decay is None) == (self.decay_fraction is None):
            got = "both" if self.t_decay is not None else "neither"
            problems.append(
                Problem("t_decay", f"give exactly one of t_decay and decay_fraction (got {got}), e.g. t_decay: 1000ba")
            )
        if self.peaks is not None and len(self.peaks) != len(self.periods):
            problems.append(
                Problem(
                    "peaks",
                    f"has {len(self.peaks)} value{'s' * (len(self.peaks) != 1)} for {len(self.periods)} "
                    f"period{'s' * (len(self.periods) != 1)}; give one peak per period",
                )
            )
        elif self.periods:
            peaks = self._peaks()
            low = min(range(len(peaks)), key=peaks.__getitem__)
            if self.alpha_f > peaks[low]:
                problems.append(
                    Problem(
                        "alpha_f",
                        f"{self.alpha_f:g} is above peaks[{low}] ({peaks[low]:g}): that decay would rise; need "
                        "alpha_f <= every peak" + ("" if self.peaks is not None else " (1 without peaks)"),
                    )
                )
            if self.alpha_i > peaks[0]:
                problems.append(
                    Problem("alpha_i", f"{self.alpha_i:g} is above peaks[0] ({peaks[0]:g}): the warmup would fall")
                )
        if not problems:
            durations = [*self.periods, self.t_warmup, *([self.t_decay] if self.t_decay is not None else [])]
            units = {t.unit for t in durations if t.value > 0}
            if len(units) == 1 and units != {"dur"}:  # one unit: checked now, before any model is built
                d = {k: int(v.value) for k, v in self.durations().items()}
                problems = self._fit(d, _unit_name(units.pop()))
        if problems:
            raise ConfigError(problems)
        return self

    def _peaks(self) -> list[float]:
        return list(self.peaks) if self.peaks is not None else [1.0] * len(self.periods)

    def _lengths(self, d: Mapping[str, int]) -> list[int]:
        return [d[f"periods[{i}]"] for i in range(len(self.periods))]

    def _decays(self, lengths: list[int], d: Mapping[str, int]) -> list[int]:
        if self.decay_fraction is None:
            return [d["t_decay"]] * len(lengths)
        return [round(self.decay_fraction * length) for length in lengths]  # ties to even, as OLMo-core's WSDS

    def _fit(self, d: Mapping[str, int], unit: str | None = None) -> list[Problem]:
        lengths = self._lengths(d)
        decays = self._decays(lengths, d)
        u = f" {unit}" if unit else ""
        decay_key = "t_decay" if self.decay_fraction is None else "decay_fraction"
        shown = f"t_decay={self.t_decay}" if self.decay_fraction is None else f"decay_fraction={self.decay_fraction}"
        if any(length == 0 for length in lengths):
            i = lengths.index(0)
            return [Problem(f"periods[{i}]", f"{self.periods[i]} is 0{u} in this run; every period must be > 0")]
        if d["t_warmup"] > lengths[0]:
            return [
                Problem(
                    "t_warmup",
                    f"{self.t_warmup} (= {d['t_warmup']}{u}) is longer than the first period (periods[0]="
                    f"{self.periods[0]} = {lengths[0]}{u}): the warmup is part of the first period; shorten it or "
                    "lengthen periods[0]",
                )
            ]
        if d["t_warmup"] + decays[0] > lengths[0]:
            return [
                Problem(
                    decay_key,
                    f"warmup and decay do not fit in the first period: t_warmup={self.t_warmup}, {shown}, periods[0]="
                    f"{self.periods[0]} (= {d['t_warmup']} + {decays[0]} > {lengths[0]}{u}); need t_warmup + decay "
                    "<= periods[0]",
                )
            ]
        for i, (length, decay) in enumerate(zip(lengths, decays, strict=True)):
            if decay > length:
                return [
                    Problem(
                        decay_key,
                        f"the decay ({shown} = {decay}{u}) is longer than periods[{i}] ({self.periods[i]} = "
                        f"{length}{u}); need a decay <= every period",
                    )
                ]
        return []

    def run_problems(self, d: Mapping[str, int], run: RunContext) -> list[Problem]:
        return self._fit(d, _unit_name(run.unit))

    def run_warnings(self, d: Mapping[str, int], run: RunContext) -> list[Problem]:
        if run.unit != run.total_unit:  # periods in tokens, max_duration in batches: nothing to compare
            return []
        ends = list(itertools.accumulate(self._lengths(d)))
        unit = _unit_name(run.unit)
        if ends[-1] < run.total:
            return [
                Problem(
                    "periods",
                    f"the periods end at {ends[-1]} {unit}, before max_duration={run.max_duration} ({run.total} "
                    f"{unit}): the last {run.total - ends[-1]} {unit} train at alpha_f ({self.alpha_f:g}); add a "
                    "period or shorten the run",
                )
            ]
        if run.total not in ends:
            i = next(i for i, end in enumerate(ends) if end > run.total)
            return [
                Problem(
                    "periods",
                    f"max_duration={run.max_duration} ({run.total} {unit}) ends inside periods[{i}], which ends at "
                    f"{ends[i]} {unit}: the run stops before that period's decay ends (period ends: "
                    f"{', '.join(str(e) for e in ends)} {unit})",
                )
            ]
        return []

    def marks(self, d: Mapping[str, int], units: Mapping[str, str], total: int) -> list[Mark]:
        del total
        unit = units["t_warmup"]
        lengths = self._lengths(d)
        marks = [("warmup end", d["t_warmup"], unit)] if d["t_warmup"] > 0 else []
        for i, (end, decay) in enumerate(zip(itertools.accumulate(lengths), self._decays(lengths, d), strict=True)):
            if decay > 0:
                marks.append((f"decay {i + 1} start", end - decay, unit))
            marks.append((f"period {i + 1} end", end, unit))
        return marks

    def multiplier(self, t: int, d: Mapping[str, int]) -> float:
        t_warmup = d["t_warmup"]
        peaks = self._peaks()
        if t < t_warmup:
            return linear_warmup(self.alpha_i, peaks[0], t, t_warmup)
        lengths = self._lengths(d)
        end = 0
        for length, decay, peak in zip(lengths, self._decays(lengths, d), peaks, strict=True):
            end += length
            if t <= end:  # the period's own end belongs to it: its decay reaches alpha_f there
                decay_start = end - decay
                if t < decay_start:
                    return peak
                if t == end:
                    return self.alpha_f
                return self.alpha_f + (peak - self.alpha_f) * decay_shape(self.decay_type, (t - decay_start) / decay)
        return self.alpha_f

    def multipliers(self, t: np.ndarray, d: Mapping[str, int]) -> np.ndarray:
        import numpy as np

        t_warmup = d["t_warmup"]
        peaks = self._peaks()
        out = np.full(len(t), self.alpha_f, dtype=np.float64)  # after the last period
        warm = t < t_warmup
        out[warm] = linear_warmup(self.alpha_i, peaks[0], t[warm], t_warmup)  # type: ignore[arg-type]
        lengths = self._lengths(d)
        end = 0
        for i, (length, decay, peak) in enumerate(zip(lengths, self._decays(lengths, d), peaks, strict=True)):
            previous, end = end, end + length
            inside = ~warm & (t <= end) & ((t > previous) if i else True)
            decay_start = end - decay
            out[inside & (t < decay_start)] = peak
            out[inside & (t == end)] = self.alpha_f
            falling = inside & (t >= decay_start) & (t < end)
            if falling.any():
                q = (t[falling] - decay_start) / decay
                out[falling] = self.alpha_f + (peak - self.alpha_f) * decay_shapes(self.decay_type, q)
        return out
