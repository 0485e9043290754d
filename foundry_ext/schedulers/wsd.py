"""``warmup_stable_decay`` as a ComposerScheduler (the keys and the formula: :mod:`foundry_ext.schedules.wsd`)."""

from __future__ import annotations

from foundry_ext.schedulers.base import ModelScheduler
from foundry_ext.schedules.wsd import DECAY_TYPES, WARMUP_TYPES, WarmupStableDecay, decay_shape, warmup_shape

__all__ = ["DECAY_TYPES", "WARMUP_TYPES", "WarmupStableDecayScheduler", "decay_shape", "warmup_shape"]


class WarmupStableDecayScheduler(ModelScheduler):
    """``warmup_stable_decay``: warmup, a constant plateau at 1, then a decay to ``alpha_f`` ending at ``t_max``.

    Args:
        t_warmup (str | Time): Warmup length. Default = ``"0ba"`` (no warmup).
        t_decay (str | Time): Length of the final decay. Default = ``"0.2dur"``.
        t_max (str | Time): When the decay ends. Default = ``"1dur"``.
        alpha_f (float): Final multiplier, the LR floor as a fraction of the base LR, in [0, 1]. Default = ``0.0``.
        alpha_i (float): Multiplier at which the warmup starts, in [0, 1]. Default = ``0.0``.
        decay_type (str): ``linear``, ``sqrt``, ``cosine`` or ``square``. Default = ``"linear"``.
        warmup_type (str): ``linear``, ``cosine`` or ``sqrt``. Default = ``"linear"``.
        scale_warmup (bool): Whether ssr also scales the warmup. Default = ``False``.

    Raises:
        ConfigError: every bad key, one line each (``scheduler.<key>: ...``), when the scheduler is built.
    """

    Config = WarmupStableDecay
