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

# public name -> the module that defines it
_EXPORTS = {
    "ConfigError": "foundry_ext.config.errors",
    "InverseSqrtScheduler": "foundry_ext.schedulers.inverse_sqrt",
    "PowerScheduler": "foundry_ext.schedulers.power",
    "ScheduleResumeCheck": "foundry_ext.resume_check",
    "StagesScheduler": "foundry_ext.schedulers.stages",
    "WSDPeriodsScheduler": "foundry_ext.schedulers.wsd_periods",
    "ReduceLROnPlateauCallback": "foundry_ext.plateau.callback",
    "ReduceLROnPlateauScheduler": "foundry_ext.plateau.scheduler",
    "TorchLRScheduler": "foundry_ext.schedulers.torch_lr",
    "WarmupStableDecayScheduler": "foundry_ext.schedulers.wsd",
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
    from foundry_ext.plateau.callback import ReduceLROnPlateauCallback
    from foundry_ext.plateau.scheduler import ReduceLROnPlateauScheduler
    from foundry_ext.resume_check import ScheduleResumeCheck
    from foundry_ext.schedulers.inverse_sqrt import InverseSqrtScheduler
    from foundry_ext.schedulers.power import PowerScheduler
    from foundry_ext.schedulers.stages import StagesScheduler
    from foundry_ext.schedulers.torch_lr import TorchLRScheduler
    from foundry_ext.schedulers.wsd import WarmupStableDecayScheduler
    from foundry_ext.schedulers.wsd_periods import WSDPeriodsScheduler

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
