"""``stages``: linear / cosine stages and an optional override decay (OLMo-core's ``ComposableScheduler``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, model_validator

from foundry_ext.config.base import ConfigModel, NonNegativeDuration, PositiveDuration
from foundry_ext.config.durations import Duration
from foundry_ext.config.errors import ConfigError, Problem
from foundry_ext.schedules.base import Mark, RunContext, ScheduleModel, _unit_name, elementwise

if TYPE_CHECKING:
    import numpy as np

__all__ = ["OverrideDecay", "Stage", "Stages", "interpolate", "interpolates"]

Shape = Literal["linear", "cosine"]


def interpolate(shape: str, start: float, end: float, t: int, duration: int) -> float:
    """From ``start`` at ``t = 0`` to ``end`` at ``t = duration``, as OLMo-core's ``_interpolate_lr``."""
    if shape == "linear":
        return start + (end - start) * t / duration
    return end + (start - end) * (1 + math.cos(math.pi * t / duration)) / 2


def interpolates(shape: str, start: float, end: float, t: np.ndarray, duration: int) -> np.ndarray:
    """:func:`interpolate` at every element of ``t`` (int64), bitwise equal."""
    if shape == "linear":
        return start + (end - start) * t / duration
    return end + (start - end) * (1 + elementwise(math.cos, math.pi * t / duration)) / 2


class Stage(ConfigModel):
    """One stage: from ``start`` to ``end`` over ``duration``."""

    duration: PositiveDuration = Field(description="length of the stage")
    shape: Shape = Field("linear", description="linear or cosine interpolation from start to end")
    end: float = Field(ge=0.0, description="multiplier at the end of the stage")
    start: Annotated[float, Field(ge=0.0)] | None = Field(
        None, description="multiplier at the start (null: the previous stage's end, 1 for the first)"
    )


class OverrideDecay(ConfigModel):
    """From ``start`` on, decay from wherever the stages are to ``end`` over ``duration``; then ``end`` holds."""

    start: NonNegativeDuration = Field(description="when the override begins (an absolute time)")
    duration: PositiveDuration = Field(description="length of the override decay")
    shape: Shape = Field("linear", description="linear or cosine")
    end: float = Field(ge=0.0, description="multiplier at the end of the override, held after it")


