"""foundry-ext: learning-rate schedulers for MosaicML llm-foundry and Composer.

Installed, it registers its schedulers and callbacks with llm-foundry through entry points, so a train YAML
selects them by ``scheduler.name`` with no code change. Python users import the classes from here.
"""

from importlib.metadata import PackageNotFoundError, version

from foundry_ext._config import ConfigError
from foundry_ext.plateau import ReduceLROnPlateauCallback, ReduceLROnPlateauScheduler
from foundry_ext.schedulers.torch_lr import TorchLRScheduler
from foundry_ext.schedulers.wsd import WarmupStableDecayScheduler

try:
    __version__ = version("foundry-ext")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0"

__all__ = [
    "ConfigError",
    "ReduceLROnPlateauCallback",
    "ReduceLROnPlateauScheduler",
    "TorchLRScheduler",
    "WarmupStableDecayScheduler",
    "__version__",
]
