"""The ComposerSchedulers that llm-foundry builds (through the ``llmfoundry_schedulers`` entry points).

Each one validates its keys with its model (:mod:`foundry_ext.schedules`) and is a pure function of
``state.timestamp``. Importing a module here imports Composer.
"""

from __future__ import annotations

from foundry_ext._lazy import lazy_exports

_EXPORTS = {
    "COMPOSER_SCHEDULERS": "foundry_ext.schedulers.composer",
    "TorchLRScheduler": "foundry_ext.schedulers.torch_lr",
    "WarmupStableDecayScheduler": "foundry_ext.schedulers.wsd",
}
__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
