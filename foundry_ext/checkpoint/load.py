"""The allow-listed ``torch.load``: no code from the file is run, and any failure is one line.

A Composer checkpoint is a pickle, and unpickling can call any function the file names (``os.system`` included).
:func:`torch_load` therefore loads with ``torch.load(weights_only=True)`` inside ``torch.serialization.safe_globals``
and an explicit allow-list (:data:`ALLOWED_GLOBALS`): the few non-tensor types that Composer 0.32 writes, found by
loading real checkpoints and reading each "Unsupported global" error. Anything else is refused with a
:class:`~foundry_ext.checkpoint.errors.CheckpointError` that names the type it would have had to trust.

This is the module that imports torch and numpy; it is imported only once a file's bytes have been checked
(:mod:`foundry_ext.checkpoint.torch_file`).
"""

from __future__ import annotations

import collections
import datetime
import os
import pickle
import re
import warnings
from typing import IO, Any

import numpy as np
import torch
from torch.torch_version import TorchVersion

from foundry_ext.checkpoint.errors import UNSUPPORTED_GLOBAL, CheckpointError, unreadable

__all__ = ["ALLOWED_GLOBALS", "torch_load"]

# Besides what torch's weights-only unpickler accepts by default (tensors, storages, OrderedDict, torch dtypes, ...).
# Each entry is a type Composer 0.32 writes in a checkpoint made by llm-foundry 0.22:
#   timedelta: the wall-clock fields of state.timestamp; TorchVersion: state.metadata.torch_version;
#   numpy arrays, dtypes and uint32: numpy's RNG state under rng/ (and any numpy value a callback stores).
ALLOWED_GLOBALS: list[Any] = [
    datetime.timedelta,
    TorchVersion,
    collections.OrderedDict,
    np.ndarray,
    np.dtype,
    np._core.multiarray._reconstruct,
    # checkpoints written under numpy 1.x name it numpy.core.multiarray._reconstruct
    (np._core.multiarray._reconstruct, "numpy.core.multiarray._reconstruct"),
    np._core.multiarray.scalar,
    (np._core.multiarray.scalar, "numpy.core.multiarray.scalar"),
    # numpy 2 pickles an array's dtype by its class (the RNG state is uint32); plain numeric dtypes only
    *(
        getattr(np.dtypes, f"{name}DType")
        for name in (
            "Bool", "Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64",
            "Float16", "Float32", "Float64",
        )
    ),
]  # fmt: skip


def _mappable_path(source: IO[bytes]) -> str | None:
    """A path naming the very file ``source`` has open, if it is a zip-format file torch can map; else None.

    ``torch.load(mmap=True)`` needs a path; ``/proc/self/fd/N`` names the open file itself, so what is loaded is what
    was checked even if the path was replaced since (Linux only; elsewhere the storages are read into memory).
    """
    try:
        fd = source.fileno()
    except (AttributeError, OSError, ValueError):  # a BytesIO (a value of a sharded checkpoint)
        return None
    path = f"/proc/self/fd/{fd}"
    if not os.path.exists(path):
        return None
    here = source.tell()
    zipped = source.read(4) == b"PK\x03\x04"  # mmap needs the zip format; a legacy file is read as before
    source.seek(here)
    return path if zipped else None


_NOT_ALLOWLISTED = re.compile(r"allowlisted via `add_safe_globals`, but got <class '([^']+)'>")


def torch_load(source: IO[bytes], origin: str) -> Any:
    """``torch.load(source, weights_only=True)`` on CPU with :data:`ALLOWED_GLOBALS`; refusals as one line.

    Args:
        source (IO[bytes]): A torch file at its start, its pickles already walked
            (:func:`~foundry_ext.checkpoint.pickle_check.check_pickles`).
        origin (str): How the file is named in the refusal.

    Raises:
        CheckpointError: It needs a type outside :data:`ALLOWED_GLOBALS`, it is a pickle ``torch.save`` did not
            write, or torch's reader fails on it (truncated, ...).
    """
    try:
        # torch warns about odd files (an unusual pickle protocol, deprecated storages): the answer is the one line
        with torch.serialization.safe_globals(ALLOWED_GLOBALS), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mapped = _mappable_path(source)
            if mapped is not None:  # tensors mapped, not read: a sparse file declaring GBs of storage costs nothing
                return torch.load(mapped, map_location="cpu", weights_only=True, mmap=True)
            return torch.load(source, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        message = str(e)
        needed = UNSUPPORTED_GLOBAL.search(message) or _NOT_ALLOWLISTED.search(message)
        if needed:
            raise CheckpointError(
                f"refusing to load {origin}: it needs {needed.group(1)}, which is not on the allow-list of types "
                "Composer checkpoints use (trusting it could run code from the file)"
            ) from None
        raise unreadable(origin, message) from None
    except RuntimeError as e:
        if "Invalid magic number" in str(e):
            raise CheckpointError(
                f"{origin} is not a checkpoint: it is a pickle that torch.save did not write"
            ) from None
        raise unreadable(origin, e) from None
    except Exception as e:  # the bytes are untrusted: any failure of torch's reader means unreadable
        raise unreadable(origin, e) from None
