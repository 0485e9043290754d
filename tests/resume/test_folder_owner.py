"""A save folder has one owner (:mod:`foundry_ext.checkpoint.owner`): unit checks, then the real launcher.

Through ``composer -n 2 train.py yamls/tiny-resume.yaml`` (2 ranks per launcher): a second launcher on the same
``save_folder`` is refused with one line while the first runs, and changes nothing; after a SIGKILL of the first (in
the middle of a checkpoint write) and ``stale_after``, the same command takes the folder over, quarantines the partial
file, resumes, and ends with checkpoints equal to an uninterrupted run's; no completed checkpoint is moved or changed.
A read-only ``save_folder`` with a partial checkpoint in it gets one line naming it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from foundry_ext.checkpoint.owner import LOCK_FILE, OWNER_FILE, FolderBusy, FolderUnwritable, Ownership, live_owner
from tests.support.launcher import REPO
from tests.support.multirank import (
    FAULT_HOOKS,
    JSONL_LOGGER,
    checkpoint_differences,
    kill,
    launch,
    rank_statuses,
    wait_until,
)

YAML = REPO / "yamls" / "tiny-resume.yaml"
STALE_AFTER = 3.0
# 1.5 s per 64 KiB written (~40 s per 1.8 MB checkpoint): the first run still trains while the second one starts up
# (imports and model build take up to two minutes on a busy 2-core machine), and a kill mid-write is easy to hit
DELAYS = {"FAULT_WRITE_DELAY": "1.5", "FAULT_FIRST_WRITE_DELAY": "0.3"}


def _record(folder: Path) -> dict:
    return json.loads((folder / OWNER_FILE).read_text())


# -- the record and the lock, in one process --------------------------------------------------------------------------


def test_second_owner_is_refused_while_the_first_holds_the_lock(tmp_path: Path) -> None:
    first = Ownership(tmp_path, "first", stale_after=60, heartbeat_interval=1)
    assert first.acquire() is None
    second = Ownership(tmp_path, "second", stale_after=60, heartbeat_interval=1)
    with pytest.raises(FolderBusy, match=r"is owned by a live run, run 'first' \(host .*, pid \d+, .*holds its lock"):
        second.acquire()
    assert _record(tmp_path)["run_name"] == "first"
    first.release()
    assert not (tmp_path / OWNER_FILE).exists()
    assert second.acquire() is None and _record(tmp_path)["run_name"] == "second"
    second.release()


@pytest.mark.parametrize(("age", "taken"), [(10.0, False), (120.0, True)])
def test_owner_on_another_host_is_taken_over_only_after_stale_after(tmp_path: Path, age: float, taken: bool) -> None:
    """A record from another machine: its lock says nothing there, so the heartbeat decides."""
    now = time.time()
    record = {
        "host": "other-host",
        "pid": 1,
        "run_name": "away",
        "token": "t",
        "started": now - 500,
        "heartbeat": now - age,
    }
    (tmp_path / OWNER_FILE).write_text(json.dumps(record))
    owner = Ownership(tmp_path, "here", stale_after=60, heartbeat_interval=1)
    if not taken:
        with pytest.raises(FolderBusy, match=r"owned by run 'away' \(host other-host.*last heartbeat was 10 s ago"):
            owner.acquire()
        assert _record(tmp_path) == record  # untouched
        return
    line = owner.acquire()
    assert line is not None and "took over save_folder" in line and "more than stale_after = 60 s" in line
    assert _record(tmp_path)["run_name"] == "here"
    owner.release()


@pytest.mark.parametrize(
    ("key", "value"),
    [("heartbeat", "abc"), ("heartbeat", float("inf")), ("heartbeat", 10**400), ("started", "yesterday"),
     ("started", 1e300)],
    ids=["heartbeat-text", "heartbeat-inf", "heartbeat-400-digits", "started-text", "started-1e300"],
)  # fmt: skip
def test_a_garbled_record_is_read_as_none(tmp_path: Path, key: str, value: object) -> None:
    """Issue 46: a heartbeat of 'abc' was a ValueError traceback (``started`` an OverflowError when it was shown).

    A record this module did not write says nothing of a live owner, as one that is not JSON does not: the folder is
    taken without a takeover line, and the lock (free here) decided.
    """
    record = {"host": "other-host", "pid": 1, "run_name": "away", "token": "t", "started": 0.0, "heartbeat": 0.0}
    (tmp_path / OWNER_FILE).write_text(json.dumps({**record, key: value}))
    owner = Ownership(tmp_path, "here", stale_after=60, heartbeat_interval=1)
    assert owner.acquire() is None
    assert _record(tmp_path)["run_name"] == "here"
    owner.release()


def test_dead_owner_on_this_host_is_taken_over_at_once(tmp_path: Path) -> None:
    """Its lock is free (the process is gone), whatever its heartbeat says."""
    now = time.time()
    host = socket.gethostname()
    record = {"host": host, "pid": 2**22 + 1, "run_name": "gone", "token": "t", "started": now, "heartbeat": now}
    (tmp_path / OWNER_FILE).write_text(json.dumps(record))
    owner = Ownership(tmp_path, "here", stale_after=600, heartbeat_interval=1)
    line = owner.acquire()
    assert line is not None and "its lock was released" in line
    owner.release()


def test_heartbeat_is_renewed_while_the_run_lives(tmp_path: Path) -> None:
    owner = Ownership(tmp_path, "beating", stale_after=1, heartbeat_interval=0.05)
    owner.acquire()
    owner.start_heartbeat()
    first = _record(tmp_path)["heartbeat"]
    time.sleep(0.5)
    assert _record(tmp_path)["heartbeat"] > first
    owner.release()
    assert not (tmp_path / OWNER_FILE).exists() and (tmp_path / LOCK_FILE).exists()


# -- looking without taking (anneal's branch folder, the early exit of a finished run) ------------------------------


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_look_names_the_run_that_holds_the_lock_and_takes_nothing(tmp_path: Path) -> None:
    owner = Ownership(tmp_path, "first", stale_after=60, heartbeat_interval=1)
    assert owner.acquire() is None
    before = _files(tmp_path)
    line = live_owner(tmp_path, stale_after=60)
    assert line == f"run 'first' (host {socket.gethostname()}, pid {os.getpid()}), which holds its lock"
    assert _files(tmp_path) == before  # nothing written, and the owner's lock still held
    with pytest.raises(FolderBusy):
        Ownership(tmp_path, "second", stale_after=60, heartbeat_interval=1).acquire()
    owner.release()
    assert live_owner(tmp_path, stale_after=60) is None
    assert not (tmp_path / OWNER_FILE).exists()


def test_a_look_at_an_empty_folder_creates_nothing(tmp_path: Path) -> None:
    assert live_owner(tmp_path, stale_after=60) is None and _files(tmp_path) == {}
    assert live_owner(tmp_path / "not-made", stale_after=60) is None and not (tmp_path / "not-made").exists()


@pytest.mark.parametrize(
    ("host", "pid", "age", "lock_file", "live"),
    [
        pytest.param("here", "self", 0.0, False, "whose process is alive", id="this-host-no-lock-file-alive"),
        pytest.param("here", "self", 9000.0, False, "whose process is alive", id="this-host-no-lock-file-old-beat"),
        pytest.param("here", "dead", 0.0, False, None, id="this-host-no-lock-file-dead"),
        pytest.param("here", "self", 0.0, True, None, id="this-host-free-lock"),  # exact here: the guard takes it
        pytest.param("other-host", 1, 10.0, False, "whose last heartbeat was 10 s ago", id="other-host-fresh"),
        pytest.param("other-host", 1, 10.0, True, "whose last heartbeat was 10 s ago", id="other-host-fresh-lock"),
        pytest.param("other-host", 1, 120.0, True, None, id="other-host-stale"),
    ],
)
def test_a_look_at_a_record_without_a_held_lock(
    tmp_path: Path, host: str, pid: object, age: float, lock_file: bool, live: str | None
) -> None:
    """Without a held lock the record decides: on this host its process (when there is no lock to read), elsewhere
    its heartbeat against ``stale_after``. Where the guard would refuse the folder, the look says it is owned."""
    now = time.time()
    pid = {"self": os.getpid(), "dead": 2**22 + 1}.get(pid, pid)  # type: ignore[arg-type]
    host = socket.gethostname() if host == "here" else host
    record = {"host": host, "pid": pid, "run_name": "r", "token": "t", "started": now, "heartbeat": now - age}
    (tmp_path / OWNER_FILE).write_text(json.dumps(record))
    if lock_file:
        (tmp_path / LOCK_FILE).touch()
    line = live_owner(tmp_path, stale_after=60)
    assert line == (None if live is None else f"run 'r' (host {host}, pid {pid}), {live}")
    if lock_file:  # the guard's own decision on the same folder agrees
        owner = Ownership(tmp_path, "here", stale_after=60, heartbeat_interval=1)
        if live is None:
            assert owner.acquire() is not None  # taken over, with its line
            owner.release()
        else:
            with pytest.raises(FolderBusy):
                owner.acquire()


@pytest.mark.parametrize("heartbeat", ["abc", None, float("inf"), 10**400], ids=["text", "null", "inf", "400-digits"])
def test_a_look_reads_a_garbled_record_as_none(tmp_path: Path, heartbeat: object) -> None:
    record = {"host": "other-host", "pid": 1, "run_name": "away", "token": "t", "started": 0.0, "heartbeat": heartbeat}
    (tmp_path / OWNER_FILE).write_text(json.dumps(record))
    assert live_owner(tmp_path, stale_after=60) is None


@contextlib.contextmanager
def _read_only(folder: Path) -> Iterator[None]:
    """``folder`` read-only for this process: a read-only bind mount as root (root ignores permissions), else 0o555."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(0o755)
        return
    try:
        subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("as root, a read-only folder needs a bind mount, which is not permitted here")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(folder)], check=True, capture_output=True)
        yield
    finally:
        subprocess.run(["umount", str(folder)], check=False, capture_output=True)


