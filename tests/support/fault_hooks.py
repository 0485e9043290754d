"""Widen the two moments of a checkpoint save that a kill can hit, so that a test can kill inside them on purpose.

Loaded by a training run through its YAML's ``code_paths`` (as :mod:`tests.support.jsonl_logger`), and active only when
the environment asks for it:

* ``FAULT_WRITE_DELAY=S``: Composer's monolithic writer (``composer.utils.checkpoint._write_checkpoint_file``) is
  replaced by the same code, ``open(filename, "wb")`` then ``torch.save``, whose file object sleeps ``S`` seconds
  before each new 64 KiB of the file. The bytes written are torch's own, in torch's order; only the time between
  them grows, so a 1.8 MB checkpoint spends ~28 * S seconds partially written. ``FAULT_FIRST_WRITE_DELAY=S``
  (default: the same) is the sleep before the first byte: how long the file exists with 0 bytes.
* ``FAULT_SYMLINK_DELAY=S``: ``os.symlink`` sleeps ``S`` seconds before creating a link named ``latest-rank0.pt``
  or ``latest-sharded-rank0``. Composer calls it right after removing the old link, so the folder has no ``latest``
  for ``S`` seconds.
* ``FAULT_SHARD_DELAY=S``: torch.distributed.checkpoint's ``FileSystemWriter`` (a sharded checkpoint: each rank's
  ``__<rank>_0.distcp``) sleeps ``S`` seconds before writing each item of a shard file (a tensor, or a pickled
  value), and flushes the file after each, so that a shard folder spends ~(items per rank) * S seconds with partial
  ``.distcp`` files and no ``.metadata`` (the coordinator writes it once every rank's files are written).

Nothing else changes: the checkpoints, their names and Composer's save sequence are the real ones.
"""

from __future__ import annotations

import os
import time
from typing import Any

_WRITE_DELAY = float(os.environ.get("FAULT_WRITE_DELAY", "0"))
_FIRST_WRITE_DELAY = float(os.environ.get("FAULT_FIRST_WRITE_DELAY", _WRITE_DELAY))
_SYMLINK_DELAY = float(os.environ.get("FAULT_SYMLINK_DELAY", "0"))
_SHARD_DELAY = float(os.environ.get("FAULT_SHARD_DELAY", "0"))
_LATEST = ("latest-rank0.pt", "latest-sharded-rank0")
_CHUNK = 64 * 1024


class _SlowFile:
    """A binary file that sleeps before the first byte and before each new 64 KiB of the file."""

    def __init__(self, raw: Any, delay: float, first_delay: float) -> None:
        self._raw, self._delay, self._first_delay = raw, delay, first_delay
        self._written = 0

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        start = 0
        while start < len(view):
            if self._written == 0:
                time.sleep(self._first_delay)
            elif self._written % _CHUNK == 0:
                time.sleep(self._delay)
            end = min(len(view), start + _CHUNK - self._written % _CHUNK)  # up to the next 64 KiB boundary
            self._raw.write(view[start:end])
            self._raw.flush()  # to the page cache now: the test sees the file grow
            self._written += end - start
            start = end
        return len(view)

    def flush(self) -> None:
        self._raw.flush()


if _WRITE_DELAY > 0:
    import torch
    from composer.utils import checkpoint as _checkpoint

    _original_write = _checkpoint._write_checkpoint_file

    def _slow_write_checkpoint_file(state_dict: dict[str, Any], filename: str) -> None:
        if filename.endswith(".pt"):  # Composer's uncompressed branch, verbatim but for the file object
            with open(filename, "wb") as f:
                torch.save(state_dict, _SlowFile(f, _WRITE_DELAY, _FIRST_WRITE_DELAY))
        else:
            _original_write(state_dict, filename)

    _checkpoint._write_checkpoint_file = _slow_write_checkpoint_file

if _SYMLINK_DELAY > 0:
    _original_symlink = os.symlink

    def _slow_symlink(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if os.path.basename(os.fspath(dst)) in _LATEST:
            time.sleep(_SYMLINK_DELAY)
        _original_symlink(src, dst, *args, **kwargs)

    os.symlink = _slow_symlink

if _SHARD_DELAY > 0:
    from torch.distributed.checkpoint import filesystem as _dcp_filesystem

    _original_write_item = _dcp_filesystem._write_item

    def _slow_write_item(transforms: Any, stream: Any, *args: Any, **kwargs: Any) -> Any:
        time.sleep(_SHARD_DELAY)
        result = _original_write_item(transforms, stream, *args, **kwargs)
        stream.flush()  # to the page cache now: the test sees the shard grow
        return result

    _dcp_filesystem._write_item = _slow_write_item  # looked up by name in _write_files_from_queue
