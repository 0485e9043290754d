"""``checkpoint_guard`` on sharded folders, through the real launcher: FSDP2, ``composer -n 2``, killed at four moments.

``FSDP_VERSION=2 composer -n 2 train.py yamls/tiny-fsdp.yaml`` (12 batches, a sharded checkpoint and an evaluation
every 4: ``ep0-ba4/``, ``ep0-ba8/``, ``ep0-ba12/``, each ``__0_0.distcp``, ``__1_0.distcp`` and ``.metadata``;
``autoresume: true``, ``save_overwrite: false``, ``callbacks.checkpoint_guard``) is SIGKILLed as a whole process group
(launcher and both ranks), then started again with the same command, in one chain:

==  ==========================================================  ===============================================
L   what                                                         the next start finds
==  ==========================================================  ===============================================
1   killed 4 s after the launch (start-up)                       an empty folder
2   killed while ep0-ba4's shards are written (``.distcp`` files  a partial folder; it is quarantined, not deleted,
    growing, no ``.metadata``), after a second launcher of the   and the run starts from scratch
    same command was refused while it wrote (the folder's
    owner lock: one line, both ranks status 2, nothing touched)
3   killed after ep0-ba8 is written, between Composer's removal  no ``latest-sharded-rank0``: resume from ep0-ba8
    of ``latest-sharded-rank0`` and its re-creation
4   killed once ``latest-sharded-rank0 -> ep0-ba12`` (after the   a finished run
    last checkpoint)
5   the same command: exits 0 before building the model          unchanged
==  ==========================================================  ===============================================

:mod:`tests.support.fault_hooks` widens the moments (``FAULT_SHARD_DELAY``: a sleep before each item of a shard file;
``FAULT_SYMLINK_DELAY``: before the link is created); the bytes and the order of the save are torch's and Composer's.
Asserted:

* each start resumes from the newest checkpoint a full read can load at that moment (the oracle is
  ``torch.distributed.checkpoint``'s own reader, every tensor, through ``dcp_to_torch_save``, not the guard's check),
  or from scratch when there is none;
* a checkpoint folder, once complete, keeps every file's SHA-256 to the end; the partial folder is in
  ``quarantine/`` with the bytes the kill left;
* the final ``ep0-ba4``, ``ep0-ba8`` and ``ep0-ba12`` equal the uninterrupted run's
  (:func:`tests.support.multirank.checkpoint_differences` on their full reads: every tensor, optimizer state,
  scheduler, callback state, dataloader position and timestamp counter), the saved RNG states aside (Composer does not
  restore them when a streaming dataset resumes mid-epoch: tests/resume/test_checkpoint_faults.py);
* the LR of every batch and every eval loss, on both ranks, equal the uninterrupted run's bitwise, the batches
  trained twice included.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.fsdp import FSDP_ENV, FSDP_YAML, fsdp_overrides
from tests.support.multirank import (
    checkpoint_differences,
    kill,
    launch,
    rank_statuses,
    read_metrics,
    same_bits,
    wait_until,
)

LR = "lr-DecoupledAdamW/group0"
EVAL = "metrics/eval/LanguageCrossEntropy"
LATEST = "latest-sharded-rank0"
BATCHES = (4, 8, 12)
# 4 ms before each item of a shard file: rank 0's ~850 items (most of them small pickled values) take ~3.5 s
SHARD_DELAY = {"FAULT_SHARD_DELAY": "0.004"}
# 0.5 s before each item: rank 0 writes ep0-ba4 for ~7 minutes (under the 10-minute process-group timeout), the time
# a second launcher has to be refused on a loaded machine; the test kills the first as soon as it is
SLOW_SHARDS = {"FAULT_SHARD_DELAY": "0.5"}
SYMLINK_DELAY = {"FAULT_SYMLINK_DELAY": "1.0"}


def _files(folder: Path) -> dict[str, str]:
    """Every file of a checkpoint folder -> SHA-256."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def _full_read(folder: Path, out: Path) -> Path | None:
    """The checkpoint read whole by torch.distributed.checkpoint's reader into one torch file, or None if it fails."""
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    try:
        dcp_to_torch_save(folder, out)
    except (CheckpointException, Exception):  # CheckpointException is a BaseException: what a failed read raises
        return None
    return out


def _shards_being_written(folder: Path) -> bool:
    return any(p.stat().st_size > 0 for p in folder.glob("*.distcp")) and not (folder / ".metadata").exists()


def _latest(folder: Path) -> str | None:
    try:
        return os.readlink(folder / LATEST)
    except OSError:
        return None


