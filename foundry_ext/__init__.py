"""foundry-ext: learning-rate schedulers for MosaicML llm-foundry and Composer.

Installed, it registers its schedulers and callbacks with llm-foundry through entry points, so a train YAML
selects them by ``scheduler.name`` with no code change. Python users import the classes from here.

The classes are imported on first use (PEP 562): ``import foundry_ext`` alone imports neither torch nor Composer, so
the ``foundry-ext`` command starts in a fraction of a second.

The package, top to bottom (each layer imports only those below it: pyproject.toml ``[tool.importlinter]``, checked
by ``lint-imports``):

* ``cli``: the ``foundry-ext`` command, one module (or package) per subcommand, imported only when used.
* the tools, side by side: ``anneal`` (branch a cooldown from a checkpoint), ``average`` (average checkpoints),
  ``lr_find`` (the LR range test), ``law`` (loss laws: fit, predict, tune), ``demo_data`` (the offline demo data).
* ``preview``: the LR of every batch of a run before the run (the one YAML -> LR path), its chart and figure.
* ``figures``: how a figure is drawn and saved (matplotlib is imported here and in ``preview.figure`` only).
* ``runlog``: one reader of run logs (CSV, MLflow).
* ``trainer``: what runs inside Composer's Trainer: the schedulers llm-foundry builds, this package's callbacks
  (``checkpoint_guard``, ``spike_guard``, the plateau, the batch-size ramp, the resume check) and config transforms.
* ``catalog``: the names this package knows (schedulers, callbacks, llm-foundry's keys) and the checks made on a
  whole train config before anything is built; neither torch nor Composer.
* ``schedules``: one typed model per ``scheduler.name``, with its formula.
* ``config`` (durations, errors, the model base), ``checkpoint`` (reading checkpoints without trusting them, the
  folder's owner) and ``streaming_cleanup`` (what mosaicml-streaming leaves behind).
* helpers that import nothing of the package: ``text`` (one printable line), ``outputs`` (where a command may write),
  ``_command`` (a command line that pastes), ``_exit`` (a rank's exit status), ``_process`` (is a process alive),
  ``_lazy`` (lazy exports).
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
