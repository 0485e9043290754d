"""The plateau decision rule: torch's ``ReduceLROnPlateau`` arithmetic on a scale, with no Composer or torch state.

Kept pure so that the callback, ``foundry-ext plot --metrics`` and the property tests run the very same code.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Cut", "PlateauRule", "PlateauState"]


@dataclass
class PlateauState:
    """Everything the rule remembers between evaluations (saved in checkpoints)."""

    best: float | None = None  # None until the first finite value (torch: +inf for min, -inf for max)
    num_bad_evals: int = 0
    cooldown_counter: int = 0
    scale: float = 1.0
    cuts: int = 0
    last_value: float | None = None
    num_evals: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PlateauState:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


@dataclass(frozen=True)
class Cut:
    """One LR cut: the scale before and after, and why."""

    old_scale: float
    new_scale: float
    value: float
    best: float
    evals_waited: int


@dataclass(frozen=True)
class PlateauRule:
    r"""torch's ``ReduceLROnPlateau.step`` applied to a scale :math:`s` (LR of group :math:`g` = base_lr_g * s).

    At each evaluation with value :math:`v`:

    1. improvement: ``min``/``rel``: :math:`v < best (1 - \theta)`; ``min``/``abs``: :math:`v < best - \theta`;
       ``max``/``rel``: :math:`v > best (1 + \theta)`; ``max``/``abs``: :math:`v > best + \theta`. An improvement
       sets ``best = v`` and ``num_bad_evals = 0``; anything else (a NaN or inf value too) adds 1.
    2. in cooldown (``cooldown_counter > 0``): ``cooldown_counter -= 1`` and ``num_bad_evals = 0``.
    3. if ``num_bad_evals > patience``: cut :math:`s' = \max(s \cdot factor, floor)` with
       :math:`floor = \max(min\_scale, \max_g min\_lr_g / base\_lr_g)`; the cut is applied only if some group's LR
       drops by more than ``eps`` (:math:`base\_lr_g (s - s') > eps`); either way ``cooldown_counter = cooldown``
       and ``num_bad_evals = 0``.
    """

    mode: str = "min"
    factor: float = 0.1
    patience: int = 10
    threshold: float = 1e-4
    threshold_mode: str = "rel"
    cooldown: int = 0
    min_lr: float | Sequence[float] = 0.0
    min_scale: float = 0.0
    eps: float = 1e-8

    def is_better(self, value: float, best: float | None) -> bool:
        if not math.isfinite(value):
            return False  # never poisons best: torch would take -inf as a new best in min mode
        if best is None:
            return True  # torch's best starts at the worst value (+inf / -inf): any finite value improves
        if self.mode == "min":
            return value < (best * (1.0 - self.threshold) if self.threshold_mode == "rel" else best - self.threshold)
        return value > (best * (self.threshold + 1.0) if self.threshold_mode == "rel" else best + self.threshold)

    def floor(self, base_lrs: Sequence[float]) -> float:
        """The smallest scale allowed: ``min_scale`` and every group's ``min_lr / base_lr``."""
        min_lrs = self.min_lr if isinstance(self.min_lr, Sequence) else [self.min_lr] * len(base_lrs)
        if len(min_lrs) != len(base_lrs):
            raise ValueError(f"scheduler.min_lr: {len(min_lrs)} values given for {len(base_lrs)} param groups")
        ratios = [m / b for m, b in zip(min_lrs, base_lrs, strict=True) if b > 0]
        return max([self.min_scale, *ratios])

    def step(self, state: PlateauState, value: float, base_lrs: Sequence[float] = (1.0,)) -> Cut | None:
        """Update ``state`` in place for one evaluation; return the cut if one was applied."""
        state.last_value = value
        state.num_evals += 1
        if self.is_better(value, state.best):
            state.best = value
            state.num_bad_evals = 0
        else:
            state.num_bad_evals += 1
        if state.cooldown_counter > 0:
            state.cooldown_counter -= 1
            state.num_bad_evals = 0
        if state.num_bad_evals <= self.patience:
            return None
        waited = state.num_bad_evals
        old = state.scale
        new = max(old * self.factor, self.floor(base_lrs))
        state.cooldown_counter = self.cooldown
        state.num_bad_evals = 0
        if not any(b * old - b * new > self.eps for b in base_lrs):
            return None
        state.scale = new
        state.cuts += 1
        return Cut(old, new, value, state.best if state.best is not None else math.nan, waited)
