"""The one scaffold of the tests that launch training runs: start ``composer -n N train.py`` (or one ``train.py``
process), wait for a moment of the run (:func:`wait_until`, :func:`wait_for_line`), kill it, launch it again, wait
for its end (:func:`finish`, :func:`launch_and_wait`), read its JSONL metrics (:func:`read_metrics`) and compare
checkpoints exactly.

Each run is a session of its own (``start_new_session``), so ``os.killpg(proc.pid, SIGKILL)`` takes the launcher and
every rank at once, as a cluster scheduler's kill does. Each launch gets a free ``--master_port``; launching again
is :func:`launch` with the same arguments (a new port: the killed launcher's may still be held).
"""

from __future__ import annotations

import datetime
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from foundry_ext.checkpoint import load_checkpoint_safely
from tests.support.launcher import COMPOSER, REPO, TRAIN_PY

__all__ = [
    "checkpoint_differences",
    "finish",
    "free_port",
    "kill",
    "launch",
    "launch_and_wait",
    "lost_shm_race",
    "rank_statuses",
    "read_metrics",
    "same_bits",
    "wait_for_line",
    "wait_until",
]

JSONL_LOGGER = REPO / "tests" / "support" / "jsonl_logger.py"
FAULT_HOOKS = REPO / "tests" / "support" / "fault_hooks.py"
RANK_STATUS = REPO / "tests" / "support" / "rank_status.sh"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(
    yaml_path: Path,
    overrides: list[str],
    *,
    nproc: int | None,
    log: Path,
    env: dict[str, str] | None = None,
    launcher_args: list[str] | None = None,
    cwd: Path = REPO,
    prefix: tuple[str, ...] = (),
    rank_status: Path | None = None,
) -> subprocess.Popen:
    """Start ``composer -n nproc train.py yaml_path overrides...`` in the repository, output to ``log``.

    ``nproc=None``: ``python train.py yaml_path overrides...``, one process and no launcher, as llm-foundry runs alone.
    ``launcher_args`` replace ``--master_port <a free port>`` (a node of a multi-node job names its rank and node 0's
    address and port). ``cwd``: where it runs (each node of a job has its own: llm-foundry's ranks signal each
    other through files named alike on every node, in the working directory). ``rank_status``: a folder where each
    rank writes its own exit status (``tests/support/rank_status.sh``; read them with :func:`rank_statuses`): the
    launcher reports the first rank to end and SIGTERMs the others, so its own status says nothing of theirs.
    """
    if nproc is None:
        cmd = [*prefix, sys.executable, str(TRAIN_PY), str(yaml_path)]
    else:
        launcher = launcher_args if launcher_args is not None else ["--master_port", str(free_port())]
        if rank_status is not None:
            rank_status.mkdir(parents=True, exist_ok=True)
            launcher = [*launcher, "--command_mode", str(RANK_STATUS), str(rank_status), sys.executable]
        cmd = [*prefix, str(COMPOSER), "-n", str(nproc), *launcher, str(TRAIN_PY), str(yaml_path)]
    full_env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", **(env or {})}
    with open(log, "w") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [*cmd, *overrides], cwd=cwd, env=full_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def launch_and_wait(
    yaml_path: Path, overrides: list[str], *, nproc: int | None, log: Path, timeout: float = 300, **kwargs: Any
) -> tuple[int, str]:
    """:func:`launch`, wait, and return the launcher's status and output; started once more when it lost the
    ``/dev/shm`` name race (:func:`lost_shm_race`). Over ``timeout`` seconds: the launcher and its ranks are killed
    and the test fails with the output's tail. ``kwargs``: :func:`launch`'s."""
    for _ in range(2):
        proc = launch(yaml_path, overrides, nproc=nproc, log=log, **kwargs)
        try:
            status = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill(proc)
            pytest.fail(f"{log.name}: over {timeout:g} s:\n{log.read_text()[-3000:]}")
        output = log.read_text()
        if status == 0 or not lost_shm_race(output):
            break
    return status, output


