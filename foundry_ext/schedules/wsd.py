"""``warmup_stable_decay``: warmup, a constant plateau, then a decay that ends at ``t_max``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal, get_args

from pydantic import Field, model_validator

from foundry_ext.config.base import NonNegativeDuration, PositiveDuration
from foundry_ext.config.durations import Duration
from foundry_ext.config.errors import ConfigError, Problem
from foundry_ext.schedules.base import Mark, RunContext, ScheduleModel, elementwise

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "DECAY_TYPES",
    "WARMUP_TYPES",
    "WarmupStableDecay",
    "decay_shape",
    "decay_shapes",
    "decay_start_of",
    "warmup_shape",
]

WarmupType = Literal["linear", "cosine", "sqrt"]
DecayType = Literal["linear", "sqrt", "cosine", "square"]
#: The warmup shapes (``warmup_type``), from the field's type: the one list.
WARMUP_TYPES: tuple[str, ...] = get_args(WarmupType)
#: The decay shapes (``decay_type`` here and in ``wsd_periods``, ``anneal --shape``, ``law tune --shape``).
DECAY_TYPES: tuple[str, ...] = get_args(DecayType)


def warmup_shape(kind: str, p: float) -> float:
    """Warmup shape ``w(p)`` for progress ``p`` in [0, 1]; the shapes of Hugging Face's ``get_wsd_schedule``."""
    if kind == "linear":
        return p
    if kind == "cosine":
        return 0.5 * (1.0 - math.cos(math.pi * p))
    return 1.0 - math.sqrt(1.0 - p)  # "sqrt": HF's "1-sqrt" warmup


def warmup_shapes(kind: str, p: np.ndarray) -> np.ndarray:
    """:func:`warmup_shape` of every element of ``p`` (float64), bitwise equal."""
    import numpy as np

    if kind == "linear":
        return p
    if kind == "cosine":
        return 0.5 * (1.0 - elementwise(math.cos, math.pi * p))
    return 1.0 - np.sqrt(1.0 - p)


def decay_shapes(kind: str, p: np.ndarray) -> np.ndarray:
    """:func:`decay_shape` of every element of ``p`` (float64), bitwise equal."""
    import numpy as np

    if kind == "linear":
        return 1.0 - p
    if kind == "sqrt":
        return 1.0 - np.sqrt(p)
    if kind == "cosine":
        return 0.5 * (1.0 + elementwise(math.cos, math.pi * p))
    return 1.0 - p * p


def decay_shape(kind: str, p: float) -> float:
    """Decay shape ``d(p)`` for progress ``p`` in [0, 1], from 1 at ``p = 0`` to 0 at ``p = 1``."""
    if kind == "linear":
        return 1.0 - p
    if kind == "sqrt":
        return 1.0 - math.sqrt(p)
    if kind == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * p))
    return 1.0 - p * p  # "square"


def decay_start_of(d: Mapping[str, int]) -> int:
    """Where the decay starts, from the resolved durations: ``t_decay_start``, else ``t_max - t_decay``."""
    return d["t_decay_start"] if "t_decay_start" in d else d["t_max"] - d["t_decay"]


