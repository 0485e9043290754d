"""Is a checkpoint complete? Exact checks that read a few KB instead of loading the checkpoint.

Monolithic file (``torch.save``, a zip archive). torch's writer appends the records one after the other, then the
central directory and the end-of-central-directory record (EOCD, with no comment), and only then closes the file.
A write cut short at any byte therefore lacks an EOCD at its very end. :func:`file_problem` requires:

1. the EOCD signature exactly 22 bytes before the end, with a zero-length comment (torch writes none);
2. a central directory that :mod:`zipfile` parses at the place the EOCD (or its zip64 record) names;
3. every record's data lying before the central directory, and a ``data.pkl`` record whose CRC32 matches
   (a few KB to a few hundred KB: the pickled structure, not the tensors).

``full=True`` also reads every record and checks its CRC32 (:meth:`zipfile.ZipFile.testzip`): the whole file. That
catches what a kill cannot cause but a power loss can: a file of the right size whose pages never reached the disk
(Composer does not ``fsync`` monolithic checkpoints).

Sharded folder (``torch.distributed.checkpoint`` with ``FileSystemWriter``). Each rank writes its
``__<rank>_0.distcp`` files; once every rank has reported, the coordinator pickles the ``.metadata`` to
``.metadata.tmp``, fsyncs it and renames it to ``.metadata``. :func:`sharded_problem` requires a ``.metadata`` that
unpickles (with an allow-list of the dataclasses that module writes, nothing else) and every shard file it names (a
plain file name in the folder) to be at least ``offset + length`` bytes long for each of its items: the check of
:func:`foundry_ext.checkpoint.layout.sharded_gap`, which the pre-flight check words for ``load_path``. The shards
are fsynced before they are reported (``sync_files=True``, the default), so sizes are exact here.
"""

from __future__ import annotations

import os
import struct
import zipfile
from pathlib import Path

from foundry_ext.checkpoint.layout import sharded_gap
from foundry_ext.text import one_line

__all__ = ["file_problem", "problem", "sharded_problem"]

_EOCD = struct.Struct("<4s4H2LH")  # signature, disk numbers, entry counts, cd size, cd offset, comment length
_EOCD_SIGNATURE = b"PK\x05\x06"
_LOCAL_HEADER_SIZE = 30


def problem(path: str | os.PathLike[str], *, full: bool = False) -> str | None:
    """``None`` when the checkpoint at ``path`` (a file or a sharded folder) is complete, else why it is not."""
    path = Path(path)
    if path.is_dir():
        return sharded_problem(path)
    return file_problem(path, full=full)


def file_problem(path: str | os.PathLike[str], *, full: bool = False) -> str | None:
    """``None`` when the ``torch.save`` file at ``path`` was written to its end, else the reason (one phrase)."""
    try:
        size = os.path.getsize(path)
        if size < _EOCD.size:
            return f"{size} bytes: a torch checkpoint is at least {_EOCD.size}"
        with open(path, "rb") as f:
            f.seek(size - _EOCD.size)
            signature, *_, comment_length = _EOCD.unpack(f.read(_EOCD.size))
            if signature != _EOCD_SIGNATURE or comment_length != 0:
                return f"{size} bytes and no end-of-archive record at its end: the write was cut short"
            with zipfile.ZipFile(f) as archive:
                return _records_problem(archive, full=full)
    except (OSError, zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, struct.error, ValueError) as e:
        return f"not a readable torch zip file ({type(e).__name__}: {e})"


def _records_problem(archive: zipfile.ZipFile, *, full: bool) -> str | None:
    infos = archive.infolist()
    pickles = [i for i in infos if i.filename.endswith("/data.pkl") or i.filename == "data.pkl"]
    if not pickles:
        return "a zip file without data.pkl: not written by torch.save"
    # zipfile's start_dir: where the central directory begins once any prefix is accounted for
    central_directory = archive.start_dir  # type: ignore[attr-defined]
    for info in infos:
        end = info.header_offset + _LOCAL_HEADER_SIZE + len(info.filename.encode()) + info.compress_size
        if end > central_directory:
            return f"record {info.filename} runs into the central directory: the file is inconsistent"
    if full:
        bad = archive.testzip()
        return None if bad is None else f"record {bad} fails its CRC32 check"
    try:
        archive.read(pickles[0])  # zipfile checks the CRC32 at the end of the read
    except zipfile.BadZipFile:
        return f"record {pickles[0].filename} fails its CRC32 check"
    return None


def sharded_problem(folder: str | os.PathLike[str]) -> str | None:
    """``None`` when the sharded checkpoint ``folder`` is complete, else the reason (one phrase).

    The check is :func:`foundry_ext.checkpoint.layout.sharded_gap`'s (the pre-flight check's too); this is the
    guard's wording of it.
    """
    gap = sharded_gap(folder)
    if gap is None:
        return None
    if gap.kind == "no-metadata":
        tmp = " (.metadata.tmp exists: the coordinator was writing it)" if gap.tmp else ""
        return f"no .metadata{tmp}: not every rank had finished its shard"
    if gap.kind == "bad-metadata":
        return f".metadata does not unpickle ({gap.error})"
    if gap.kind == "outside":
        return f".metadata names a shard outside the folder: {gap.shard}"
    if gap.kind == "missing":
        return f"shard {one_line(gap.shard)} is missing"
    return f"shard {one_line(gap.shard)} has {gap.size} of at least {gap.length} bytes: its write was cut short"
