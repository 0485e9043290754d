"""foundry-ext: learning-rate schedulers for MosaicML llm-foundry and Composer.

Installed, it registers its schedulers and callbacks with llm-foundry through entry points, so a train YAML
selects them by ``scheduler.name`` with no code change. Python users import the classes from here.

The classes are imported on first use (PEP 562): ``import foundry_ext`` alone imports neither torch nor Composer, so
the ``foundry-ext`` command starts in a fraction of a second.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from foundry_ext._lazy import lazy_exports

try:
    __version__ = version("foundry-ext")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0"

# public name -> the module that defines it; the schedulers generated from the schedule models
# (WarmupStableDecayScheduler, ...) are found in foundry_ext.trainer.schedulers by their suffix: a new schedule adds
# no line here
_GENERATED = ("Scheduler", "foundry_ext.trainer.schedulers")
_EXPORTS = {
    "ConfigError": "foundry_ext.config.errors",
    "ReduceLROnPlateauCallback": "foundry_ext.trainer.plateau.callback",
    "ReduceLROnPlateauScheduler": "foundry_ext.trainer.plateau.scheduler",
    "ScheduleResumeCheck": "foundry_ext.trainer.resume_check",
    "TorchLRScheduler": "foundry_ext.trainer.torch_lr",
}

__all__ = [
    "ConfigError",
    "InverseSqrtScheduler",
    "PowerScheduler",
    "ReduceLROnPlateauCallback",
    "ReduceLROnPlateauScheduler",
    "ScheduleResumeCheck",
    "StagesScheduler",
    "TorchLRScheduler",
    "WSDPeriodsScheduler",
    "WarmupStableDecayScheduler",
    "__version__",
]

if TYPE_CHECKING:
    from foundry_ext.config.errors import ConfigError
    from foundry_ext.trainer.plateau.callback import ReduceLROnPlateauCallback
    from foundry_ext.trainer.plateau.scheduler import ReduceLROnPlateauScheduler
    from foundry_ext.trainer.resume_check import ScheduleResumeCheck
    from foundry_ext.trainer.schedulers import (
        InverseSqrtScheduler,
        PowerScheduler,
        StagesScheduler,
        WarmupStableDecayScheduler,
        WSDPeriodsScheduler,
    )
    from foundry_ext.trainer.torch_lr import TorchLRScheduler

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, _GENERATED)