def test_read_only_folder_gets_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    (folder / "ep0-ba4-rank0.pt").write_bytes(b"PK\x03\x04partial")
    with _read_only(folder):
        unwritable = r"save_folder .*checkpoints is not writable \((Read-only file system|Permission denied)\)"
        with pytest.raises(FolderUnwritable, match=unwritable):
            Ownership(folder, "ro", stale_after=60, heartbeat_interval=1).acquire()


# -- the real launcher: two launchers, one folder ---------------------------------------------------------------------


def _overrides(data: Path, run_dir: Path, folder: Path) -> list[str]:
    return [
        f"variables.data_local={data}",
        f"save_folder={folder}",
        "max_duration=12ba",
        "save_interval=2ba",
        "autoresume=true",
        "save_overwrite=false",
        f"callbacks.checkpoint_guard.stale_after={STALE_AFTER}",
        "callbacks.checkpoint_guard.heartbeat_interval=0.5",
        f"code_paths=[{JSONL_LOGGER},{FAULT_HOOKS}]",
        f"loggers.jsonl.path={run_dir}/metrics-rank{{rank}}.jsonl",
    ]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.kills_mid_run  # implies slow; one at a time under xdist (tests/conftest.py)
def test_two_launchers_on_one_folder(demo_data: Path, uninterrupted_12ba: Path, tmp_path: Path) -> None:
    # the same YAML, never killed (shared: tests/resume/conftest.py; the guard's settings do not reach checkpoints)
    ref_ckpt = uninterrupted_12ba / "checkpoints"
    sizes = {b: (ref_ckpt / f"ep0-ba{b}-rank0.pt").stat().st_size for b in range(2, 13, 2)}

    run_dir = tmp_path / "shared"
    folder = run_dir / "ckpt"
    args = _overrides(demo_data, run_dir, folder)
    first = launch(YAML, args, nproc=2, log=tmp_path / "first.log", env=DELAYS)

    def writing() -> int | None:
        """The batch of the checkpoint being written, once 20-80 % of it is on disk."""
        for b, size in sizes.items():
            path = folder / f"ep0-ba{b}-rank0.pt"
            if path.exists() and 0.2 * size < path.stat().st_size < 0.8 * size:
                return b
        return None

    try:
        wait_until("ep0-ba2", lambda: os.path.realpath(folder / "latest-rank0.pt").endswith("ep0-ba2-rank0.pt"),
                   first, tmp_path / "first.log", interval=0.01)  # fmt: skip
        owner = _record(folder)
        # the second launcher, while the first trains and writes: one line, status non-zero, nothing touched
        second = launch(YAML, args, nproc=2, log=tmp_path / "second.log", rank_status=tmp_path / "second-status")
        assert second.wait(timeout=600) == 2
        output = (tmp_path / "second.log").read_text()
        assert rank_statuses(tmp_path / "second-status", 2) == {0: "2", 1: "2"}, output[-4000:]  # each rank's own
        refusals = [line for line in output.splitlines() if "callbacks.checkpoint_guard: error:" in line]
        assert len(refusals) == 1 and "is owned by a live run, run 'tiny-resume'" in refusals[0], output[-4000:]
        assert f"pid {owner['pid']}" in refusals[0]
        assert "Traceback" not in output.split(refusals[0])[0]  # the line comes first
        assert first.poll() is None and _record(folder)["token"] == owner["token"]
        assert not (folder / "quarantine").exists()

        # SIGKILL the first in the middle of writing its next checkpoint
        seen: list[int] = []
        wait_until("a checkpoint half written", lambda: seen.append(writing() or 0) or seen[-1] > 0, first,
                   tmp_path / "first.log", interval=0.01)  # fmt: skip
        batch = seen[-1]
        partial = folder / f"ep0-ba{batch}-rank0.pt"
        complete = {f"ep0-ba{b}-rank0.pt" for b in range(2, batch, 2)}
        complete_sha = {name: _sha(folder / name) for name in complete}
    finally:
        kill(first)
    partial_sha = _sha(partial)
    assert (folder / OWNER_FILE).exists()  # a killed run leaves its record behind
    time.sleep(STALE_AFTER)

    third = launch(YAML, args, nproc=2, log=tmp_path / "third.log")
    assert third.wait(timeout=900) == 0, (tmp_path / "third.log").read_text()[-4000:]
    output = (tmp_path / "third.log").read_text()
    assert "checkpoint_guard: took over save_folder" in output and f"pid {owner['pid']}" in output
    assert _sha(folder / "quarantine" / partial.name) == partial_sha
    assert {name: _sha(folder / name) for name in complete} == complete_sha  # no completed checkpoint moved/changed
    for b in range(batch, 13, 2):
        name = f"ep0-ba{b}-rank0.pt"
        # the RNG state is not restored when a streaming dataset resumes mid-epoch
        # (tests/resume/test_checkpoint_faults.py)
        assert checkpoint_differences(folder / name, ref_ckpt / name, ignore=("/rng",)) == [], name
    assert not (folder / OWNER_FILE).exists()  # released at the end


