"""The checks of one ``torch.save`` file in order: its first bytes, then its pickles, then the allow-listed load.

Used for a checkpoint file and for each value stored in a sharded checkpoint's ``.distcp`` files. torch is imported
(through :mod:`foundry_ext.checkpoint.load`) only once the bytes can be a torch file, so that ``foundry-ext inspect``
answers a text file, an image or an empty file in a fraction of a second.
"""

from __future__ import annotations

from typing import IO, Any

from foundry_ext.checkpoint.errors import CheckpointError
from foundry_ext.checkpoint.limits import MAX_LEGACY_BYTES
from foundry_ext.checkpoint.pickle_check import check_pickles
from foundry_ext.checkpoint.sniff import sniff

__all__ = ["load_torch_file"]


def load_torch_file(f: IO[bytes], size: int, origin: str) -> Any:
    """Sniff (:func:`~foundry_ext.checkpoint.sniff.sniff`), walk the pickles, then ``torch.load`` a file object.

    Args:
        f (IO[bytes]): A regular file or the bytes of a sharded value, at its start.
        size (int): Its size in bytes.
        origin (str): How it is named in a refusal.

    Raises:
        CheckpointError: Not a torch file, or refused by the pickle walk or the allow-listed load.
    """
    fmt = sniff(f, size, origin)
    check_pickles(f, fmt, origin)  # bounded: a file that is no torch file is named as such, whatever its size
    if fmt == "legacy" and size > MAX_LEGACY_BYTES:
        raise CheckpointError(
            f"{origin} is a legacy-format (not zip) torch file of {size} bytes: torch reads every storage of that "
            f"format into memory, and more than {MAX_LEGACY_BYTES // 2**20} MiB is refused; re-save it with "
            "torch.save (the zip format, torch >= 1.6)"
        )
    f.seek(0)
    from foundry_ext.checkpoint.load import torch_load  # imports torch: the bytes have passed every check before it

    return torch_load(f, origin)
