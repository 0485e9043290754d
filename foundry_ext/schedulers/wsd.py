"""Warmup-stable-decay (WSD): warmup, a constant plateau, then a decay that ends at ``t_max``."""

from __future__ import annotations

import math
from typing import Any

from composer.core import State, Time
from composer.optim import ComposerScheduler

from foundry_ext._config import ConfigError, ValidatedMeta, choice, duration, flag, number
from foundry_ext._time import format_time, now, resolve

__all__ = ["DECAY_TYPES", "WARMUP_TYPES", "WarmupStableDecayScheduler", "decay_shape", "warmup_shape"]

WARMUP_TYPES = ("linear", "cosine", "sqrt")
DECAY_TYPES = ("linear", "sqrt", "cosine", "square")


def warmup_shape(kind: str, p: float) -> float:
    """Warmup shape ``w(p)`` for progress ``p`` in [0, 1]; the shapes of Hugging Face's ``get_wsd_schedule``."""
    if kind == "linear":
        return p
    if kind == "cosine":
        return 0.5 * (1.0 - math.cos(math.pi * p))
    return 1.0 - math.sqrt(1.0 - p)  # "sqrt": HF's "1-sqrt" warmup


def decay_shape(kind: str, p: float) -> float:
    """Decay shape ``d(p)`` for progress ``p`` in [0, 1], from 1 at ``p = 0`` to 0 at ``p = 1``."""
    if kind == "linear":
        return 1.0 - p
    if kind == "sqrt":
        return 1.0 - math.sqrt(p)
    if kind == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * p))
    return 1.0 - p * p  # "square"