class Stages(ScheduleModel):
    r"""Stages in a row, each a linear or cosine interpolation between two multipliers; an optional override decay.

    Stage :math:`k` (``stages[k]``) covers :math:`S_k \le t < S_k + L_k` with :math:`S_k` the sum of the earlier
    stages' ``duration``; with :math:`a_k` = ``start`` (default: the previous stage's ``end``, 1 for the first),
    :math:`e_k` = ``end`` and :math:`x = (t - S_k) / L_k`:

    .. math::
        m(t) = \begin{cases}
            a_k + (e_k - a_k)\, x, & \text{linear} \\
            e_k + (a_k - e_k)\, (1 + \cos \pi x) / 2, & \text{cosine}
        \end{cases}

    and after the last stage :math:`m(t)` is the last ``end``. Without ``override_decay``, :math:`\alpha(t) = m(t)`.
    With it (``start`` :math:`o_s`, ``duration`` :math:`o_d`, ``end`` :math:`o_e`, ``shape``):
    :math:`\alpha(t) = m(t)` for :math:`t < o_s`; from :math:`o_s` it goes from :math:`m(o_s)`, wherever the stages
    were, to :math:`o_e` by the same interpolation over :math:`o_d`, and :math:`o_e` holds after :math:`o_s + o_d`.

    Times are absolute (``dur`` is a fraction of ``max_duration``, as everywhere); the schedule does not stretch to
    the run. This is OLMo-core's ``ComposableScheduler`` with its absolute LRs as multipliers of the optimizer's LR
    (``end = end_lr / lr`` or ``end_lr_fraction``). ``scale_schedule_ratio`` scales every duration.
    """

    name = "stages"
    summary = "linear / cosine stages between multipliers, and an optional override decay from wherever it is"
    adapter = "foundry_ext.trainer.schedulers:StagesScheduler"
    has_formula = True

    stages: list[Stage] = Field(
        description="the stages in order",
        json_schema_extra={"x-allowed": "a list of {duration, end, shape, start} blocks, at least one"},
    )
    override_decay: OverrideDecay | None = Field(
        None,
        description="a decay from the multiplier at its start, whatever the stage",
        json_schema_extra={"x-allowed": "a {start, duration, end, shape} block, or null"},
    )

    @model_validator(mode="after")
    def _not_empty(self) -> Stages:
        if not self.stages:
            raise ConfigError(
                "stages", "is empty; give at least one stage, e.g. [{duration: 1000ba, start: 0, end: 1}]"
            )
        return self

    def durations(self) -> dict[str, Duration]:
        found = {f"stages[{i}].duration": stage.duration for i, stage in enumerate(self.stages)}
        if self.override_decay is not None:
            found["override_decay.start"] = self.override_decay.start
            found["override_decay.duration"] = self.override_decay.duration
        return found

    def run_problems(self, d: Mapping[str, int], run: RunContext) -> list[Problem]:
        return [
            Problem(name, f"{value} is 0 {_unit_name(run.unit)} in this run; it must be > 0")
            for name, value in self.durations().items()
            if name.endswith("duration") and d[name] == 0
        ]

    def _end(self, d: Mapping[str, int]) -> tuple[int, float]:
        """When the schedule stops changing, and the multiplier it holds from then on."""
        o = self.override_decay
        if o is not None:
            return d["override_decay.start"] + d["override_decay.duration"], o.end
        return sum(d[f"stages[{i}].duration"] for i in range(len(self.stages))), self.stages[-1].end

    def run_warnings(self, d: Mapping[str, int], run: RunContext) -> list[Problem]:
        if run.unit != run.total_unit:
            return []
        unit = _unit_name(run.unit)
        o = self.override_decay
        if o is not None and d["override_decay.start"] >= run.total:
            return [
                Problem(
                    "override_decay.start",
                    f"{o.start} ({d['override_decay.start']} {unit}) is not before the end of the run "
                    f"(max_duration={run.max_duration} = {run.total} {unit}): the override never applies",
                )
            ]
        end, value = self._end(d)
        if end < run.total:
            what = "the override decay ends" if o is not None else "the stages end"
            field = "override_decay.duration" if o is not None else "stages"
            return [
                Problem(
                    field,
                    f"{what} at {end} {unit}, before max_duration={run.max_duration} ({run.total} {unit}): the last "
                    f"{run.total - end} {unit} train at {value:g}",
                )
            ]
        return []

    def marks(self, d: Mapping[str, int], units: Mapping[str, str], total: int) -> list[Mark]:
        del total
        marks: list[Mark] = []
        t = 0
        for i in range(len(self.stages)):
            name = f"stages[{i}].duration"
            t += d[name]
            marks.append((f"stage {i + 1} end", t, units[name]))
        if self.override_decay is not None:
            start = d["override_decay.start"]
            unit = units["override_decay.start"]
            marks += [("override start", start, unit), ("override end", start + d["override_decay.duration"], unit)]
        return marks

    def _main(self, t: int, d: Mapping[str, int]) -> float:
        stage_start = 0
        previous_end = 1.0
        for i, stage in enumerate(self.stages):
            duration = d[f"stages[{i}].duration"]
            start = previous_end if stage.start is None else stage.start
            if t < stage_start + duration:
                return interpolate(stage.shape, start, stage.end, t - stage_start, duration)
            previous_end = stage.end
            stage_start += duration
        return previous_end

    def multiplier(self, t: int, d: Mapping[str, int]) -> float:
        o = self.override_decay
        if o is None or t < d["override_decay.start"]:
            return self._main(t, d)
        start, duration = d["override_decay.start"], d["override_decay.duration"]
        if t - start < duration:
            return interpolate(o.shape, self._main(start, d), o.end, t - start, duration)
        return o.end

    def _mains(self, t: np.ndarray, d: Mapping[str, int]) -> np.ndarray:
        import numpy as np

        out = np.full(len(t), self.stages[-1].end, dtype=np.float64)  # after the last stage
        stage_start = 0
        previous_end = 1.0
        for i, stage in enumerate(self.stages):
            duration = d[f"stages[{i}].duration"]
            start = previous_end if stage.start is None else stage.start
            inside = (t >= stage_start) & (t < stage_start + duration)
            if inside.any():
                out[inside] = interpolates(stage.shape, start, stage.end, t[inside] - stage_start, duration)
            previous_end = stage.end
            stage_start += duration
        return out

    def multipliers(self, t: np.ndarray, d: Mapping[str, int]) -> np.ndarray:
        o = self.override_decay
        if o is None:
            return self._mains(t, d)
        start, duration = d["override_decay.start"], d["override_decay.duration"]
        import numpy as np

        before = t < start
        out = np.full(len(t), o.end, dtype=np.float64)  # after the override
        out[before] = self._mains(t[before], d)
        decay = ~before & (t - start < duration)
        if decay.any():
            out[decay] = interpolates(o.shape, self._main(start, d), o.end, t[decay] - start, duration)
        return out
