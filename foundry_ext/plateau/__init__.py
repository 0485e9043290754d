"""ReduceLROnPlateau for Composer: a stateless scheduler plus the callback (adapter) that holds its state.

``foundry_ext.plateau.rule`` (the decision rule) imports neither torch nor Composer; the scheduler and the callback
are imported on first use (PEP 562), so the preview and the CLI can use the rule without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from foundry_ext._lazy import lazy_exports

_EXPORTS = {
    "DEFAULT_MONITOR": "foundry_ext.schedules.plateau",
    "Cut": "foundry_ext.plateau.rule",
    "PlateauRule": "foundry_ext.plateau.rule",
    "PlateauState": "foundry_ext.plateau.rule",
    "ReduceLROnPlateauCallback": "foundry_ext.plateau.callback",
    "ReduceLROnPlateauScheduler": "foundry_ext.plateau.scheduler",
}

__all__ = [
    "DEFAULT_MONITOR",
    "Cut",
    "PlateauRule",
    "PlateauState",
    "ReduceLROnPlateauCallback",
    "ReduceLROnPlateauScheduler",
]

if TYPE_CHECKING:
    from foundry_ext.plateau.callback import ReduceLROnPlateauCallback
    from foundry_ext.plateau.rule import Cut, PlateauRule, PlateauState
    from foundry_ext.plateau.scheduler import ReduceLROnPlateauScheduler
    from foundry_ext.schedules.plateau import DEFAULT_MONITOR

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
