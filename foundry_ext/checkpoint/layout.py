"""What a checkpoint path holds for a run about to load it: a file, a sharded folder, and whether the folder is whole.

Composer loads a monolithic file (DDP, FSDP ``state_dict_type: full``, any run of one rank) with ``torch.load`` and a
sharded folder (FSDP ``state_dict_type: sharded``) with ``torch.distributed.checkpoint``: each rank reads the items of
its shard from the ``__<rank>_0.distcp`` files that ``.metadata`` names. The wrong kind, or a folder without
``.metadata`` or without one of the files it names, fails only once the model is built, as a traceback
(``IsADirectoryError``, ``ValueError: load_path must be a directory when using sharded state dict``, a
``CheckpointException`` gathered from every rank). The pre-flight check (:mod:`foundry_ext.catalog.fsdp`) asks here
first.

Only ``stat`` and ``.metadata`` are read, never a shard's bytes: ``.metadata`` is unpickled with
:class:`~foundry_ext.checkpoint.dcp_metadata.MetadataUnpickler` (``torch.distributed.checkpoint``'s dataclasses and
nothing else; unpickling them imports torch).
"""

from __future__ import annotations

import os
import pickle
import re
from pathlib import Path
from typing import Literal

from foundry_ext.checkpoint.dcp_metadata import MetadataUnpickler
from foundry_ext.checkpoint.errors import first_line, show

__all__ = ["local_kind", "sharded_folder_problem"]

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


def sharded_folder_problem(folder: str | os.PathLike[str]) -> str | None:
    """``None`` when ``folder`` holds ``.metadata`` and every shard file it names, long enough; else why not.

    The answer is a phrase that completes ``"<folder> ..."``: ``"has no .metadata ..."``, ``"lacks __1_0.distcp
    (rank 1's shard) ..."``.
    """
    folder = Path(folder)
    metadata_path = folder / ".metadata"
    if not metadata_path.is_file():
        shards = sorted(p.name for p in folder.glob("*.distcp"))
        held = f" (it holds {', '.join(shards)})" if shards else " (and no .distcp shard)"
        return (
            f"has no .metadata{held}: torch.distributed.checkpoint writes .metadata last, once every rank's shard is "
            "written, so this save did not finish, or the folder is not a checkpoint"
        )
    try:
        with open(metadata_path, "rb") as f:
            metadata = MetadataUnpickler(f).load()
        storage = metadata.storage_data
        needed: dict[str, int] = {}
        for info in storage.values():
            name = info.relative_path
            if not isinstance(name, str) or name != os.path.basename(name) or name in ("", ".", ".."):
                return f"has a .metadata that names a shard outside the folder: {show(repr(name))}"
            needed[name] = max(needed.get(name, 0), int(info.offset) + int(info.length))
    except (pickle.UnpicklingError, EOFError, OSError, ValueError, TypeError, AttributeError, ImportError) as e:
        return f"has a .metadata that does not read as torch.distributed.checkpoint metadata: {first_line(e)}"
    for name, length in sorted(needed.items()):
        rank = _SHARD.fullmatch(name)
        whose = f" (rank {rank.group(1)}'s shard)" if rank else ""
        try:
            size = (folder / name).stat().st_size
        except OSError:
            return f"lacks {show(name)}{whose}, which its .metadata names: the checkpoint is incomplete"
        if size < length:
            return (
                f"has {show(name)}{whose} cut short ({size} of at least {length} bytes, by its .metadata): the "
                "checkpoint is incomplete"
            )
    return None
