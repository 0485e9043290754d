"""A save folder has one owner: the run that holds its ownership record and lock (``checkpoint_guard``).

A second launch of the same command while the first still runs (a requeued job whose old process lives on, a double
submission) used to repair the folder under the live run: it quarantined the checkpoint being written, and the live
run died finishing it. Now global rank 0 of a run takes the folder before anything in it is touched:

* ``.foundry-ext-owner.lock``: an exclusive ``fcntl.flock``, held for the whole run where the filesystem has locks
  (a killed process releases it at once; on one machine it is exact);
* ``.foundry-ext-owner.json``: host, process id, run name, start time and a heartbeat, rewritten every
  ``heartbeat_interval`` seconds by a thread while the run lives (a lock on a network filesystem may not be shared
  between machines; the heartbeat is).

A start finding the lock held, or a record of another run whose heartbeat is younger than ``stale_after`` seconds
(from another host, where the lock says nothing), refuses with one line and touches nothing. A record whose owner is
gone (its lock is free on the same host, or its heartbeat is older than ``stale_after``: killed, preempted) is taken
over with one line. The run removes its record when it closes.

:class:`Ownership` takes a folder (the ``checkpoint_guard`` callback); :func:`live_owner` only looks, taking nothing
(``foundry-ext anneal`` before it names a branch's folder, and the guard's early exit of a finished run). Only the
standard library: no Composer, no torch.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from foundry_ext._process import pid_alive

__all__ = ["LOCK_FILE", "OWNER_FILE", "FolderBusy", "FolderUnwritable", "Ownership", "live_owner", "read_record"]

OWNER_FILE = ".foundry-ext-owner.json"
LOCK_FILE = ".foundry-ext-owner.lock"
_LATEST_TIME = 1e11  # seconds since 1970 (the year 5138): `abs(x) < it` is False for nan, inf and a 400-digit int

try:
    import fcntl
except ImportError:  # Windows: the heartbeat alone decides
    fcntl = None  # type: ignore[assignment]


class FolderBusy(Exception):
    """Another live run owns the save folder: one line naming it."""


class FolderUnwritable(Exception):
    """The save folder cannot be written (read-only, no permission): one line naming it."""


def read_record(path: Path) -> dict[str, Any] | None:
    """The ownership record at ``path``, or None when there is none or it is garbled.

    Garbled: not a JSON object, or its ``heartbeat`` / ``started`` not a time in seconds that ``time.localtime`` can
    show (this module writes both as ``time.time()``). Such a record says nothing about a live owner, as a record
    that is not JSON does not: the lock (on the owner's host) still decides.
    """
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    for key in ("heartbeat", "started"):
        value = record.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not abs(value) < _LATEST_TIME:
            return None
    return record


def _describe(record: dict[str, Any]) -> str:
    return (
        f"run {record.get('run_name')!r} (host {record.get('host')}, pid {record.get('pid')}, started "
        f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(float(record.get('started', 0))))})"
    )


def live_owner(folder: Path, stale_after: float) -> str | None:
    """Who may own ``folder`` now, as a phrase (``"run 'a' (host h, pid 7), which holds its lock"``), else None.

    Read only: nothing is taken, created or written, so the run that looks is never refused for having looked. Where
    it cannot know, it answers "may own": the lock held (read with a shared ``flock``, released at once); on this
    host, without a lock to read (no lock file, or a filesystem without locks), a record whose process is alive;
    from another host, a record whose heartbeat is younger than ``stale_after`` seconds. A garbled record is none
    (:func:`read_record`), as :class:`Ownership` reads it.

    Args:
        folder (Path): The local save folder.
        stale_after (float): Seconds without a heartbeat after which another host's owner is taken to be gone.
    """
    record = read_record(folder / OWNER_FILE)
    who = f"run {record.get('run_name')!r} (host {record.get('host')}, pid {record.get('pid')})" if record else "a run"
    lock = _probe_lock(folder / LOCK_FILE)
    if lock is False:
        return f"{who}, which holds its lock"
    if record is None:
        return None
    if record.get("host") == socket.gethostname():
        # a free lock on this host is exact (the holder is gone); without one the process decides
        return f"{who}, whose process is alive" if lock is None and pid_alive(record.get("pid")) else None
    age = time.time() - float(record.get("heartbeat", 0))
    return f"{who}, whose last heartbeat was {age:.0f} s ago" if age < stale_after else None


def _probe_lock(path: Path) -> bool | None:
    """True: the lock is free; False: another process holds it; None: no lock to read (no file, no locks here)."""
    if fcntl is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # shared and released at once
        fcntl.flock(fd, fcntl.LOCK_UN)
    except BlockingIOError:
        return False
    except OSError:  # ENOLCK, EOPNOTSUPP: a filesystem without locks
        return None
    finally:
        os.close(fd)
    return True


class Ownership:
    """Take, keep and release one save folder for this process (called on global rank 0 only).

    Args:
        folder (Path): The local save folder.
        run_name (str): Shown to a second run that is refused.
        stale_after (float): Seconds without a heartbeat after which an owner is taken to be gone.
        heartbeat_interval (float): Seconds between two heartbeats.
    """

    def __init__(self, folder: Path, run_name: str, stale_after: float, heartbeat_interval: float) -> None:
        self.folder, self.run_name = folder, run_name
        self.stale_after, self.heartbeat_interval = stale_after, heartbeat_interval
        self.record_path, self.lock_path = folder / OWNER_FILE, folder / LOCK_FILE
        self.token = uuid.uuid4().hex
        self.started = time.time()
        self._lock_fd: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost: str | None = None  # set when another run took the folder over (this one was thought gone)

    def acquire(self) -> str | None:
        """Take the folder; the line reporting a takeover, or None.

        Raises:
            FolderBusy: A live run owns it (nothing was changed).
            FolderUnwritable: The folder cannot be created or written.
        """
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as e:
            raise FolderUnwritable(
                f"save_folder {self.folder} is not writable ({e.strerror}): checkpoint_guard needs to write its "
                "ownership record there, and the run its checkpoints"
            ) from None
        locked = self._lock(fd)
        record = self._read()
        if locked is False:
            os.close(fd)
            who = _describe(record) if record else "another process"
            raise FolderBusy(
                f"save_folder {self.folder} is owned by a live run, {who}, which holds its lock: refusing to touch it "
                "(stop that run, or give this one another save_folder)"
            )
        self._lock_fd = fd
        takeover = None
        if record and record.get("token") != self.token:
            age = time.time() - float(record.get("heartbeat", 0))
            same_host = record.get("host") == socket.gethostname()
            if same_host and locked:  # the lock is exact on one machine: its holder is gone
                takeover = f"its lock was released (the process is gone; last heartbeat {age:.0f} s ago)"
            elif same_host and locked is None and not pid_alive(record.get("pid")):
                takeover = f"its process is gone (last heartbeat {age:.0f} s ago)"
            elif age < self.stale_after:
                self.release()
                raise FolderBusy(
                    f"save_folder {self.folder} is owned by {_describe(record)}, whose last heartbeat was {age:.0f} s "
                    f"ago: refusing to touch it (an owner without a heartbeat for "
                    f"callbacks.checkpoint_guard.stale_after = {self.stale_after:g} s is taken over)"
                )
            else:
                takeover = f"its last heartbeat was {age:.0f} s ago, more than stale_after = {self.stale_after:g} s"
        try:
            self._write()
        except OSError as e:
            self.release()
            raise FolderUnwritable(
                f"save_folder {self.folder} is not writable ({e.strerror}): checkpoint_guard needs to write its "
                "ownership record there, and the run its checkpoints"
            ) from None
        if takeover is None:
            return None
        return f"checkpoint_guard: took over save_folder {self.folder} from {_describe(record)}: {takeover}"

    def start_heartbeat(self) -> None:
        """Renew the heartbeat every ``heartbeat_interval`` seconds in a daemon thread until :meth:`release`."""
        self._thread = threading.Thread(target=self._beat, name="checkpoint-guard-heartbeat", daemon=True)
        self._thread.start()

    def release(self) -> None:
        """Stop the heartbeat, remove this run's record (only if still its own) and release the lock."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        record = self._read()
        if record and record.get("token") == self.token:
            with contextlib.suppress(OSError):
                self.record_path.unlink()
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)  # closing releases the flock
            self._lock_fd = None

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_interval):
            record = self._read()
            if record and record.get("token") != self.token:
                self.lost = f"save_folder {self.folder} was taken over by {_describe(record)}"
                return
            with contextlib.suppress(OSError):  # a full disk must not kill training; the next beat retries
                self._write()

    def _lock(self, fd: int) -> bool | None:
        """True: locked; False: held by another process; None: this filesystem has no locks."""
        if fcntl is None:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        except OSError:  # ENOLCK, EOPNOTSUPP: a filesystem without locks
            return None
        return True

    def _read(self) -> dict[str, Any] | None:
        return read_record(self.record_path)

    def _write(self) -> None:
        record = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "run_name": self.run_name,
            "token": self.token,
            "started": self.started,
            "heartbeat": time.time(),
        }
        tmp = self.record_path.with_name(f"{OWNER_FILE}.{self.token}.tmp")
        tmp.write_text(json.dumps(record))
        os.replace(tmp, self.record_path)  # a reader sees the old record or the new one, never half of one
