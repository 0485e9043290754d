"""What a checkpoint path holds for a run about to load it: a file, a sharded folder, and whether the folder is whole.

Composer loads a monolithic file (DDP, FSDP ``state_dict_type: full``, any run of one rank) with ``torch.load`` and a
sharded folder (FSDP ``state_dict_type: sharded``) with ``torch.distributed.checkpoint``: each rank reads the items of
its shard from the ``__<rank>_0.distcp`` files that ``.metadata`` names. The wrong kind, or a folder without
``.metadata`` or without one of the files it names, fails only once the model is built, as a traceback
(``IsADirectoryError``, ``ValueError: load_path must be a directory when using sharded state dict``, a
``CheckpointException`` gathered from every rank). The pre-flight check (:mod:`foundry_ext.catalog.fsdp`) asks here
first; ``checkpoint_guard`` (:mod:`foundry_ext.trainer.checkpoint_guard.integrity`) asks :func:`sharded_gap` whether
a sharded checkpoint it may resume from is complete.

Only ``stat`` and ``.metadata`` are read, never a shard's bytes: ``.metadata`` is unpickled with
:class:`~foundry_ext.checkpoint.dcp_metadata.MetadataUnpickler` (``torch.distributed.checkpoint``'s dataclasses and
nothing else; unpickling them imports torch).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from foundry_ext.checkpoint.dcp_metadata import MetadataUnpickler
from foundry_ext.checkpoint.errors import first_line
from foundry_ext.text import one_line

__all__ = ["ShardedGap", "local_kind", "sharded_folder_problem", "sharded_gap"]

_SHARD = re.compile(r"__(\d+)_\d+\.distcp")  # FileSystemWriter's name: __<rank>_<file index>.distcp


def local_kind(path: str) -> Literal["file", "folder"] | None:
    """``"file"`` or ``"folder"`` for a local path that exists (symlinks followed); ``None`` for anything else.

    A URI (``s3://...``), a missing path or a dangling symlink is ``None``: Composer downloads, or names, those itself.
    """
    if "://" in path:
        return None
    try:
        if os.path.isdir(path):
            return "folder"
        return "file" if os.path.isfile(path) else None
    except (OSError, ValueError):  # an embedded NUL byte, a name too long: Composer's to report
        return None


@dataclass(frozen=True)
class ShardedGap:
    """Why a sharded folder is not a complete checkpoint: what :func:`sharded_gap` found, for each caller to word.

    Args:
        kind (str): ``"no-metadata"``, ``"bad-metadata"`` (it does not unpickle as torch.distributed.checkpoint's
            metadata), ``"outside"`` (it names a shard that is not a plain file name in the folder), ``"missing"`` or
            ``"short"`` (a shard it names).
        shard (str): The shard's name as ``.metadata`` gives it (``outside``: its repr, escaped).
        size (int): A short shard's size in bytes.
        length (int): The size ``.metadata`` needs of it: the largest ``offset + length`` of its items.
        error (str): The unpickler's error, one line (``bad-metadata``).
        held (tuple[str, ...]): The ``.distcp`` files present (``no-metadata``).
        tmp (bool): ``.metadata.tmp`` exists (``no-metadata``: the coordinator was writing it).
    """

    kind: Literal["no-metadata", "bad-metadata", "outside", "missing", "short"]
    shard: str = ""
    size: int = 0
    length: int = 0
    error: str = ""
    held: tuple[str, ...] = ()
    tmp: bool = False

    @property
    def whose(self) -> str:
        """`` (rank 1's shard)`` for a shard named as FileSystemWriter names them, else empty."""
        rank = _SHARD.fullmatch(self.shard)
        return f" (rank {rank.group(1)}'s shard)" if rank else ""


def sharded_gap(folder: str | os.PathLike[str]) -> ShardedGap | None:
    """``None`` when ``folder`` holds ``.metadata`` and every shard file it names, long enough; else what is wrong.

    The one completeness check of a sharded checkpoint (the pre-flight check's :func:`sharded_folder_problem` and
    ``checkpoint_guard``'s ``integrity.sharded_problem`` word its answer). ``.metadata`` is untrusted: any error while
    it is unpickled or its entries are read is a ``bad-metadata`` answer, never an exception; a shard must be a plain
    file name next to ``.metadata`` (FileSystemWriter writes no other), so a path into a subfolder, ``..``, ``.``
    or an absolute path is ``outside``; a shard that cannot be ``stat``-ed (missing, a symlink loop, no permission)
    is ``missing``.
    """
    folder = Path(folder)
    metadata_path = folder / ".metadata"
    if not metadata_path.is_file():
        return ShardedGap(
            "no-metadata",
            held=tuple(sorted(p.name for p in folder.glob("*.distcp"))),
            tmp=(folder / ".metadata.tmp").exists(),
        )
    needed: dict[str, int] = {}
    try:
        with open(metadata_path, "rb") as f:
            metadata = MetadataUnpickler(f).load()
        for info in metadata.storage_data.values():
            name = info.relative_path
            if not isinstance(name, str) or name != os.path.basename(name) or name in ("", ".", ".."):
                return ShardedGap("outside", shard=one_line(repr(name)))
            needed[name] = max(needed.get(name, 0), int(info.offset) + int(info.length))
    except Exception as e:  # an untrusted file: whatever it makes the unpickler or the reading raise, it is unreadable
        return ShardedGap("bad-metadata", error=first_line(e))
    for name, length in sorted(needed.items()):
        try:
            size = (folder / name).stat().st_size
        except OSError:
            return ShardedGap("missing", shard=name)
        if size < length:
            return ShardedGap("short", shard=name, size=size, length=length)
    return None


def sharded_folder_problem(folder: str | os.PathLike[str]) -> str | None:
    """:func:`sharded_gap` as a phrase that completes ``"<folder> ..."`` (the pre-flight check's wording).

    ``"has no .metadata ..."``, ``"lacks __1_0.distcp (rank 1's shard) ..."``.
    """
    gap = sharded_gap(folder)
    if gap is None:
        return None
    if gap.kind == "no-metadata":
        held = f" (it holds {', '.join(gap.held)})" if gap.held else " (and no .distcp shard)"
        return (
            f"has no .metadata{held}: torch.distributed.checkpoint writes .metadata last, once every rank's shard is "
            "written, so this save did not finish, or the folder is not a checkpoint"
        )
    if gap.kind == "bad-metadata":
        return f"has a .metadata that does not read as torch.distributed.checkpoint metadata: {gap.error}"
    if gap.kind == "outside":
        return f"has a .metadata that names a shard outside the folder: {gap.shard}"
    if gap.kind == "missing":
        return f"lacks {one_line(gap.shard)}{gap.whose}, which its .metadata names: the checkpoint is incomplete"
    return (
        f"has {one_line(gap.shard)}{gap.whose} cut short ({gap.size} of at least {gap.length} bytes, "
        "by its .metadata): the checkpoint is incomplete"
    )
