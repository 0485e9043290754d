"""Find the newest complete checkpoint in a save folder, move the incomplete newer ones aside, fix ``latest``.

Pure filesystem logic (no Composer, no process group): :class:`Layout` says how the folder's checkpoints are named,
:func:`plan` decides, :func:`apply` acts. The Composer callback runs both on global rank 0 only.

The rule, walking from the newest checkpoint (by the time in its name) to the oldest:

* the first complete one is the one to resume from; ``latest`` is made to point at it (atomically: a new symlink
  under a temporary name, then ``os.replace``), unless it already does;
* every incomplete one before it (newer) is moved into the quarantine folder (``os.rename``: atomic, same
  filesystem), keeping its name (``.1``, ``.2``, ... appended if that name is taken there);
* older checkpoints are not read and never touched.

With no complete checkpoint at all, the incomplete ones are moved aside and a ``latest`` that points at nothing is
removed: the run starts from scratch, as it would have without the failed write.

Every step can itself be interrupted by a kill and redone: a rename is all-or-nothing, and the next start finds
the same newest complete checkpoint.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from foundry_ext.trainer.checkpoint_guard.integrity import problem as default_problem

__all__ = ["TIME_UNITS", "Action", "Layout", "Plan", "apply", "plan"]

# Composer's time format variables (format_name_with_dist_and_time); a checkpoint's name carries some of them.
# Every counter only grows during a run, so comparing the tuple in this order sorts checkpoints by time.
TIME_UNITS = ("epoch", "batch", "sample", "token", "batch_in_epoch", "sample_in_epoch", "token_in_epoch")
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_TMP_SUFFIX = ".checkpoint-guard-tmp"


@dataclass(frozen=True)
class Layout:
    """Where one run's checkpoints are and how they are named (all names already formatted for rank 0).

    Args:
        folder (Path): The local save folder.
        name (str): A checkpoint's path relative to ``folder``, its time variables left in:
            ``ep{epoch}-ba{batch}-rank0.pt`` (a file) or ``ep{epoch}-ba{batch}`` (a sharded folder).
        sharded (bool): Checkpoints are folders of shards (``torch.distributed.checkpoint``).
        latest (str | None): The ``latest`` symlink relative to ``folder`` (``latest-rank0.pt``), or ``None``.
        quarantine (str): The quarantine folder relative to ``folder``.
    """

    folder: Path
    name: str
    sharded: bool = False
    latest: str | None = "latest-rank0.pt"
    quarantine: str = "quarantine"

    def __post_init__(self) -> None:
        parent = self.name.rpartition("/")[0]
        if _PLACEHOLDER.search(parent):
            raise ValueError(
                f"{self.name!r}: time variables are supported in the last part of a checkpoint's name only"
            )

    def pattern(self) -> re.Pattern[str]:
        """The checkpoint names as a regex over the last path component, one named group per time unit."""
        last = self.name.rpartition("/")[2]
        parts, seen, pos = [], set(), 0
        for match in _PLACEHOLDER.finditer(last):
            parts.append(re.escape(last[pos : match.start()]))
            unit = match.group(1)
            if unit in TIME_UNITS and unit not in seen:
                parts.append(rf"(?P<{unit}>\d+)")
                seen.add(unit)
            elif unit in TIME_UNITS:
                parts.append(rf"(?P={unit})")
            else:  # {total_wct} and the like: any text, not used for ordering
                parts.append(r".+?")
            pos = match.end()
        parts.append(re.escape(last[pos:]))
        return re.compile("^" + "".join(parts) + "$")

    @property
    def parent(self) -> Path:
        """The folder that holds the checkpoints (``folder`` itself unless ``name`` has a folder part)."""
        return self.folder / self.name.rpartition("/")[0]


@dataclass(frozen=True)
class Action:
    """One change :func:`apply` makes, with the line that reports it."""

    kind: str  # "quarantine", "link", "unlink"
    source: Path | None = None
    target: Path | None = None
    message: str = ""


@dataclass
class Plan:
    """What :func:`plan` found: the checkpoint to resume from and the changes that make the folder consistent."""

    resume: Path | None
    actions: list[Action] = field(default_factory=list)
    note: str = ""  # a situation left as found, reported once


def checkpoints(layout: Layout) -> list[tuple[tuple[int, ...], Path]]:
    """The checkpoints in the folder, newest first: ``(time key, path)``."""
    pattern = layout.pattern()
    found: list[tuple[tuple[int, ...], Path]] = []
    try:
        entries = list(os.scandir(layout.parent))
    except FileNotFoundError:
        return []
    quarantine = (layout.folder / layout.quarantine).resolve()
    for entry in entries:
        match = pattern.match(entry.name)
        if match is None or entry.is_symlink():
            continue
        if layout.sharded != entry.is_dir(follow_symlinks=False) or Path(entry.path).resolve() == quarantine:
            continue
        groups = match.groupdict()
        key = tuple(int(groups[unit]) if unit in groups else -1 for unit in TIME_UNITS)
        found.append((key, Path(entry.path)))
    return sorted(found, key=lambda item: (item[0], item[1].name), reverse=True)


def plan(layout: Layout, problem: Callable[[Path], str | None] = default_problem) -> Plan:
    """Decide what to resume from and what to move aside; changes nothing.

    Args:
        layout (Layout): The folder and its naming.
        problem (Callable): ``problem(path) -> None | reason``: the completeness check
            (:func:`foundry_ext.trainer.checkpoint_guard.integrity.problem`).
    """
    result = Plan(resume=None)
    quarantine_dir = layout.folder / layout.quarantine
    taken: set[Path] = set()
    found = checkpoints(layout)
    for _, path in found:
        reason = problem(path)
        if reason is None:
            result.resume = path
            break
        destination = _free_name(quarantine_dir / path.name, taken)
        taken.add(destination)
        result.actions.append(
            Action(
                "quarantine",
                path,
                destination,
                f"checkpoint_guard: {path} is incomplete ({reason}); moved to {destination}",
            )
        )
    if layout.latest is None:
        return result
    link = layout.folder / layout.latest
    if link.exists() and not link.is_symlink():  # not Composer's: a copy, perhaps a whole checkpoint; never replaced
        result.note = f"checkpoint_guard: {link} is not a symlink; left as is"
        return result
    current = os.readlink(link) if link.is_symlink() else None
    target = (link.parent / current).resolve() if current is not None else None
    named = {path.resolve() for _, path in found}
    if target is not None and target not in named and target.exists() and problem(target) is None:
        # a complete checkpoint that save_filename does not name (renamed by hand, or another save_filename):
        # which one is newer cannot be told from the names, so the user's link stands
        result.note = f"checkpoint_guard: {link} -> {current} is not named like save_filename; left as is"
        return result
    if result.resume is not None:
        if target != result.resume.resolve():
            wanted = os.path.relpath(result.resume, link.parent)
            was = "missing" if current is None else f"-> {current}"
            result.actions.append(
                Action("link", result.resume, link, f"checkpoint_guard: {link} -> {wanted} (was {was})")
            )
    elif current is not None:
        result.actions.append(
            Action(
                "unlink",
                None,
                link,
                f"checkpoint_guard: removed {link} -> {current}: no complete checkpoint; the run starts from scratch",
            )
        )
    return result


def apply(result: Plan) -> None:
    """Make the changes of ``result`` on disk, in order (quarantine first, then the symlink)."""
    for action in result.actions:
        assert action.target is not None
        if action.kind == "quarantine":
            assert action.source is not None
            action.target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(action.source, action.target)  # same filesystem: atomic, no copy
        elif action.kind == "link":
            assert action.source is not None
            tmp = action.target.with_name(action.target.name + _TMP_SUFFIX)
            if tmp.is_symlink() or tmp.exists():
                tmp.unlink()  # left by a kill during an earlier repair
            os.symlink(os.path.relpath(action.source, action.target.parent), tmp)
            os.replace(tmp, action.target)  # the link is never missing, even for an instant
        elif action.kind == "unlink":
            action.target.unlink(missing_ok=True)


def _free_name(path: Path, taken: set[Path]) -> Path:
    candidate, n = path, 0
    while candidate in taken or candidate.exists() or candidate.is_symlink():
        n += 1
        candidate = path.with_name(f"{path.name}.{n}")
    return candidate