def finish(proc: subprocess.Popen, log: Path, timeout: float = 600) -> None:
    """Wait for a run started by :func:`launch` to end, and fail the test with its output's tail unless it exited 0
    (over ``timeout`` seconds: the launcher and its ranks are killed first)."""
    try:
        status = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill(proc)
        pytest.fail(f"{log.name}: over {timeout:g} s:\n{log.read_text()[-3000:]}")
    assert status == 0, f"{log.name}: exited {status}:\n{log.read_text()[-4000:]}"


def wait_until(
    what: str,
    condition: Callable[[], object],
    proc: subprocess.Popen | None = None,
    log: Path | None = None,
    *,
    timeout: float = 600,
    interval: float = 0.05,
) -> None:
    """Poll ``condition`` every ``interval`` seconds until it holds: the moment (``what``) a test kills or inspects a
    run at. The test fails when ``proc`` ends first (with ``log``'s tail) or after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if proc is not None and proc.poll() is not None:
            tail = log.read_text()[-4000:] if log is not None else ""
            pytest.fail(f"ended (status {proc.returncode}) before {what}:\n{tail}")
        assert time.monotonic() < deadline, f"no {what} after {timeout:g} s"
        time.sleep(interval)


def wait_for_line(proc: subprocess.Popen, log: Path, text: str, timeout: float = 600) -> None:
    """:func:`wait_until` ``text`` is in the run's output ``log`` (a line it prints at the moment waited for)."""
    wait_until(f"{text!r} in {log.name}", lambda: text in log.read_text(), proc, log, timeout=timeout, interval=0.1)


def rank_statuses(folder: Path, nproc: int) -> dict[int, str]:
    """Each rank's exit status, as ``tests/support/rank_status.sh`` wrote it in a launch with ``rank_status=folder``
    (``"missing"`` for a rank that wrote none: it was SIGKILLed, or never started)."""
    return {
        rank: (folder / f"rank{rank}").read_text().strip() if (folder / f"rank{rank}").exists() else "missing"
        for rank in range(nproc)
    }


def lost_shm_race(output: str) -> bool:
    """True when a launch failed only because another job on this machine took the same shared-memory name.

    ``StreamingDataset`` registers its datasets under the first free ``/dev/shm/<prefix>_locals`` name: it lists the
    names, then creates one (``streaming/base/shared/prefix.py``), and another StreamingDataset job starting in
    between gets the same one. Not something the tests look at; such a launch is simply started again.
    """
    return re.search(r"FileExistsError: \[Errno 17\] File exists: '/\d+_locals'", output) is not None


