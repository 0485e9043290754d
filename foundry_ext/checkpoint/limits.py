"""How much ``inspect`` reads, decided before reading: the sizes a file declares against its real size, and caps.

A hostile file can declare sizes that have nothing to do with its bytes: a 250 KB zip whose ``data.pkl`` inflates to
240 MB, a ``data.pkl`` declared as 64 bytes that inflates to 1 GiB, a sharded ``.metadata`` that gives a value a
byte range of 8 GiB in a sparse shard. Each is refused here, from the zip's directory or the metadata, before any of
the data is read, so that every input is answered within seconds and a few hundred MB:

* a zip's end record: at most :data:`MAX_ZIP_ENTRIES` entries and a central directory of at most
  :data:`MAX_CENTRAL_DIRECTORY_BYTES` (Python's ``zipfile`` reads the whole directory into memory);
* every entry stored (as ``torch.save`` writes them) or deflated, its compressed sizes adding up to no more than the
  file's real size, a stored entry as large as its compressed size, a deflated one at most :data:`MAX_INFLATION`
  times its compressed size;
* a legacy-format (not zip) torch file at most :data:`MAX_LEGACY_BYTES`: torch reads every storage of that format into
  memory (it can map only a zip's), so a sparse file declaring GBs of storage would be read in full;
* a value of a sharded checkpoint at most :data:`MAX_VALUE_BYTES`, all of them together at most
  :data:`MAX_VALUES_TOTAL_BYTES`.

The pickle itself is then read as a stream (never as a whole in memory) and walked with its own caps, in
:mod:`~foundry_ext.checkpoint.pickle_check`.
"""

from __future__ import annotations

import zipfile
from typing import IO

from foundry_ext.checkpoint.errors import CheckpointError
from foundry_ext.text import one_line

__all__ = [
    "MAX_CENTRAL_DIRECTORY_BYTES",
    "MAX_INFLATION",
    "MAX_LEGACY_BYTES",
    "MAX_VALUES_TOTAL_BYTES",
    "MAX_VALUE_BYTES",
    "MAX_ZIP_ENTRIES",
    "check_value_sizes",
    "check_zip_directory",
    "check_zip_entries",
    "file_size",
]

MAX_ZIP_ENTRIES = 200_000
"""Most entries a checkpoint zip may have: ``torch.save`` writes one per tensor storage plus about 5 (the tiny
llm-foundry run: ~120)."""

MAX_CENTRAL_DIRECTORY_BYTES = 32 * 2**20
"""Largest central directory read (32 MiB): about 80 bytes per entry, so far above :data:`MAX_ZIP_ENTRIES`."""

MAX_INFLATION = 64
"""Largest ratio of a deflated entry's size to its compressed size (``torch.save`` stores entries uncompressed;
deflate reaches about 10x on real pickles and 1000x only on crafted or all-zero data)."""

MAX_LEGACY_BYTES = 256 * 2**20
"""Largest legacy-format (``_use_new_zipfile_serialization=False``, torch < 1.6) file loaded (256 MiB): it is read into
memory whole. Composer and torch >= 1.6 write the zip format, whose storages are mapped, not read."""

MAX_VALUE_BYTES = 64 * 2**20
"""Largest non-tensor value read from a sharded checkpoint's shard (64 MiB; Composer's are a few KB: the timestamp,
RNG states, scheduler and callback states)."""

MAX_VALUES_TOTAL_BYTES = 256 * 2**20
"""Largest total of the non-tensor values read from a sharded checkpoint (256 MiB)."""

_DEFLATE_SLACK = 64 * 2**10  # a tiny entry may inflate more than 64x (an empty pickle's header): allowed up to 64 KiB


def file_size(f: IO[bytes]) -> int:
    """The size of a seekable file object (a real file or a ``BytesIO``); its position is kept."""
    here = f.tell()
    size = f.seek(0, 2)
    f.seek(here)
    return size


def check_zip_directory(f: IO[bytes], origin: str) -> None:
    """Refuse a zip whose end record declares more entries or a larger directory than a checkpoint has.

    Called before ``zipfile.ZipFile`` reads the central directory into memory (one ``ZipInfo`` per entry).
    """
    # zipfile's own reader of the end record (private but unchanged since Python 2.7): the same numbers ZipFile uses
    end = zipfile._EndRecData(f)  # type: ignore[attr-defined]
    f.seek(0)
    if end is None:
        return  # not a zip end record: ZipFile refuses it with its own message
    entries, directory = end[zipfile._ECD_ENTRIES_TOTAL], end[zipfile._ECD_SIZE]  # type: ignore[attr-defined]
    if entries > MAX_ZIP_ENTRIES or directory > MAX_CENTRAL_DIRECTORY_BYTES:
        raise CheckpointError(
            f"{origin} is not a checkpoint: its zip directory declares {entries} entries in {directory} bytes "
            f"(the limit: {MAX_ZIP_ENTRIES} entries, {MAX_CENTRAL_DIRECTORY_BYTES // 2**20} MiB), refused before "
            "reading it"
        )


def check_zip_entries(archive: zipfile.ZipFile, size: int, origin: str) -> None:
    """Refuse entries whose declared sizes cannot be the bytes of this file of ``size`` bytes, before reading any.

    Raises:
        CheckpointError: An entry compressed otherwise than stored or deflated; a stored entry whose two sizes differ;
            a deflated one inflating more than :data:`MAX_INFLATION` times; compressed sizes adding up to more than
            the file.
    """
    total = 0
    for info in archive.infolist():
        name = one_line(info.filename[:200])
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise CheckpointError(
                f"{origin} is not a checkpoint: its entry {name} is compressed with method {info.compress_type}, "
                "which torch.save never writes and torch.load cannot read"
            )
        if info.compress_type == zipfile.ZIP_STORED and info.file_size != info.compress_size:
            raise CheckpointError(
                f"{origin} is not a checkpoint: its entry {name} is stored uncompressed but declares "
                f"{info.file_size} bytes in {info.compress_size}"
            )
        if info.file_size > MAX_INFLATION * info.compress_size + _DEFLATE_SLACK:
            raise CheckpointError(
                f"{origin} is not a checkpoint: its entry {name} declares {info.file_size} bytes inflated from "
                f"{info.compress_size} (more than {MAX_INFLATION}x, a zip bomb), refused before inflating it"
            )
        total += info.compress_size
    if total > size:
        raise CheckpointError(
            f"{origin} is not a readable torch checkpoint: its entries declare {total} bytes but the file has {size}"
        )


def check_value_sizes(lengths: dict[str, int], shown: str) -> None:
    """Refuse a sharded checkpoint whose non-tensor values (name -> declared length) are too large to read."""
    for name, length in lengths.items():
        if length > MAX_VALUE_BYTES:
            raise CheckpointError(
                f"{shown}/.metadata gives the non-tensor value {one_line(name[:200])} {length} bytes (the limit: "
                f"{MAX_VALUE_BYTES // 2**20} MiB; Composer's are a few KB), refused before reading it"
            )
    total = sum(lengths.values())
    if total > MAX_VALUES_TOTAL_BYTES:
        raise CheckpointError(
            f"{shown}/.metadata gives its non-tensor values {total} bytes in all (the limit: "
            f"{MAX_VALUES_TOTAL_BYTES // 2**20} MiB), refused before reading them"
        )
