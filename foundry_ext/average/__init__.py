r"""``foundry-ext average``: the weighted average of a run's checkpoints, as a checkpoint Composer loads.

See docs/average.md.

.. math::
    \bar\theta = \sum_i w_i\, \theta_i, \qquad \sum_i w_i = 1, \text{ oldest first}

* :mod:`~foundry_ext.average.options`: ``--weights``, ``--last`` / ``--every`` / ``--batches``, ``--out`` read and
  checked (no torch);
* :mod:`~foundry_ext.average.selection`: which checkpoints the arguments name (files, sharded folders, a save
  folder's chosen ones), links resolved (no torch);
* :mod:`~foundry_ext.average.source`: each checkpoint's run and batch, read by the safe reader of
  :mod:`foundry_ext.checkpoint` (no code from a file runs);
* :mod:`~foundry_ext.average.full`: the sum for ``.pt`` files, two models in memory at most;
* :mod:`~foundry_ext.average.sharded`: the sum for sharded folders, chunk by chunk, file by file, without a process
  group;
* :mod:`~foundry_ext.average.write`: :func:`average`, every check then one atomic write.

The output is the newest input with its model weights replaced by the average; every other value (optimizer state,
timestamp, schedulers, RNG, callbacks) is the newest input's. Every refusal is an
:class:`~foundry_ext.average.options.AverageError`, one line, raised before anything is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from foundry_ext._lazy import lazy_exports

_EXPORTS = {
    "AverageError": "foundry_ext.average.options",
    "Result": "foundry_ext.average.write",
    "Selection": "foundry_ext.average.options",
    "Weights": "foundry_ext.average.options",
    "average": "foundry_ext.average.write",
    "parse_selection": "foundry_ext.average.options",
    "parse_weights": "foundry_ext.average.options",
}
__all__ = ["AverageError", "Result", "Selection", "Weights", "average", "parse_selection", "parse_weights"]

if TYPE_CHECKING:
    from foundry_ext.average.options import AverageError, Selection, Weights, parse_selection, parse_weights
    from foundry_ext.average.write import Result, average

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
