"""Keep a branch's source checkpoint alive in the branch's own folder: a hard link, else a copy, else in place."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from foundry_ext.anneal.options import AnnealError

if TYPE_CHECKING:
    from foundry_ext.anneal.branch import Branch

__all__ = ["KEPT_FOLDER", "keep_source"]

# The branch's own copy of its source checkpoint, inside its save folder. Composer's autoresume reads only the folder's
# `latest-rank{rank}.pt`, its rotation deletes only what the run itself saved, and a name without digits matches no
# checkpoint name checkpoint_guard looks for (each has a batch or an epoch): none of them sees this folder.
KEPT_FOLDER = "anneal-source"


def keep_source(branch: Branch) -> str:
    """Keep the branch's source checkpoint alive in its own folder; the line that says how.

    A hard link (the same bytes, no copy; the stable run's folder is not touched: a link adds a name elsewhere) when
    the branch's folder is on the checkpoint's filesystem. Otherwise a copy when the stable run rotates its
    checkpoints (``save_num_checkpoints_to_keep > 0``: it would delete the source), else the YAML loads the source in
    place. A kept source already there (the same command run again) is reused when it is the same file or bytes.

    Raises:
        AnnealError: the source vanished (the stable run's rotation was faster), or the folder cannot be written.
    """
    import filecmp
    import shutil

    source, kept = branch.source.path, branch.kept
    if kept is None:
        return f"source: {source} loaded in place (the branch saves to {branch.folder}, not a local folder)"
    made = [p for p in (Path(branch.folder), kept.parent) if not p.exists()]

    def same(a: Path, b: Path) -> bool:
        if a.is_dir():
            return all(same(x, b / x.name) for x in a.iterdir()) if b.is_dir() else False
        return b.is_file() and (os.path.samefile(a, b) or filecmp.cmp(a, b, shallow=False))

    try:
        if kept.exists() or kept.is_symlink():
            if same(source, kept):
                return (
                    f"source: {kept} (kept by an earlier run of this command: the same checkpoint); the YAML loads it"
                )
            raise AnnealError(
                f"save_folder={branch.folder}: {kept} exists and is not {source}: a folder of another branch; give "
                "this branch its own (save_folder=..., or leave it out)"
            )
        kept.parent.mkdir(parents=True, exist_ok=True)
        tmp = kept.with_name(f".{kept.name}.{os.getpid()}.tmp")
        try:
            if branch.source.sharded:
                shutil.copytree(source, tmp, copy_function=os.link)
            else:
                os.link(source, tmp)
            how = "a hard link of"
        except OSError as e:
            if tmp.is_dir():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                tmp.unlink(missing_ok=True)
            if isinstance(e, FileNotFoundError):
                raise
            if not branch.rotates:
                branch.config["load_path"] = str(source)
                _remove_empty(made)
                return (
                    f"source: {source} loaded in place ({branch.folder} is on another filesystem: no hard link, and "
                    "the stable run does not rotate its checkpoints); copy it first if you may delete it"
                )
            if branch.source.sharded:
                shutil.copytree(source, tmp)
            else:
                shutil.copy2(source, tmp)
            how = "a copy of"
        os.replace(tmp, kept)
    except FileNotFoundError:
        _remove_empty(made)
        raise AnnealError(
            f"CHECKPOINT {source}: deleted while the branch was written (the stable run rotates its checkpoints: "
            "save_num_checkpoints_to_keep); branch from a newer checkpoint"
        ) from None
    except OSError as e:
        _remove_empty(made)
        raise AnnealError(f"save_folder={branch.folder}: cannot keep the source there: {e.strerror or e}") from None
    why = "the stable run's rotation cannot delete it" if branch.rotates else "the stable run's folder is only read"
    return f"source: {kept}, {how} {source} ({why}); the YAML loads it"


def _remove_empty(folders: list[Path]) -> None:
    for folder in reversed(folders):  # the deepest first
        try:
            folder.rmdir()
        except OSError:
            pass
