"""The Composer callback: before the Trainer looks for a checkpoint, make the save folder safe to resume from."""

from __future__ import annotations

import atexit
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from composer.core import Callback, State
from composer.loggers import Logger
from composer.utils import dist

from foundry_ext._exit import exit_run
from foundry_ext.catalog.callbacks import FIELD, UNCHECKED_SUFFIXES, CheckpointGuardConfig
from foundry_ext.checkpoint.owner import FolderBusy, FolderUnwritable, Ownership
from foundry_ext.config.base import build
from foundry_ext.config.errors import ConfigError
from foundry_ext.trainer.checkpoint_guard.recovery import Layout, apply, plan

__all__ = ["CheckpointGuard"]

log = logging.getLogger(__name__)

# How long another rank waits to see rank 0's changes (a network filesystem may show a directory late).
VISIBILITY_TIMEOUT_S = 60.0


class CheckpointGuard(Callback):
    """Make every restart of ``autoresume`` find the newest complete checkpoint and nothing that blocks it.

    A kill while Composer writes a checkpoint leaves a partial file (or sharded folder), and a kill between
    Composer's removal and re-creation of the ``latest`` symlink leaves no symlink. At ``Event.BEFORE_LOAD`` (after
    ``Event.INIT``, before autoresume reads ``latest`` and before ``CheckpointSaver.fit_start`` checks the folder for
    conflicting files), global rank 0:

    1. lists the checkpoints that ``save_filename`` names in the local ``save_folder`` and walks them newest first;
    2. moves each incomplete one into ``quarantine_folder`` (one warning line each) until it meets a complete one;
    3. points ``latest`` at that one (atomically) if it does not already, or removes a ``latest`` that points at
       nothing complete.

    At ``Event.AFTER_LOAD``, a run whose checkpoint is already at ``max_duration`` (killed after its final
    checkpoint) ends with exit status 0 instead of ``Trainer.fit()``'s "No training would occur" error
    (``exit_if_finished``).

    Completed checkpoints are never moved, rewritten or deleted, and older checkpoints are not even read. The other
    ranks wait for rank 0's decision (a broadcast) and, where they see the same folder, until the changes are
    visible to them. See :mod:`foundry_ext.trainer.checkpoint_guard.integrity` for what "complete" means.

    Args:
        quarantine_folder (str): Folder for incomplete checkpoints, relative to the local ``save_folder``.
            Default = ``"quarantine"``.
        verify (str): ``structure`` (a few KB per check) or ``full`` (every byte's CRC32 of a monolithic file).
            Default = ``"structure"``.
        exit_if_finished (bool): Exit with status 0 when the run resumes at ``max_duration``. Default = ``true``.
    """

    def __init__(self, **kwargs: Any) -> None:
        self.config = build(CheckpointGuardConfig, kwargs, FIELD)
        self._owner: Ownership | None = None

    def before_load(self, state: State, logger: Logger) -> None:
        del logger  # unused
        outcome: list[Any] = [None]
        error: Exception | None = None
        if dist.get_global_rank() == 0:
            try:
                self._take_folder(state)  # before anything in the folder is read or moved
                outcome[0] = ("ok", *self._repair(state))
            except (FolderBusy, FolderUnwritable, ConfigError) as e:
                outcome[0] = ("refused", " ".join(str(e).splitlines()))
            except Exception as e:  # every rank raises instead of hanging in the broadcast; the text travels
                error, outcome[0] = e, ("error", f"{type(e).__name__}: {e}")
        if dist.get_world_size() > 1:
            dist.broadcast_object_list(outcome, src=0)
        status, *payload = outcome[0]
        if status == "refused":  # one line, the whole story, and no traceback: every rank ends with status 2
            if dist.get_global_rank() == 0:
                print(f"{FIELD}: error: {payload[0]}", file=sys.stderr, flush=True)
            self._release()
            exit_run(2)  # not a bare SystemExit: see foundry_ext._exit
        if error is not None:
            self._release()
            raise error
        if status == "error":
            raise RuntimeError(f"{FIELD}: rank 0 failed to check the save folder: {payload[0]}")
        resume, latest, moved = payload
        if dist.get_global_rank() != 0:
            _wait_until_visible(resume, latest, moved)

    def batch_end(self, state: State, logger: Logger) -> None:
        del state, logger  # unused
        if self._owner is not None and self._owner.lost is not None:
            # another run decided this one was gone (no heartbeat for stale_after): stop before writing again
            raise RuntimeError(f"{FIELD}: {self._owner.lost}; this run stops so that the folder has one writer")

    def close(self, state: State, logger: Logger) -> None:
        del state, logger  # unused
        self._release()

    def _take_folder(self, state: State) -> None:
        """Own the save folder (:mod:`foundry_ext.checkpoint.owner`), or raise the one-line refusal."""
        from composer.callbacks import CheckpointSaver
        from composer.utils import format_name_with_dist

        savers = [cb for cb in state.callbacks if isinstance(cb, CheckpointSaver)]
        if not savers:
            return
        folder = Path(format_name_with_dist(str(savers[0].folder), state.run_name))
        owner = Ownership(folder, state.run_name, self.config.stale_after, self.config.heartbeat_interval)
        takeover = owner.acquire()
        self._owner = owner
        atexit.register(self._release)  # a run ended by exit_run / SystemExit or an error frees the folder
        if takeover:
            log.warning(takeover)
        owner.start_heartbeat()

    def _release(self) -> None:
        if self._owner is not None:
            self._owner.release()
            self._owner = None

    def after_load(self, state: State, logger: Logger) -> None:
        del logger  # unused
        if not self.config.exit_if_finished or state.load_path is None or state.max_duration is None:
            return
        max_duration = state.max_duration
        elapsed = state.timestamp.get(max_duration.unit)
        if elapsed < max_duration:
            return
        # Every rank loaded the same timestamp, so every rank takes this branch: no rank is left waiting.
        where = str(state.load_path)
        if os.path.islink(where):
            where += f" -> {os.readlink(where)}"
        log.warning(
            "checkpoint_guard: %s is at %s, max_duration is %s: this run has finished training; exiting with status "
            "0 (set %s.exit_if_finished: false to let Trainer.fit() raise instead)",
            where,
            elapsed,
            max_duration,
            FIELD,
        )
        exit_run(0)  # SystemExit(0), and on a launched rank no interpreter finalisation (foundry_ext/_exit.py)

    def _repair(self, state: State) -> tuple[str | None, str | None, list[str]]:
        layout = self._layout(state)
        if layout is None:
            return None, None, []
        result = plan(layout, problem=self._problem)
        apply(result)
        for action in result.actions:
            log.warning(action.message)
        if result.note:
            log.warning(result.note)
        if result.resume is not None:
            log.info("checkpoint_guard: the newest complete checkpoint is %s", result.resume)
        latest = str(layout.folder / layout.latest) if layout.latest else None
        moved = [str(a.source) for a in result.actions if a.kind == "quarantine"]
        return (str(result.resume) if result.resume else None), latest, moved

    def _problem(self, path: Path) -> str | None:
        from foundry_ext.trainer.checkpoint_guard.integrity import problem

        return problem(path, full=self.config.verify == "full")

    def _layout(self, state: State) -> Layout | None:
        from composer.callbacks import CheckpointSaver
        from composer.utils import format_name_with_dist

        savers = [cb for cb in state.callbacks if isinstance(cb, CheckpointSaver)]
        if not savers:
            log.warning("checkpoint_guard: the run saves no checkpoints (no save_folder): nothing to guard")
            return None
        saver = savers[0]  # the one the Trainer uses for autoresume
        filename = str(saver.filename.filename)
        if filename.endswith(UNCHECKED_SUFFIXES):
            raise ConfigError(
                "save_filename",
                f"{filename!r} is compressed or a tar archive; {FIELD} checks uncompressed torch files (.pt) and "
                "sharded folders only: save uncompressed, or remove the callback",
            )
        sharded = bool(state.fsdp_sharded_state_dict_enabled)
        if sharded:
            assert state.fsdp_config is not None
            prefix = state.fsdp_config.sharded_ckpt_prefix_dir
            filename = (Path(filename).parent / str(prefix)).as_posix()
        name = format_name_with_dist(filename, state.run_name)  # rank 0's names: the ones autoresume reads
        latest = None
        if saver.latest_filename is not None and saver.num_checkpoints_to_keep != 0:
            latest = format_name_with_dist(str(saver.latest_filename.filename), state.run_name)
        folder = Path(format_name_with_dist(str(saver.folder), state.run_name))
        _check_quarantine(folder, self.config.quarantine_folder, name, latest)
        try:
            return Layout(
                folder=folder,
                name=name.removeprefix("./"),
                sharded=sharded,
                latest=latest,
                quarantine=self.config.quarantine_folder,
            )
        except ValueError as e:
            raise ConfigError("save_filename", f"{e}; {FIELD} cannot list such checkpoints") from None


