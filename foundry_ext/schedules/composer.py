"""Models of Composer's schedules (registered by this package) and of llm-foundry's four built-in ones.

They validate; the formula is Composer's, run by Composer's own class (``foundry_ext.trainer.composer_schedulers``
subclasses it for the names this package registers; llm-foundry builds its four itself). The checks Composer makes
only when the Trainer first calls the scheduler (after the model is built) are repeated in :meth:`run_problems`, so
that ``foundry-ext validate`` and the pre-flight check report them before anything is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from pydantic import Field, model_validator

from foundry_ext.config.base import NonNegativeDuration, PositiveDuration
from foundry_ext.config.durations import Duration
from foundry_ext.config.errors import ConfigError, Problem
from foundry_ext.schedules.base import Mark, RunContext, ScheduleModel

__all__ = ["COMPOSER_MODELS", "FOUNDRY_MODELS"]

_D = "Composer duration"
Gamma = Annotated[float, Field(gt=0.0)]
NonNegative = Annotated[float, Field(ge=0.0)]


class _Composer(ScheduleModel):
    """A Composer schedule registered by this package under an llm-foundry name."""

    provider = "foundry-ext"
    single_unit = False  # Composer converts each duration on its own


_MAX_MARKS = 40  # a plot does not label more repeated points than this


def _repeat(label: str, every: int, unit: str, total: int) -> list[Mark]:
    """``every``, ``2 * every``, ... before ``total`` (at most :data:`_MAX_MARKS`)."""
    return [(f"{label} {i}", i * every, unit) for i in range(1, min(_MAX_MARKS, (total - 1) // every) + 1)]


def _composer_adapter(cls_name: str) -> str:
    return f"foundry_ext.trainer.composer_schedulers:{cls_name}"


class Step(_Composer):
    r"""Composer's ``StepScheduler``: :math:`\alpha(t) = \gamma^{\lfloor t / \rho \rfloor}`, rho = step_size."""

    name = "step"
    summary = "gamma ^ floor(t / step_size) (Composer's StepScheduler)"
    adapter = _composer_adapter("StepScheduler")
    step_size: PositiveDuration = Field(description="time between two decays")
    gamma: Gamma = Field(0.1, description="multiplicative decay factor")

    def marks(self, d: Mapping[str, int], units: Mapping[str, str], total: int) -> list[Mark]:
        return _repeat("step", d["step_size"], units["step_size"], total)


class MultiStep(_Composer):
    r""":math:`\alpha(t) = \gamma^{n(t)}`, :math:`n(t)` the number of milestones reached (``MultiStepScheduler``)."""

    name = "multistep"
    summary = "gamma ^ (milestones reached) (Composer's MultiStepScheduler)"
    adapter = _composer_adapter("MultiStepScheduler")
    milestones: list[NonNegativeDuration] = Field(description="times of the decays ([]: none, as Composer allows)")
    gamma: Gamma = Field(0.1, description="multiplicative decay factor")


class MultiStepWithWarmup(_Composer):
    r"""Linear warmup :math:`t / t_w`, then :math:`\gamma^{n(t)}` (``MultiStepWithWarmupScheduler``)."""

    name = "multistep_with_warmup"
    summary = "linear warmup, then gamma ^ (milestones reached) (Composer's MultiStepWithWarmupScheduler)"
    adapter = _composer_adapter("MultiStepWithWarmupScheduler")
    warmup_field = "t_warmup"
    t_warmup: NonNegativeDuration = Field(description="warmup length")
    milestones: list[NonNegativeDuration] = Field(description="times of the decays ([]: none, as Composer allows)")
    gamma: Gamma = Field(0.1, description="multiplicative decay factor")
    scale_warmup: bool = Field(False, description="whether scale_schedule_ratio also scales t_warmup")


class Constant(_Composer):
    r""":math:`\alpha(t) = \alpha` while :math:`t < t_{max}`, then 1 (``ConstantScheduler``)."""

    name = "constant"
    summary = "alpha until t_max, then 1 (Composer's ConstantScheduler)"
    adapter = _composer_adapter("ConstantScheduler")
    alpha: NonNegative = Field(1.0, description="the multiplier until t_max")
    t_max: PositiveDuration = Field(Duration(1.0, "dur"), description="when the multiplier returns to 1")