@pytest.mark.kills_mid_run  # implies slow; one at a time under xdist (tests/conftest.py)
@pytest.mark.timeout(1800)
def test_sharded_kill_at_four_moments_then_the_same_command_resumes_exactly(
    demo_data: Path, fsdp_reference: Path, tmp_path: Path
) -> None:
    reference = read_metrics(fsdp_reference / "metrics-rank0.jsonl")
    assert reference == read_metrics(fsdp_reference / "metrics-rank1.jsonl")
    # Composer logs batch b's values at step b + 1 (the timestamp once the batch is done)
    assert sorted(reference[LR]) == list(range(1, 13)) and sorted(reference[EVAL]) == [4, 8, 12]

    run_dir = tmp_path / "killed"
    folder = run_dir / "checkpoints"
    metrics = run_dir / "metrics-rank0.jsonl"
    args = fsdp_overrides(demo_data, run_dir)
    complete: dict[int, dict[str, str]] = {}  # batch -> its files' SHA-256 once complete
    reads = tmp_path / "reads"
    reads.mkdir()

    def check_folder(step: str) -> int:
        """With every process dead: the completed checkpoints unchanged; the batch the next start resumes from."""
        loadable = 0
        for b in BATCHES:
            path = folder / f"ep0-ba{b}"
            if b in complete:
                assert path.is_dir() and _files(path) == complete[b], f"ep0-ba{b} changed after {step}"
            elif path.is_dir() and _full_read(path, reads / f"{step}-{b}.pt") is not None:
                complete[b] = _files(path)
            if b in complete:
                loadable = b
        return loadable

    def run(step: str, moment: Callable[[float], bool], env: dict[str, str], expected_start: int, during=None) -> None:
        """Launch, kill at ``moment(seconds since the launch)`` (which must come; ``during(proc)`` first), check
        where it started from."""
        offset = metrics.stat().st_size if metrics.exists() else 0
        t0 = time.monotonic()
        proc = launch(FSDP_YAML, args, nproc=2, log=tmp_path / f"{step}.log", env={**FSDP_ENV, **env})
        try:
            wait_until(f"{step}'s moment", lambda: moment(time.monotonic() - t0), proc, tmp_path / f"{step}.log",
                       interval=0.002)  # fmt: skip
            if during is not None:
                during(proc)
        finally:
            kill(proc)
        # the first batch whose LR this launch logged: the lines it appended after ``offset`` bytes
        first = min(read_metrics(metrics, (LR,), after=offset, last=True).get(LR, {}), default=None)
        if first is not None:  # it trained: from the checkpoint the oracle named (batch k is logged at step k + 1)
            assert first - 1 == expected_start, f"{step} started at batch {first - 1}, not {expected_start}"

    # L1: at start-up
    run("L1", lambda elapsed: elapsed >= 4.0, {}, 0)
    assert check_folder("L1") == 0

    # L2: ep0-ba4's shards are written; meanwhile a second launcher of the same command is refused
    ba4 = folder / "ep0-ba4"

    def second_launcher(first) -> None:
        status = launch(FSDP_YAML, args, nproc=2, log=tmp_path / "L2b.log", env=FSDP_ENV,
                        rank_status=tmp_path / "L2b-status")  # fmt: skip
        assert status.wait(timeout=600) == 2, (tmp_path / "L2b.log").read_text()[-4000:]
        output = (tmp_path / "L2b.log").read_text()
        assert rank_statuses(tmp_path / "L2b-status", 2) == {0: "2", 1: "2"}, output[-4000:]
        refusals = [line for line in output.splitlines() if "callbacks.checkpoint_guard: error:" in line]
        assert len(refusals) == 1 and "is owned by a live run, run 'tiny-fsdp'" in refusals[0], output[-4000:]
        assert first.poll() is None, "the first run ended while the second was refused"
        assert not (folder / "quarantine").exists() and ba4.is_dir(), "the second launcher touched the folder"

    run("L2", lambda _: ba4.is_dir() and _shards_being_written(ba4), SLOW_SHARDS, 0, during=second_launcher)
    assert _shards_being_written(ba4), "the kill came after ep0-ba4's .metadata: make SLOW_SHARDS slower"
    partial = _files(ba4)
    assert ".metadata" not in partial and _full_read(ba4, reads / "partial.pt") is None
    assert check_folder("L2") == 0

    # L3: ep0-ba4 quarantined; ep0-ba4 and ep0-ba8 written, killed between the link's removal and re-creation
    ba8 = folder / "ep0-ba8"
    run("L3", lambda _: (ba8 / ".metadata").exists() and _latest(folder) is None, {**SHARD_DELAY, **SYMLINK_DELAY}, 0)
    assert _files(folder / "quarantine" / "ep0-ba4") == partial  # moved aside as the kill left it, not deleted
    assert _latest(folder) is None
    assert check_folder("L3") == 8

    # L4: resumes from ep0-ba8 (the guard re-links), killed once latest -> ep0-ba12
    run("L4", lambda _: _latest(folder) == "ep0-ba12", SHARD_DELAY, 8)
    assert check_folder("L4") == 12

    # L5: the same command exits 0 before building the model; nothing changes
    proc = launch(FSDP_YAML, args, nproc=2, log=tmp_path / "L5.log", env=FSDP_ENV)
    assert proc.wait(timeout=600) == 0, (tmp_path / "L5.log").read_text()[-4000:]
    for rank in (0, 1):
        log = (run_dir / f"train-rank{rank}.log").read_text()
        assert "this run has finished training; exiting with status 0 before building the model" in log, log[-3000:]
        assert "Initializing model..." not in log
    assert check_folder("L5") == 12
    assert sorted(p.name for p in (folder / "quarantine").iterdir()) == ["ep0-ba4"]

    # the folder ends as the uninterrupted run's, checkpoint for checkpoint (full reads of both)
    assert _latest(folder) == "ep0-ba12"
    for b in BATCHES:
        ours = _full_read(folder / f"ep0-ba{b}", reads / f"final-{b}.pt")
        theirs = _full_read(fsdp_reference / "checkpoints" / f"ep0-ba{b}", reads / f"reference-{b}.pt")
        assert ours is not None and theirs is not None
        assert checkpoint_differences(ours, theirs, ignore=("/rng",)) == [], b

    # LRs and eval losses bitwise, both ranks, every batch (read_metrics also checks re-trained batches agree)
    for rank in (0, 1):
        got = read_metrics(run_dir / f"metrics-rank{rank}.jsonl")
        for name in (LR, EVAL):
            assert got[name].keys() == reference[name].keys(), (rank, name)
            bad = {s: (v, reference[name][s]) for s, v in got[name].items() if not same_bits(v, reference[name][s])}
            assert not bad, f"rank {rank}: {name} differs from the uninterrupted run at {bad}"