def _check_quarantine(folder: Path, quarantine: str, name: str, latest: str | None) -> None:
    """The quarantine folder must be a folder (or not exist yet) and must not be named like a checkpoint."""
    where = f"{FIELD}.quarantine_folder"
    path = folder / quarantine
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise ConfigError(
            where, f"{quarantine!r} is an existing file in save_folder {folder}, not a folder; choose another name"
        )
    first = quarantine.split("/", 1)[0]
    pattern = Layout(folder=folder, name=name.rpartition("/")[2]).pattern()
    if pattern.match(first) or (latest is not None and first == latest.rpartition("/")[2]):
        raise ConfigError(
            where, f"{quarantine!r} is named like a checkpoint or the latest symlink ({name}); choose another name"
        )


def _wait_until_visible(resume: str | None, latest: str | None, moved: list[str]) -> None:
    """Wait until this rank sees rank 0's changes, where it sees rank 0's folder at all.

    On one machine, or a filesystem with close-to-open consistency, that is at once. Composer then checks the same
    folder on every rank (``latest`` must exist on all ranks, and the conflict check lists the folder on each), so
    a rank that still saw a moved file would fail there.
    """
    if resume is None or not os.path.exists(resume):
        return  # not the same folder on this node (node-local disks): nothing of rank 0's to wait for
    deadline = time.monotonic() + VISIBILITY_TIMEOUT_S
    while True:
        link_ok = latest is None or (os.path.islink(latest) and os.path.realpath(latest) == os.path.realpath(resume))
        if link_ok and not any(os.path.lexists(path) for path in moved):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"{FIELD}: after {VISIBILITY_TIMEOUT_S:g}s this rank still does not see rank 0's changes to the save "
                f"folder ({latest} -> {resume}, moved: {moved}); is the folder on a filesystem shared by all ranks?"
            )
        time.sleep(0.1)
