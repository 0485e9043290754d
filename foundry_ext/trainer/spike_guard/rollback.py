"""The continuation of a run the guard stopped: which checkpoint, which folder, which data to skip (no Composer).

PaLM's recipe: restart from a checkpoint before the spike and skip the data batches around it. Composer refuses to
resume into a folder holding checkpoints later than the resumed batch, so the continuation gets its own
``save_folder`` and ``run_name``; it starts from ``load_path`` and, with ``autoresume``, restarts from its own
checkpoints after a kill. Nothing of the stopped run is moved or rewritten.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from foundry_ext._command import composer_command, shown_path
from foundry_ext.text import one_line

__all__ = ["Continuation", "checkpoint_before", "continuation", "skipped_samples"]

_BATCH = re.compile(r"ba(\d+)")


@dataclass(frozen=True)
class Continuation:
    """What the continuation does: load ``load_path`` (at batch ``at_batch``), skip ``skip`` data batches there."""

    load_path: str
    at_batch: int
    skip: int
    save_folder: str
    run_name: str

    def overrides(self) -> dict[str, object]:
        """The keys that change in the train YAML."""
        return {
            "load_path": self.load_path,
            "save_folder": self.save_folder,
            "run_name": self.run_name,
            "autoresume": True,
            "callbacks": {"spike_guard": {"skip_data": {"at_batch": self.at_batch, "batches": self.skip}}},
        }

    def command(self) -> str:
        """The command that runs the continuation, to paste into the shell the run was launched from.

        The train YAML is not known here (``YOUR.yaml``, with the run's own overrides); the ``composer`` is the one
        beside this Python unless that is the one on ``PATH``, paths inside the working folder are shown relative to
        it, and every word is quoted for the shell.
        """
        args = [
            f"load_path={shown_path(self.load_path)}",
            f"save_folder={shown_path(self.save_folder)}",
            f"run_name={self.run_name}",
            "autoresume=true",
            f"callbacks.spike_guard.skip_data.at_batch={self.at_batch}",
            f"callbacks.spike_guard.skip_data.batches={self.skip}",
        ]
        return composer_command("train.py", "YOUR.yaml", *args)

    def write(self, path: Path, why: str) -> None:
        text = yaml.safe_dump(self.overrides(), sort_keys=False)
        # the comment repeats the run's name and folders: escaped, a line break in one would start a line of YAML keys
        header = (
            f"# spike_guard rollback: {one_line(why)}\n"
            "# merge into the run's train YAML, or pass as arguments:\n"
            f"#   {one_line(self.command())}\n"
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(header + text)


def checkpoint_before(checkpoints: dict[str, int], first_skip: int) -> tuple[str, int] | None:
    """The newest checkpoint (path -> its batch) written before batch ``first_skip`` (0-indexed) was trained on.

    Only a checkpoint that exists: Composer's ``all_saved_checkpoints_to_timestamp`` keeps naming the ones its
    rotation (``save_num_checkpoints_to_keep``) deleted.
    """
    older = [(batch, path) for path, batch in checkpoints.items() if batch <= first_skip and os.path.exists(path)]
    if not older:
        return None
    batch, path = max(older)
    return path, batch


def folder_checkpoints(folder: Path) -> dict[str, int]:
    """The checkpoints in ``folder`` -> batch, rank 0's files and sharded checkpoints' folders.

    Rank 0's files: Composer's default ``ep{epoch}-ba{batch}-rank{rank}.pt``. A sharded checkpoint (FSDP
    ``state_dict_type: sharded``) is a folder ``ep{epoch}-ba{batch}`` holding every rank's ``.distcp`` file and the
    ``.metadata``; ``load_path`` names the folder.
    """
    found: dict[str, int] = {}
    if not folder.is_dir():
        return found
    for path in folder.iterdir():
        match = _BATCH.search(path.name)
        if not match or path.is_symlink():
            continue
        if "rank0" in path.name or (path.is_dir() and (path / ".metadata").is_file()):
            found[str(path.resolve())] = int(match.group(1))
    return found


def continuation(
    checkpoints: dict[str, int],
    first_skip: int,
    last_batch: int,
    skip_batches: int,
    save_folder: str,
    run_name: str,
    new_folder: str | None,
) -> Continuation | None:
    """The continuation, or ``None`` when no checkpoint precedes the first skip.

    The data batches skipped are those the stopped run read since the checkpoint (``at_batch .. last_batch``)
    and ``skip_batches`` more.
    """
    found = checkpoint_before(checkpoints, first_skip)
    if found is None:
        return None
    path, at_batch = found
    suffix = f"-rollback-ba{at_batch}"
    return Continuation(
        load_path=path,
        at_batch=at_batch,
        skip=last_batch + 1 - at_batch + skip_batches,
        save_folder=new_folder or save_folder.rstrip("/") + suffix,
        run_name=run_name + suffix,
    )


def skipped_samples(batches: int, sample: int, size_at: Callable[[int], int]) -> int:
    r"""The samples in ``batches`` data batches read from ``sample`` samples trained on, each of ``size_at`` samples.

    .. math::
        S = \sum_{i=0}^{n-1} B(s_i), \quad s_0 = \text{sample}, \quad s_{i+1} = s_i + B(s_i)

    ``size_at(s)`` is the global batch of a batch that starts after ``s`` samples: a constant without a batch-size
    ramp, the ramp's stage size with one (:meth:`~foundry_ext.schedules.batch_size.BatchPlan.size_at`). From the
    checkpoint the continuation loads, these are exactly the samples the stopped run read in its batches ``at_batch
    ..`` (its batches followed the same ramp from the same sample count), so a burst across a stage change is
    skipped whole: 2 batches of 4 then 1 of 8 are 16 samples, not 3 x 4.
    """
    start = sample
    for _ in range(batches):
        sample += size_at(sample)
    return sample - start
