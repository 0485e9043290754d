"""ReduceLROnPlateau for Composer: a stateless scheduler plus the callback (adapter) that holds its state."""

from foundry_ext.plateau.callback import ReduceLROnPlateauCallback
from foundry_ext.plateau.rule import Cut, PlateauRule, PlateauState
from foundry_ext.plateau.scheduler import DEFAULT_MONITOR, ReduceLROnPlateauScheduler

__all__ = [
    "DEFAULT_MONITOR",
    "Cut",
    "PlateauRule",
    "PlateauState",
    "ReduceLROnPlateauCallback",
    "ReduceLROnPlateauScheduler",
]