class Linear(_Composer):
    r""":math:`\alpha(t) = \alpha_i + (\alpha_f - \alpha_i) \min(t / t_{max}, 1)` (``LinearScheduler``)."""

    name = "linear"
    summary = "alpha_i to alpha_f linearly over t_max (Composer's LinearScheduler)"
    adapter = _composer_adapter("LinearScheduler")
    alpha_i: NonNegative = Field(1.0, description="initial multiplier")
    alpha_f: NonNegative = Field(0.0, description="final multiplier")
    t_max: PositiveDuration = Field(Duration(1.0, "dur"), description="when alpha_f is reached")


class Exponential(_Composer):
    r""":math:`\alpha(t) = \gamma^{t / \rho}` with :math:`\rho` = ``decay_period`` (``ExponentialScheduler``)."""

    name = "exponential"
    summary = "gamma ^ (t / decay_period) (Composer's ExponentialScheduler)"
    adapter = _composer_adapter("ExponentialScheduler")
    gamma: Gamma = Field(description="multiplicative decay factor per decay_period")
    decay_period: PositiveDuration = Field(Duration(1, "ep"), description="the time over which gamma applies once")


class Cosine(_Composer):
    r""":math:`\alpha(t) = \alpha_f + (1 - \alpha_f)(1 + \cos(\pi t / t_{max})) / 2` (``CosineAnnealingScheduler``)."""

    name = "cosine"
    summary = "cosine from 1 to alpha_f over t_max (Composer's CosineAnnealingScheduler)"
    adapter = _composer_adapter("CosineAnnealingScheduler")
    t_max: PositiveDuration = Field(Duration(1.0, "dur"), description="end of the cosine")
    alpha_f: NonNegative = Field(0.0, description="final multiplier")


class CosineWithRestarts(_Composer):
    r"""Cosine over cycles of length :math:`t_0 \cdot t_{mult}^i` (``CosineAnnealingWarmRestartsScheduler``)."""

    name = "cosine_with_restarts"
    summary = "cosine restarting every t_0 * t_mult^i (Composer's CosineAnnealingWarmRestartsScheduler)"
    adapter = _composer_adapter("CosineAnnealingWarmRestartsScheduler")
    t_0: PositiveDuration = Field(description="length of the first cycle")
    t_mult: float = Field(1.0, ge=1.0, description="each cycle is this many times longer than the previous one")
    alpha_f: NonNegative = Field(0.0, description="multiplier at the end of each cycle")

    def marks(self, d: Mapping[str, int], units: Mapping[str, str], total: int) -> list[Mark]:
        # Composer's loop: cycle i ends at t_0 * (1 + t_mult + ... + t_mult^i), each length truncated to an int
        marks: list[Mark] = []
        end, length = 0, float(d["t_0"])
        while len(marks) < _MAX_MARKS:
            end += int(length)
            if end >= total:
                break
            marks.append((f"restart {len(marks) + 1}", end, units["t_0"]))
            length *= self.t_mult
        return marks


class Polynomial(_Composer):
    r""":math:`\alpha(t) = \alpha_f + (1 - \alpha_f)(1 - \min(t / t_{max}, 1))^{power}` (``PolynomialScheduler``)."""

    name = "polynomial"
    summary = "alpha_f + (1 - alpha_f)(1 - t / t_max)^power (Composer's PolynomialScheduler)"
    adapter = _composer_adapter("PolynomialScheduler")
    power: Gamma = Field(description="exponent of the decay")
    t_max: PositiveDuration = Field(Duration(1.0, "dur"), description="end of the decay")
    alpha_f: NonNegative = Field(0.0, description="final multiplier")


