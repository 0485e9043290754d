"""Which checkpoints an average reads: named one by one, or chosen from a save folder (standard library only).

A ``CKPT`` is a ``.pt`` file (``ep0-ba12-rank0.pt``; a ``latest-rank0.pt`` link is resolved), a sharded checkpoint
folder (``ep0-ba12/`` with ``.metadata``) or a save folder, whose checkpoints are listed by Composer's names
(``ep{E}-ba{B}-rank0.pt``, ``ep{E}-ba{B}/``) and chosen with :class:`~foundry_ext.average.options.Selection`
(``--last``, ``--every``, ``--batches``). Links are resolved here, once: the average reads the checkpoints the names
point at now, not a link a live run moves.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from foundry_ext.average.options import AverageError, Selection
from foundry_ext.text import one_line

__all__ = ["QUARANTINE", "Input", "select_inputs"]

#: The folder ``checkpoint_guard`` moves incomplete checkpoints into (its default ``quarantine_folder``).
QUARANTINE = "quarantine"

_FILE = re.compile(r"^ep(\d+)-ba(\d+)-rank0\.pt$")
_FOLDER = re.compile(r"^ep(\d+)-ba(\d+)$")


@dataclass(frozen=True)
class Input:
    """One checkpoint to average.

    Attributes:
        path: the checkpoint file or sharded folder, links resolved.
        shown: how it is named in messages (as the user gave it, or the save folder's entry).
        sharded: a sharded (``torch.distributed.checkpoint``) folder rather than a ``.pt`` file.
        save_folder: the folder the run saved it in (``--out`` must not be inside it).
    """

    path: Path
    shown: str
    sharded: bool
    save_folder: Path


def _resolve(path: Path, shown: str) -> Path:
    """``path`` with its links resolved; a link loop is refused in one line (pathlib raises ``RuntimeError``)."""
    try:
        return path.resolve()
    except (RuntimeError, OSError):
        raise AverageError(f"CKPT {shown}: a symbolic link loop; expected a checkpoint file or folder") from None


def _checked(given: str, path: Path) -> Input:
    """One named checkpoint: a ``.pt`` file or a complete sharded folder, refused if missing, partial or quarantined."""
    shown = one_line(given)
    resolved = _resolve(path, shown)
    if QUARANTINE in path.absolute().parts or QUARANTINE in resolved.parts:
        raise AverageError(
            f"CKPT {shown}: a quarantined checkpoint (checkpoint_guard moved it there as incomplete); not averaged"
        )
    if resolved.is_dir():
        if not (resolved / ".metadata").is_file():
            raise AverageError(
                f"CKPT {shown}: a sharded checkpoint folder without .metadata (partial: being written, or its "
                "write was interrupted); not averaged"
            )
        return Input(resolved, shown, True, resolved.parent)
    if not resolved.exists():
        raise AverageError(f"CKPT {shown}: no such file or folder")
    return Input(resolved, shown, False, resolved.parent)


def _listed(folder: Path, shown: str, selection: Selection) -> list[Input]:
    """The checkpoints of the save folder ``folder`` that ``selection`` picks, oldest first."""
    found: dict[int, Path] = {}
    for entry in sorted(folder.iterdir()):
        match = _FILE.match(entry.name) if not entry.is_dir() else _FOLDER.match(entry.name)
        if match is None or entry.is_symlink():  # latest-rank0.pt, latest-sharded-rank0: the same checkpoints again
            continue
        batch = int(match.group(2))
        if batch in found:
            raise AverageError(f"CKPT {shown}: two checkpoints of batch {batch} ({found[batch].name}, {entry.name})")
        found[batch] = entry
    if not found:
        raise AverageError(
            f"CKPT {shown}: a folder with no checkpoint named ep{{E}}-ba{{B}}-rank0.pt or ep{{E}}-ba{{B}}/ and no "
            ".metadata; expected checkpoints or a run's save folder"
        )
    chosen = selection.apply(list(found))
    return [_checked(f"{shown.rstrip('/')}/{found[b].name}", found[b]) for b in chosen]


def select_inputs(given: list[str], selection: Selection) -> list[Input]:
    """The checkpoints ``given`` names, oldest first when taken from a save folder, in the given order otherwise.

    Raises:
        AverageError: a missing, partial or quarantined checkpoint; a save folder among other inputs; a selection
            without a save folder; fewer than two checkpoints; one checkpoint twice; ``.pt`` files mixed with
            sharded folders.
    """
    inputs: list[Input] = []
    for text in given:
        path = Path(text)
        if not os.path.lexists(path):
            raise AverageError(f"CKPT {one_line(text)}: no such file or folder")
        resolved = _resolve(path, one_line(text))
        if resolved.is_dir() and not (resolved / ".metadata").exists() and not _FOLDER.match(path.name):
            if len(given) > 1:
                raise AverageError(
                    f"CKPT {one_line(text)}: a save folder among other checkpoints; pass either one save folder "
                    "(with --last, --every, --batches) or the checkpoints themselves"
                )
            inputs = _listed(resolved, one_line(text), selection)
            break
        inputs.append(_checked(text, path))
    else:
        if selection.given:
            raise AverageError(
                "--last, --every and --batches choose among a save folder's checkpoints: pass one save folder"
            )
    if len(inputs) < 2:
        what = f"{len(inputs)} checkpoint" + ("" if len(inputs) == 1 else "s")
        named = " ".join(one_line(g) for g in given)
        raise AverageError(f"CKPT {named}: {what} selected; an average needs two or more")
    seen: dict[Path, str] = {}
    for item in inputs:
        if item.path in seen:
            raise AverageError(f"CKPT {item.shown}: the same checkpoint as {seen[item.path]}; name each one once")
        seen[item.path] = item.shown
    if len({item.sharded for item in inputs}) > 1:
        full = next(i for i in inputs if not i.sharded)
        sharded = next(i for i in inputs if i.sharded)
        raise AverageError(
            f"CKPT {full.shown} is a .pt file and {sharded.shown} a sharded folder: average checkpoints of one layout"
        )
    return inputs
