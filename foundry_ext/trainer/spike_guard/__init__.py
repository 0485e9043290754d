"""Skip a spiking step on every rank at once; stop or roll back a burst (``callbacks.spike_guard``).

Modules: :mod:`.rule` (the window, the z-score and the decision; pure Python), :mod:`.callback` (the Composer
callback: one all-reduce per step, the gradients dropped on a skip), :mod:`.rollback` (the continuation YAML),
:mod:`.inject` (bad batches on purpose, for tests and the benchmark). The keys: ``foundry_ext.catalog.callbacks``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from foundry_ext._lazy import lazy_exports

_EXPORTS = {
    "SpikeGuard": "foundry_ext.trainer.spike_guard.callback",
    "SpikeGuardConfig": "foundry_ext.catalog.callbacks",
    "SpikeRule": "foundry_ext.trainer.spike_guard.rule",
}
__all__ = ["SpikeGuard", "SpikeGuardConfig", "SpikeRule"]

if TYPE_CHECKING:
    from foundry_ext.catalog.callbacks import SpikeGuardConfig
    from foundry_ext.trainer.spike_guard.callback import SpikeGuard
    from foundry_ext.trainer.spike_guard.rule import SpikeRule

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
