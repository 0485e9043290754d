"""Hold a training run just before it writes one checkpoint, until the test lets it go: a race made deterministic.

Loaded by a run through its YAML's ``code_paths`` (as :mod:`tests.support.fault_hooks`), active only when the
environment asks: ``HOLD_SAVE=ba6=/path/go`` makes the run, about to write a checkpoint whose name has ``-ba6-``,
touch ``/path/go.waiting`` and wait until ``/path/go`` exists. The checkpoints, their names and Composer's save and
rotation sequence are the real ones; only the moment of one write moves.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

_HOLD = os.environ.get("HOLD_SAVE", "")

if _HOLD:
    from composer.utils import checkpoint as _checkpoint

    _tag, _, _flag = _HOLD.partition("=")
    _original_write = _checkpoint._write_checkpoint_file

    def _held_write(state_dict: dict[str, Any], filename: str) -> None:
        if f"-{_tag}-" in os.path.basename(filename):
            Path(f"{_flag}.waiting").touch()
            while not os.path.exists(_flag):
                time.sleep(0.05)
        _original_write(state_dict, filename)

    _checkpoint._write_checkpoint_file = _held_write