def kill(proc: subprocess.Popen) -> None:
    """SIGKILL the launcher's whole process group (launcher and ranks) and reap the launcher."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def read_metrics(
    path: Path,
    prefixes: tuple[str, ...] = ("lr-", "metrics/eval/", "lr_plateau/"),
    *,
    after: int = 0,
    last: bool = False,
) -> dict[str, Any]:
    """``name -> step -> value`` from a JSONL log of :mod:`tests.support.jsonl_logger` (``{}`` when there is none).

    Args:
        path: the log (one file per rank: ``metrics-rank{rank}.jsonl``).
        prefixes: the names kept; ``("",)``: every name. Timing and throughput legitimately differ between runs.
        after: read only what was appended after this many bytes (the log's size before a launch: that launch's
            lines; the logger writes whole lines and flushes each call).
        last: a step logged twice keeps its last value. By default a step logged twice (re-trained after a kill)
            must agree bitwise.
    """
    out: dict[str, dict[int, float]] = {}
    if not path.exists():
        return out
    with open(path, "rb") as f:
        f.seek(after)
        lines = f.read().decode().splitlines()
    for line in lines:
        row = json.loads(line)
        if not row["name"].startswith(prefixes):
            continue
        seen = out.setdefault(row["name"], {})
        if row["step"] in seen and not last:
            assert same_bits(seen[row["step"]], row["value"]), f"{path.name}: logged twice, differently: {row}"
        seen[row["step"]] = row["value"]
    return out


def same_bits(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def checkpoint_differences(a: Path, b: Path, ignore: tuple[str, ...] = ()) -> list[str]:
    """Where two Composer checkpoints differ, comparing everything exactly except what records wall-clock time.

    Tensors with ``torch.equal`` (and the same dtype and shape), numpy arrays (the RNG state) with
    ``np.array_equal``, everything else with ``==``. Left out, and why:

    * every ``*_wct`` field (``total_wct``, ``batch_wct``, ...): wall-clock durations of the timestamp;
    * ``state/algorithms/<i>/1/repr``: an object's ``repr`` with its memory address;
    * in ``state/callbacks/CheckpointSaver``, the folder of each saved path (the two runs save to different
      folders): the file names and their timestamps are compared;
    * any path that starts with one of ``ignore`` (``"/rng"``, say), left out by the caller, who says why.
    """
    found: list[str] = []
    _walk(load_checkpoint_safely(a), load_checkpoint_safely(b), "", found)
    return [line for line in found if not line.startswith(tuple(f"{prefix}/" for prefix in ignore))]


# (path, timestamp) pairs of the checkpoints a run saved: the path's folder is the run's own
_SAVED_PATH = re.compile(r"^/state/callbacks/CheckpointSaver/all_saved_checkpoints_to_timestamp/\d+/0$")


def _walk(a: Any, b: Any, path: str, found: list[str]) -> None:
    if path.rsplit("/", 1)[-1].endswith("_wct") and isinstance(a, datetime.timedelta):
        return
    if path.startswith("/state/algorithms/") and path.endswith("/repr"):
        return
    if _SAVED_PATH.match(path):
        a, b = os.path.basename(a), os.path.basename(b)
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            found.append(f"{path}: keys {sorted(map(str, a))} != {sorted(map(str, b))}")
            return
        for key in a:
            _walk(a[key], b[key], f"{path}/{key}", found)
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            found.append(f"{path}: length {len(a)} != {len(b)}")
            return
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _walk(x, y, f"{path}/{i}", found)
    elif isinstance(a, torch.Tensor):
        if not (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)):
            found.append(f"{path}: tensors differ")
    elif isinstance(a, np.ndarray):
        if not (isinstance(b, np.ndarray) and np.array_equal(a, b)):
            found.append(f"{path}: arrays differ")
    elif isinstance(a, float) and isinstance(b, float):
        if not same_bits(a, b):
            found.append(f"{path}: {a!r} != {b!r}")
    elif type(a) is not type(b) or a != b:
        found.append(f"{path}: {a!r} != {b!r}")


def write_sharded_checkpoint(rank: int, world_size: int, folder: str, port: int) -> None:
    """One rank of a ``torch.distributed.checkpoint.save`` with a ``FileSystemWriter`` over gloo, as Composer calls it
    for FSDP ``state_dict_type: sharded`` (without FSDP, which needs CUDA): each rank writes its own tensors."""
    import torch.distributed as tdist
    import torch.distributed.checkpoint as dist_cp

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    tdist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=datetime.timedelta(seconds=60))
    state = {"state": {"model": {f"shard{rank}": torch.full((256, 64), float(rank))}, "timestamp": {"batch": 8}}}
    dist_cp.save(state_dict=state, storage_writer=dist_cp.FileSystemWriter(folder))
    tdist.barrier()  # both ranks' files are closed before either process ends
    # Not destroy_process_group(): in torch 2.7 ~ProcessGroupGloo joins its worker threads while holding the GIL, and a
    # worker still freeing the tensor of dist_cp's last broadcast_object waits for the GIL: a deadlock about one run in
    # three here (py-spy: MainThread in ProcessGroupGloo::~ProcessGroupGloo -> thread::join, the worker in
    # gil_scoped_acquire from ~AsyncBroadcastWork; pytorch/pytorch#56297, fixed after 2.7 by #154976). Interpreter
    # shutdown would run the same destructor, so the process ends here, exit code 0, as mp.spawn expects.
    os._exit(0)