# -- the guard's settings ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["q\0x", "x" * 300, ".", "./q", "q/./r", "a/../b", " q", "q\n", "", "/abs", "~/q"])
def test_quarantine_folder_that_is_not_a_plain_name_is_refused(value: str) -> None:
    """The issue's ``"q\\0x"``, a 300-character name and ``"."`` used to pass and fail in the repair that needs them."""
    from foundry_ext.config.errors import ConfigError
    from foundry_ext.trainer.checkpoint_guard import CheckpointGuard

    with pytest.raises(ConfigError) as raised:
        CheckpointGuard(quarantine_folder=value)
    assert str(raised.value).startswith("callbacks.checkpoint_guard.quarantine_folder: ")
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("latest-rank0.pt", "is an existing file in save_folder"),
        ("ep0-ba9-rank0.pt", "is named like a checkpoint or the latest symlink"),
        ("latest-rank0.pt/x", "is named like a checkpoint or the latest symlink"),
    ],
)
def test_quarantine_folder_colliding_with_the_checkpoints_is_refused(tmp_path: Path, value: str, message: str) -> None:
    from foundry_ext.config.errors import ConfigError
    from foundry_ext.trainer.checkpoint_guard.callback import _check_quarantine

    (tmp_path / "ep0-ba2-rank0.pt").write_bytes(b"x")
    if value == "latest-rank0.pt":
        (tmp_path / "latest-rank0.pt").write_bytes(b"a copy, not a link")
    with pytest.raises(ConfigError, match=rf"^callbacks\.checkpoint_guard\.quarantine_folder: '{value}' {message}"):
        _check_quarantine(tmp_path, value, "ep{epoch}-ba{batch}-rank0.pt", "latest-rank0.pt")
    _check_quarantine(tmp_path, "quarantine", "ep{epoch}-ba{batch}-rank0.pt", "latest-rank0.pt")  # the default


def test_heartbeat_must_fit_three_times_in_stale_after() -> None:
    from foundry_ext.config.errors import ConfigError
    from foundry_ext.trainer.checkpoint_guard import CheckpointGuard

    with pytest.raises(ConfigError, match=r"^callbacks\.checkpoint_guard: heartbeat_interval 30 s is more than"):
        CheckpointGuard(stale_after=60)
    for key in ("stale_after", "heartbeat_interval"):
        with pytest.raises(ConfigError, match=rf"^callbacks\.checkpoint_guard\.{key}: "):
            CheckpointGuard(**{key: float("nan")})