def _composer_t_max_check(
    t_max: Duration, max_duration: Duration, batches_per_epoch: int | None, ssr: float = 1.0
) -> list[Problem]:
    """Composer's ``_raise_if_max_duration_exceeds_t_max``: t_max must cover the whole run.

    Composer checks t_max as it converts it, scaled by ``scale_schedule_ratio`` (``ep`` first to batches; ``dur`` is
    not scaled), against the ``max_duration`` the Trainer has already scaled.
    """
    scaled = t_max
    if ssr != 1.0 and t_max.unit in ("ba", "tok", "sp"):
        scaled = Duration(int(t_max.value * ssr), t_max.unit)
    elif ssr != 1.0 and t_max.unit == "ep" and batches_per_epoch is not None:
        scaled = Duration(int(int(t_max.value * batches_per_epoch) * ssr), "ba")
    if scaled.unit == max_duration.unit:
        short = scaled.value < max_duration.value
    elif scaled.unit == "ba" and max_duration.unit == "ep" and batches_per_epoch is not None:
        short = scaled.value < max_duration.value * batches_per_epoch
    elif scaled.unit == "ep" and max_duration.unit == "ba" and batches_per_epoch is not None:
        short = scaled.value * batches_per_epoch < max_duration.value
    else:
        return []
    if not short:
        return []
    given = str(t_max) if scaled is t_max else f"{t_max} (x scale_schedule_ratio {ssr} = {scaled})"
    return [
        Problem(
            "t_max",
            f"{given} is shorter than max_duration={max_duration}: Composer refuses it (the schedule would be "
            "undefined after t_max); set t_max >= max_duration, or '1dur'",
        )
    ]


class _WithWarmupTMax(ScheduleModel):
    """Composer's warmup schedules that check t_max against the run (Linear/Cosine/PolynomialWithWarmup)."""

    single_unit = True  # Composer's _raise_if_warmup_and_max_incompatible: t_warmup and t_max in one unit
    warmup_field = "t_warmup"

    def run_problems(self, d: Mapping[str, int], run: RunContext) -> list[Problem]:
        del d
        t_max = self.t_max  # type: ignore[attr-defined]
        return _composer_t_max_check(t_max, run.max_duration, run.dataloader_len, run.ssr)


class PolynomialWithWarmup(_WithWarmupTMax):
    r"""``PolynomialWithWarmupScheduler``: warmup :math:`t / t_w`, then a polynomial decay to :math:`t_{max}`."""

    name = "polynomial_with_warmup"
    summary = "linear warmup, then a polynomial decay to alpha_f (Composer's PolynomialWithWarmupScheduler)"
    adapter = _composer_adapter("PolynomialWithWarmupScheduler")
    provider = "foundry-ext"
    t_warmup: NonNegativeDuration = Field(description="warmup length")
    power: Gamma = Field(2.0, description="exponent of the decay")
    t_max: PositiveDuration = Field(Duration(1.0, "dur"), description="end of the decay")
    alpha_f: NonNegative = Field(0.0, description="final multiplier")
    scale_warmup: bool = Field(False, description="whether scale_schedule_ratio also scales t_warmup")


# -- llm-foundry's own -------------------------------------------------------------------------------------------


class ConstantWithWarmup(ScheduleModel):
    r"""Linear warmup, then :math:`\alpha` until :math:`t_{max}` (Composer's ``ConstantWithWarmupScheduler``)."""

    name = "constant_with_warmup"
    summary = "linear warmup, then alpha (llm-foundry built-in: Composer's ConstantWithWarmupScheduler)"
    adapter = "composer.optim.scheduler:ConstantWithWarmupScheduler"
    provider = "llm-foundry"
    warmup_field = "t_warmup"
    single_unit = False
    t_warmup: NonNegativeDuration = Field(description="warmup length")
    alpha: NonNegative = Field(1.0, description="the multiplier after warmup")
    t_max: PositiveDuration = Field(Duration(1.0, "dur"), description="end of the schedule")
    scale_warmup: bool = Field(False, description="whether scale_schedule_ratio also scales t_warmup")


class CosineWithWarmup(_WithWarmupTMax):
    r"""Linear warmup, then a cosine from 1 to :math:`\alpha_f` (``CosineAnnealingWithWarmupScheduler``)."""

    name = "cosine_with_warmup"
    summary = "linear warmup, then cosine to alpha_f (llm-foundry built-in: CosineAnnealingWithWarmupScheduler)"
    adapter = "composer.optim.scheduler:CosineAnnealingWithWarmupScheduler"
    provider = "llm-foundry"
    t_warmup: NonNegativeDuration = Field(description="warmup length")
    t_max: PositiveDuration = Field(Duration(1.0, "dur"), description="end of the cosine")
    alpha_f: NonNegative = Field(0.0, description="final multiplier")
    scale_warmup: bool = Field(False, description="whether scale_schedule_ratio also scales t_warmup")