class WarmupStableDecayScheduler(ComposerScheduler, metaclass=ValidatedMeta):
    r"""Warmup, a constant plateau at 1, then a decay to ``alpha_f`` that ends exactly at ``t_max``.

    With :math:`t_w` = ``t_warmup``, :math:`t_d` = ``t_decay``, :math:`t_{max}` = ``t_max`` (all converted to one
    unit, batches unless every duration is in tokens or samples) and :math:`t` the current time in that unit:

    .. math::
        \alpha(t) = \begin{cases}
            w(t / t_w), & t < t_w \\
            1, & t_w \le t < t_{max} - t_d \\
            \alpha_f + (1 - \alpha_f)\, d(p), \; p = \frac{t - (t_{max} - t_d)}{t_d}, & t_{max} - t_d \le t < t_{max} \\
            \alpha_f, & t \ge t_{max}
        \end{cases}

    Warmup shapes :math:`w(p)`: ``linear`` :math:`p`, ``cosine`` :math:`(1 - \cos \pi p) / 2`, ``sqrt``
    :math:`1 - \sqrt{1 - p}`. Decay shapes :math:`d(p)`: ``linear`` :math:`1 - p`, ``sqrt`` :math:`1 - \sqrt{p}`
    (the "1-sqrt" cooldown), ``cosine`` :math:`(1 + \cos \pi p) / 2`, ``square`` :math:`1 - p^2`.

    Warmup follows Composer's convention: it starts at 0 (``t / t_warmup``), not at ``alpha_f``.

    ``scale_schedule_ratio`` (ssr) scales ``t_max`` and ``t_decay`` like every Composer duration, and ``t_warmup``
    only when ``scale_warmup`` is true, as Composer's ``*_with_warmup`` schedulers do. Durations in ``dur`` follow
    ``max_duration``, which the Trainer has already scaled.

    Args:
        t_warmup (str | Time): Warmup length. Default = ``"0ba"`` (no warmup).
        t_decay (str | Time): Length of the final decay. Default = ``"0.2dur"``.
        t_max (str | Time): When the decay ends. Default = ``"1dur"``.
        alpha_f (float): Final multiplier, the LR floor as a fraction of the base LR, in [0, 1]. Default = ``0.0``.
        decay_type (str): ``linear``, ``sqrt``, ``cosine`` or ``square``. Default = ``"linear"``.
        warmup_type (str): ``linear``, ``cosine`` or ``sqrt``. Default = ``"linear"``.
        scale_warmup (bool): Whether ssr also scales the warmup. Default = ``False``.

    Raises:
        ConfigError: for a bad value, or when ``t_warmup + t_decay > t_max`` (at build time when the units allow it,
            otherwise at the first call, which the Trainer makes while it is built, before the first batch).
    """

    _yaml_prefix = "scheduler"
    _fields: dict[str, Any] = {  # noqa: RUF012 - read by ValidatedMeta
        "t_warmup": duration(),
        "t_decay": duration(),
        "t_max": duration(allow_zero=False),
        "alpha_f": number(lo=0.0, hi=1.0),
        "decay_type": choice(*DECAY_TYPES),
        "warmup_type": choice(*WARMUP_TYPES),
        "scale_warmup": flag,
    }

    def __init__(
        self,
        t_warmup: str | Time = "0ba",
        t_decay: str | Time = "0.2dur",
        t_max: str | Time = "1dur",
        alpha_f: float = 0.0,
        decay_type: str = "linear",
        warmup_type: str = "linear",
        scale_warmup: bool = False,
    ) -> None:
        self.t_warmup = t_warmup
        self.t_decay = t_decay
        self.t_max = t_max
        self.alpha_f = alpha_f
        self.decay_type = decay_type
        self.warmup_type = warmup_type
        self.scale_warmup = scale_warmup
        self._cache: dict = {}
        durations = {"t_warmup": t_warmup, "t_decay": t_decay, "t_max": t_max}
        units = {t.unit for t in durations.values() if isinstance(t, Time) and t.value > 0}
        if len(units) == 1:  # same unit: the overlap can be checked now, before any model is built
            _check_fits({k: float(v.value) for k, v in durations.items()}, durations)

    def _durations(self, state: State, ssr: float) -> tuple[int, int, int, Any]:
        resolved = resolve(
            {"t_warmup": self.t_warmup, "t_decay": self.t_decay, "t_max": self.t_max},
            {"t_warmup": self.scale_warmup},
            state,
            ssr,
            self._cache,
        )
        values = resolved.values
        if "checked" not in self._cache or self._cache["checked"] is not resolved:
            _check_fits({k: float(v) for k, v in values.items()}, self.__dict__, resolved.unit.value)
            self._cache["checked"] = resolved
        return values["t_warmup"], values["t_decay"], values["t_max"], resolved.unit

    def __call__(self, state: State, ssr: float = 1.0) -> float:
        t_warmup, t_decay, t_max, unit = self._durations(state, ssr)
        t = now(state, unit)
        if t < t_warmup:
            return warmup_shape(self.warmup_type, t / t_warmup)
        decay_start = t_max - t_decay
        if t < decay_start:
            return 1.0
        if t >= t_max:
            return self.alpha_f
        p = (t - decay_start) / t_decay
        return self.alpha_f + (1.0 - self.alpha_f) * decay_shape(self.decay_type, p)


def _check_fits(values: dict[str, float], given: Any, unit: str | None = None) -> None:
    """Raise when warmup and decay overlap: ``t_warmup + t_decay > t_max``."""
    if values["t_warmup"] + values["t_decay"] > values["t_max"]:

        def show(value: Any) -> str:
            return format_time(value) if isinstance(value, Time) else repr(value)

        shown = ", ".join(f"{k}={show(given[k])}" for k in ("t_warmup", "t_decay", "t_max"))
        where = f" (= {values['t_warmup']:g} + {values['t_decay']:g} > {values['t_max']:g} {unit})" if unit else ""
        raise ConfigError(
            "scheduler.t_decay",
            f"warmup and decay do not fit before t_max: {shown}{where}; "
            "need t_warmup + t_decay <= t_max (shorten t_warmup or t_decay, or raise t_max/max_duration)",
        )
