r"""Read Composer checkpoints without trusting them: no code from the file is ever run, every input gets an answer.

:func:`load_checkpoint_safely` checks the path and the bytes before anything is unpickled, then loads with
``torch.load(weights_only=True)`` and an explicit allow-list (:data:`ALLOWED_GLOBALS`); :func:`describe` turns the
result into the rows ``foundry-ext inspect`` prints. One module per job, in the order a path meets them:

* :mod:`~foundry_ext.checkpoint.reader`: :func:`load_checkpoint_safely`, the order of the checks below;
* :mod:`~foundry_ext.checkpoint.paths`: what the path is from its ``stat`` (a FIFO, socket or device is refused
  without being opened, a symlink loop named as such); a regular file opened without blocking;
* :mod:`~foundry_ext.checkpoint.sniff`: what a file is from its first bytes: ``torch.save`` writes a zip archive
  (``PK\x03\x04``) or, in the legacy format, pickles (``\x80``); anything else (text, empty, PNG, gzip, ...) is refused
  by what it looks like;
* :mod:`~foundry_ext.checkpoint.pickle_check`: the pickles ``torch.load`` will read, walked opcode by opcode and
  refused if larger than :data:`MAX_PICKLE_BYTES`, nested deeper than :data:`MAX_DEPTH` or holding a cycle;
* :mod:`~foundry_ext.checkpoint.load`: the allow-listed ``torch.load`` (:data:`ALLOWED_GLOBALS`);
* :mod:`~foundry_ext.checkpoint.torch_file`: those three steps for one ``torch.save`` file;
* :mod:`~foundry_ext.checkpoint.sharded`: a sharded folder's non-tensor values;
* :mod:`~foundry_ext.checkpoint.rows`: :func:`describe`, the rows (not ``describe.py``: importing a submodule sets
  the package attribute of its name, which would hide the function);
* :mod:`~foundry_ext.checkpoint.errors`: :class:`CheckpointError` and one-line texts;
* :mod:`~foundry_ext.checkpoint.limits`: the reader's bounds; :mod:`~foundry_ext.checkpoint.dcp_metadata`: the
  allow-listed unpickler of a sharded folder's ``.metadata``.

Beside the reader, for a run about to load or save, without torch or Composer at their top:

* :mod:`~foundry_ext.checkpoint.layout`: what a checkpoint path is (a file, a sharded folder) and whether a sharded
  folder is complete (the pre-flight check and ``checkpoint_guard`` ask it);
* :mod:`~foundry_ext.checkpoint.owner`: a save folder's one owner, its lock and heartbeat record (taken by
  ``checkpoint_guard``, looked at by ``foundry-ext anneal``).

Three layouts are understood:

* a monolithic file (``ep0-ba10-rank0.pt``: DDP, or FSDP with ``state_dict_type: full``);
* a sharded folder (FSDP with ``state_dict_type: sharded``): ``.metadata`` plus ``__<rank>_0.distcp`` files written by
  ``torch.distributed.checkpoint``. The non-tensor values (timestamp, schedulers, callbacks, param-group LRs, ...) are
  read from their byte ranges without a process group; tensors (model and optimizer shards) are not loaded;
* a symlink to either (``latest-rank0.pt``, ``latest-sharded-rank0``), resolved first.

Compressed (``.pt.lz4``, ...) and tar checkpoints are not read: decompress or extract them first.

The names are imported on first use (PEP 562), and only :mod:`~foundry_ext.checkpoint.load` and
:mod:`~foundry_ext.checkpoint.rows` import torch and numpy at their top (:mod:`~foundry_ext.checkpoint.sharded`
and the legacy-format check in :mod:`~foundry_ext.checkpoint.pickle_check` where they need a torch name): a path
refused before its bytes could be a torch file (text, empty, an image, a FIFO, a symlink loop, a missing path, a
folder without ``.metadata``) is answered without importing torch
(``test_inspect_of_a_non_checkpoint_imports_no_torch``). ``describe`` itself imports torch: import it once the load
has succeeded, as ``foundry-ext inspect`` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from foundry_ext._lazy import lazy_exports

# public name -> the module that defines it
_EXPORTS = {
    "ALLOWED_GLOBALS": "foundry_ext.checkpoint.load",
    "MAX_DEPTH": "foundry_ext.checkpoint.pickle_check",
    "MAX_PICKLE_BYTES": "foundry_ext.checkpoint.pickle_check",
    "SHARDED_KEY": "foundry_ext.checkpoint.sharded",
    "CheckpointError": "foundry_ext.checkpoint.errors",
    "describe": "foundry_ext.checkpoint.rows",
    "load_checkpoint_safely": "foundry_ext.checkpoint.reader",
}

__all__ = [
    "ALLOWED_GLOBALS",
    "MAX_DEPTH",
    "MAX_PICKLE_BYTES",
    "SHARDED_KEY",
    "CheckpointError",
    "describe",
    "load_checkpoint_safely",
]

if TYPE_CHECKING:
    from foundry_ext.checkpoint.errors import CheckpointError
    from foundry_ext.checkpoint.load import ALLOWED_GLOBALS
    from foundry_ext.checkpoint.pickle_check import MAX_DEPTH, MAX_PICKLE_BYTES
    from foundry_ext.checkpoint.reader import load_checkpoint_safely
    from foundry_ext.checkpoint.rows import describe
    from foundry_ext.checkpoint.sharded import SHARDED_KEY

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
