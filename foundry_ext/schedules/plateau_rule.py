"""The plateau decision rule: torch's ``ReduceLROnPlateau`` arithmetic on scales, with no Composer or torch state.

Kept pure so that the callback, ``foundry-ext plot --metrics`` and the property tests run the very same code.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Cut", "PlateauRule", "PlateauState"]


@dataclass
class PlateauState:
    """Everything the rule remembers between evaluations (saved in checkpoints).

    ``scale`` is the plateau scale of param group 0, which is every group's while the groups share one (one group, or
    the same ``min_lr / base_lr`` in every group). ``group_scales`` holds one scale per param group once the optimizer
    has more than one (torch keeps one LR per group, and so does this), and is ``None`` otherwise, so the checkpoint of
    a one-group run is the same as before per-group scales existed; a checkpoint that holds only ``scale`` applies it
    to every group.
    """

    best: float | None = None  # None until the first finite value (torch: +inf for min, -inf for max)
    num_bad_evals: int = 0
    cooldown_counter: int = 0
    scale: float = 1.0
    cuts: int = 0
    last_value: float | None = None
    num_evals: int = 0
    group_scales: list[float] | None = field(default=None)

    def scales(self, num_groups: int) -> list[float]:
        """The scale of each of ``num_groups`` param groups."""
        if self.group_scales is None:
            return [self.scale] * num_groups
        if len(self.group_scales) != num_groups:
            raise ValueError(
                f"the plateau state holds {len(self.group_scales)} param-group scales but the optimizer has "
                f"{num_groups} param groups"
            )
        return list(self.group_scales)

    def scale_of(self, group: int) -> float:
        """The scale of param group ``group``."""
        return self.scale if self.group_scales is None else self.group_scales[group]

    def set_scales(self, scales: Sequence[float]) -> None:
        self.scale = scales[0]
        self.group_scales = list(scales) if len(scales) > 1 else None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if data["group_scales"] is None:
            del data["group_scales"]  # one group: the same keys as checkpoints written before per-group scales
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PlateauState:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


@dataclass(frozen=True)
class Cut:
    """One LR cut: the scales before and after (param group 0's, and every group's), and why."""

    old_scale: float
    new_scale: float
    value: float
    best: float
    evals_waited: int
    old_scales: tuple[float, ...] = ()
    new_scales: tuple[float, ...] = ()


@dataclass(frozen=True)
class PlateauRule:
    r"""torch's ``ReduceLROnPlateau.step`` applied to one scale :math:`s_g` per param group (LR = base_lr_g * s_g).

    At each evaluation with value :math:`v`:

    1. improvement: ``min``/``rel``: :math:`v < best (1 - \theta)`; ``min``/``abs``: :math:`v < best - \theta`;
       ``max``/``rel``: :math:`v > best (1 + \theta)`; ``max``/``abs``: :math:`v > best + \theta`. An improvement
       sets ``best = v`` and ``num_bad_evals = 0``; anything else (a NaN or inf value too) adds 1.
    2. in cooldown (``cooldown_counter > 0``): ``cooldown_counter -= 1`` and ``num_bad_evals = 0``.
    3. if ``num_bad_evals > patience``: for every group :math:`g`,
       :math:`s_g' = \max(s_g \cdot factor, floor_g)` with :math:`floor_g = \max(min\_scale, min\_lr_g / base\_lr_g)`,
       applied to that group only if its LR drops by more than ``eps`` (:math:`base\_lr_g (s_g - s_g') > eps`), as
       torch does group by group; either way ``cooldown_counter = cooldown`` and ``num_bad_evals = 0``.
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

    def min_lrs(self, num_groups: int) -> list[float]:
        """``min_lr`` for each of ``num_groups`` param groups (a number applies to all)."""
        if not isinstance(self.min_lr, Sequence):
            return [float(self.min_lr)] * num_groups
        if len(self.min_lr) != num_groups:
            raise ValueError(
                f"scheduler.min_lr: {len(self.min_lr)} values for {num_groups} param groups; give one number, or "
                f"one per param group"
            )
        return [float(m) for m in self.min_lr]

    def floors(self, base_lrs: Sequence[float]) -> list[float]:
        """The smallest scale of each group: ``max(min_scale, min_lr_g / base_lr_g)`` (``min_scale`` if base is 0)."""
        return [
            max(self.min_scale, m / b) if b > 0 else self.min_scale
            for m, b in zip(self.min_lrs(len(base_lrs)), base_lrs, strict=True)
        ]

    def step(self, state: PlateauState, value: float, base_lrs: Sequence[float] = (1.0,)) -> Cut | None:
        """Update ``state`` in place for one evaluation; return the cut if one was applied to some group."""
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
        old = state.scales(len(base_lrs))
        candidates = [max(s * self.factor, f) for s, f in zip(old, self.floors(base_lrs), strict=True)]
        state.cooldown_counter = self.cooldown
        state.num_bad_evals = 0
        # torch: `if old_lr - new_lr > eps: param_group["lr"] = new_lr`, group by group
        new = [n if b * s - b * n > self.eps else s for s, n, b in zip(old, candidates, base_lrs, strict=True)]
        if new == old:
            return None
        state.set_scales(new)
        state.cuts += 1
        best = state.best if state.best is not None else math.nan
        return Cut(old[0], new[0], value, best, waited, tuple(old), tuple(new))