class WarmupStableDecay(ScheduleModel):
    r"""Warmup, a constant plateau at 1, then a decay to ``alpha_f`` that ends exactly at ``t_max``.

    With :math:`t_w` = ``t_warmup``, :math:`t_d` = ``t_decay``, :math:`t_{max}` = ``t_max`` (all converted to one
    unit, batches unless every duration is in tokens or samples) and :math:`t` the current time in that unit:

    .. math::
        \alpha(t) = \begin{cases}
            \alpha_i + (1 - \alpha_i)\, w(t / t_w), & t < t_w \\
            1, & t_w \le t < t_{max} - t_d \\
            \alpha_f + (1 - \alpha_f)\, d(p), \; p = \frac{t - (t_{max} - t_d)}{t_d}, & t_{max} - t_d \le t < t_{max} \\
            \alpha_f, & t \ge t_{max}
        \end{cases}

    Warmup shapes :math:`w(p)`: ``linear`` :math:`p`, ``cosine`` :math:`(1 - \cos \pi p) / 2`, ``sqrt``
    :math:`1 - \sqrt{1 - p}`. Decay shapes :math:`d(p)`: ``linear`` :math:`1 - p`, ``sqrt`` :math:`1 - \sqrt{p}`
    (the "1-sqrt" cooldown), ``cosine`` :math:`(1 + \cos \pi p) / 2`, ``square`` :math:`1 - p^2`.

    The warmup starts at ``alpha_i`` (default 0, Composer's convention: ``t / t_warmup``). With ``alpha_i`` equal to
    Hugging Face's ``min_lr_ratio`` the warmup is ``get_wsd_schedule``'s; with ``alpha_i = warmup_min_lr / lr`` it is
    OLMo-core's ``WSD`` warmup.

    ``scale_schedule_ratio`` (ssr) scales ``t_max`` and ``t_decay`` like every Composer duration, and ``t_warmup``
    only when ``scale_warmup`` is true, as Composer's ``*_with_warmup`` schedulers do. Durations in ``dur`` follow
    ``max_duration``, which the Trainer has already scaled.

    ``t_warmup + t_decay > t_max`` is an error: at build time when the three share a unit, otherwise when the
    Trainer first calls the scheduler (while it is built, before the first batch).

    ``t_decay_start`` (an absolute time such as ``8000ba``; not ``dur``) places the decay's start instead of
    ``t_decay``: :math:`t_{max} - t_d` above becomes :math:`t_s` = ``t_decay_start`` and :math:`t_d = t_{max} - t_s`.
    A branch resumed from a stable checkpoint at batch :math:`s` with ``t_decay_start: {s}ba`` decays from there, and
    a relaunch with a longer or shorter ``max_duration`` does not move the start (``foundry-ext anneal`` writes it).
    It cannot be given with ``t_decay``; ``t_warmup <= t_decay_start <= t_max`` is checked like the overlap above.
    """

    name = "warmup_stable_decay"
    summary = "warmup, constant, then a linear / sqrt (1-sqrt) / cosine / square decay to alpha_f ending at t_max"
    adapter = "foundry_ext.trainer.schedulers:WarmupStableDecayScheduler"
    warmup_field = "t_warmup"
    has_formula = True

    t_warmup: NonNegativeDuration = Field(Duration(0, "ba"), description="warmup length (0ba: no warmup)")
    t_decay: NonNegativeDuration = Field(Duration(0.2, "dur"), description="length of the final decay")
    t_max: PositiveDuration = Field(Duration(1.0, "dur"), description="when the decay ends")
    t_decay_start: NonNegativeDuration | None = Field(
        None,
        description="when the decay starts, absolute (e.g. 8000ba; not dur), instead of t_decay: decays to t_max",
    )
    alpha_f: float = Field(0.0, ge=0.0, le=1.0, description="final multiplier: the LR floor as a fraction of the LR")
    alpha_i: float = Field(0.0, ge=0.0, le=1.0, description="multiplier at which the warmup starts")
    decay_type: DecayType = Field("linear", description="shape of the decay")
    warmup_type: WarmupType = Field("linear", description="shape of the warmup")
    scale_warmup: bool = Field(False, description="whether scale_schedule_ratio also scales t_warmup")

    @model_validator(mode="after")
    def _fits(self) -> WarmupStableDecay:
        start = self.t_decay_start
        if start is not None:
            if start.unit == "dur":
                raise ConfigError(
                    [
                        Problem(
                            "t_decay_start",
                            f"'{start}' is relative to max_duration, which a relaunch may change; "
                            "expected an absolute duration such as '8000ba', '2000000tok' or '512sp' (for a "
                            "fraction of the run use t_decay)",
                        )
                    ]
                )
            if "t_decay" in self.model_fields_set:
                raise ConfigError(
                    [
                        Problem(
                            "t_decay_start",
                            f"{start} cannot be given with t_decay={self.t_decay}: t_decay_start "
                            "sets where the decay starts and t_max where it ends; drop one of them",
                        )
                    ]
                )
        durations = self.durations().values()
        units = {t.unit for t in durations if t.value > 0}
        if len(units) == 1:  # same unit: the overlap can be checked now, before any model is built
            problem = self._overlap({k: t.value for k, t in self.durations().items()})
            if problem:
                raise ConfigError([problem])
        return self

    def durations(self) -> dict[str, Duration]:
        """The set durations; ``t_decay`` (its default of ``0.2dur``) not when ``t_decay_start`` replaces it."""
        found = super().durations()
        if self.t_decay_start is not None:
            found.pop("t_decay", None)
        return found

    def _overlap(self, d: Mapping[str, float], unit: str | None = None) -> Problem | None:
        if "t_decay_start" in d:
            start = d["t_decay_start"]
            if d["t_warmup"] <= start <= d["t_max"]:
                return None
            shown = f"t_warmup={self.t_warmup}, t_decay_start={self.t_decay_start}, t_max={self.t_max}"
            where = f" (= {d['t_warmup']:g}, {start:g}, {d['t_max']:g} {unit})" if unit else ""
            return Problem(
                "t_decay_start",
                f"the decay does not start between the warmup's end and t_max: {shown}{where}; need t_warmup <= "
                "t_decay_start <= t_max (raise t_max/max_duration or move t_decay_start)",
            )
        if d["t_warmup"] + d["t_decay"] <= d["t_max"]:
            return None
        shown = f"t_warmup={self.t_warmup}, t_decay={self.t_decay}, t_max={self.t_max}"
        where = f" (= {d['t_warmup']:g} + {d['t_decay']:g} > {d['t_max']:g} {unit})" if unit else ""
        return Problem(
            "t_decay",
            f"warmup and decay do not fit before t_max: {shown}{where}; need t_warmup + t_decay <= t_max (shorten "
            "t_warmup or t_decay, or raise t_max/max_duration)",
        )

    def run_problems(self, d: Mapping[str, int], run: RunContext) -> list[Problem]:
        problem = self._overlap({k: float(v) for k, v in d.items()}, run.unit)
        return [problem] if problem else []

    def marks(self, d: Mapping[str, int], units: Mapping[str, str], total: int) -> list[Mark]:
        unit = units["t_max"]
        marks = [("warmup end", d["t_warmup"], unit)] if d["t_warmup"] > 0 else []
        start = decay_start_of(d)
        if start < d["t_max"]:
            marks.append(("decay start", start, unit))
        return [*marks, ("decay end", d["t_max"], unit)]

    def multiplier(self, t: int, d: Mapping[str, int]) -> float:
        t_warmup, t_max = d["t_warmup"], d["t_max"]
        if t < t_warmup:
            return self.alpha_i + (1.0 - self.alpha_i) * warmup_shape(self.warmup_type, t / t_warmup)
        decay_start = decay_start_of(d)
        t_decay = t_max - decay_start
        if t < decay_start:
            return 1.0
        if t >= t_max:
            return self.alpha_f
        p = (t - decay_start) / t_decay
        return self.alpha_f + (1.0 - self.alpha_f) * decay_shape(self.decay_type, p)

    def multipliers(self, t: np.ndarray, d: Mapping[str, int]) -> np.ndarray:
        import numpy as np

        t_warmup, t_max = d["t_warmup"], d["t_max"]
        decay_start = decay_start_of(d)
        t_decay = t_max - decay_start
        out = np.ones(len(t), dtype=np.float64)
        warm = t < t_warmup
        if warm.any():
            out[warm] = self.alpha_i + (1.0 - self.alpha_i) * warmup_shapes(self.warmup_type, t[warm] / t_warmup)
        done = ~warm & (t >= decay_start) & (t >= t_max)
        out[done] = self.alpha_f
        decay = ~warm & (t >= decay_start) & (t < t_max)
        if decay.any():
            p = (t[decay] - decay_start) / t_decay
            out[decay] = self.alpha_f + (1.0 - self.alpha_f) * decay_shapes(self.decay_type, p)
        return out
