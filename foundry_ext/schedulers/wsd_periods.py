"""``wsd_periods`` (WSD-S) as a ComposerScheduler (keys and formula: :mod:`foundry_ext.schedules.wsd_periods`)."""

from __future__ import annotations

from foundry_ext.schedulers.base import ModelScheduler
from foundry_ext.schedules.wsd_periods import WSDPeriods

__all__ = ["WSDPeriodsScheduler"]


class WSDPeriodsScheduler(ModelScheduler):
    """``wsd_periods``: one warmup, then periods that each hold a peak and decay to ``alpha_f`` at their end.

    Args:
        periods (list[str | Time]): Length of each period; the first includes the warmup. Required.
        peaks (list[float], optional): Peak multiplier of each period. Default = all ``1.0``.
        t_warmup (str | Time): Warmup length, at the start of the first period. Default = ``"0ba"``.
        t_decay (str | Time, optional): Decay length at the end of every period (exactly one of this and
            ``decay_fraction``).
        decay_fraction (float, optional): Decay length as a fraction of each period's length, in [0, 1].
        decay_type (str): ``linear``, ``sqrt``, ``cosine`` or ``square``. Default = ``"linear"``.
        alpha_i (float): Multiplier at which the warmup starts. Default = ``0.0``.
        alpha_f (float): Multiplier at the end of every decay and after the last period. Default = ``0.0``.
        scale_warmup (bool): Whether ssr also scales the warmup. Default = ``False``.

    Raises:
        ConfigError: every bad key, one line each (``scheduler.<key>: ...``), when the scheduler is built.
    """

    Config = WSDPeriods