class LinearDecayWithWarmup(_WithWarmupTMax):
    r"""Linear warmup, then linear from :math:`\alpha_i` to :math:`\alpha_f` (``LinearWithWarmupScheduler``)."""

    name = "linear_decay_with_warmup"
    summary = "linear warmup, then linear alpha_i to alpha_f (llm-foundry built-in: LinearWithWarmupScheduler)"
    adapter = "composer.optim.scheduler:LinearWithWarmupScheduler"
    provider = "llm-foundry"
    t_warmup: NonNegativeDuration = Field(description="warmup length")
    alpha_i: NonNegative = Field(1.0, description="multiplier at the end of warmup")
    alpha_f: NonNegative = Field(0.0, description="final multiplier")
    t_max: PositiveDuration = Field(Duration(1.0, "dur"), description="end of the decay")
    scale_warmup: bool = Field(False, description="whether scale_schedule_ratio also scales t_warmup")


class InvSqrtWithWarmup(ScheduleModel):
    r"""llm-foundry's ``InverseSquareRootWithWarmupScheduler``: warmup, :math:`1/\sqrt{\cdot}` decay, linear cooldown.

    ``t_warmup``, ``t_scale`` and ``t_cooldown`` must be in the unit of ``max_duration`` (not ``dur``).
    """

    name = "inv_sqrt_with_warmup"
    summary = "warmup, inverse-sqrt decay, linear cooldown (llm-foundry built-in)"
    adapter = "llmfoundry.optim.scheduler:InverseSquareRootWithWarmupScheduler"
    provider = "llm-foundry"
    warmup_field = "t_warmup"
    single_unit = False
    t_warmup: NonNegativeDuration = Field(description="warmup length, in max_duration's unit")
    t_scale: PositiveDuration = Field(description="time scale of the inverse-sqrt decay, in max_duration's unit")
    t_cooldown: NonNegativeDuration = Field(description="length of the final linear cooldown, in max_duration's unit")
    t_max: PositiveDuration = Field(Duration(1.0, "dur"), description="end of the schedule")
    alpha_f_decay: NonNegative = Field(0.0, description="multiplier the inverse-sqrt decay tends to")
    alpha_f_cooldown: NonNegative = Field(0.0, description="multiplier at the end of the cooldown")

    @model_validator(mode="after")
    def _check(self) -> InvSqrtWithWarmup:
        problems = [
            Problem(key, f"{getattr(self, key)}: llm-foundry refuses 'dur' here; use the unit of max_duration")
            for key in ("t_warmup", "t_scale", "t_cooldown")
            if getattr(self, key).unit == "dur"
        ]
        if self.alpha_f_decay < self.alpha_f_cooldown:
            problems.append(
                Problem(
                    "alpha_f_cooldown",
                    f"{self.alpha_f_cooldown} is above alpha_f_decay={self.alpha_f_decay}; llm-foundry requires "
                    "alpha_f_decay >= alpha_f_cooldown",
                )
            )
        if problems:
            raise ConfigError(problems)
        return self

    def marks(self, d: Mapping[str, int], units: Mapping[str, str], total: int) -> list[Mark]:
        marks = super().marks(d, units, total)
        start = max(d["t_warmup"], d["t_max"] - d["t_cooldown"])
        if d["t_cooldown"] > 0 and start < total:
            marks.append(("cooldown start", start, units["t_max"]))
        return marks

    def run_problems(self, d: Mapping[str, int], run: RunContext) -> list[Problem]:
        del d
        unit = run.max_duration.unit
        return [
            Problem(
                key,
                f"{getattr(self, key)} must be in the unit of max_duration ({run.max_duration}), as llm-foundry "
                "requires",
            )
            for key in ("t_warmup", "t_scale", "t_cooldown")
            if getattr(self, key).unit != unit
        ]


#: ``scheduler.name`` -> model, for Composer's schedules this package registers.
COMPOSER_MODELS: dict[str, type[ScheduleModel]] = {
    m.name: m
    for m in (Step, MultiStep, MultiStepWithWarmup, Constant, Linear, Exponential, Cosine, CosineWithRestarts,
              Polynomial, PolynomialWithWarmup)
}  # fmt: skip
#: ``scheduler.name`` -> model, for llm-foundry's built-in schedules.
FOUNDRY_MODELS: dict[str, type[ScheduleModel]] = {
    m.name: m for m in (ConstantWithWarmup, CosineWithWarmup, LinearDecayWithWarmup, InvSqrtWithWarmup)
}
