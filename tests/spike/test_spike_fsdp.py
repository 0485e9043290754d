"""The guard under FSDP2 with sharded checkpoints: ``FSDP_VERSION=2 composer -n 2 train.py yamls/tiny-fsdp.yaml``.

One burst run (module fixture): the loss of batches 7 and 8 (0-indexed) made inf on rank 1 only, the guard testing the
gradient norm too, a sharded checkpoint every 3 batches, stop after 2 skips with a rollback; beside it the same run
under DDP (``fsdp_config=null``: every rank holds the whole gradient). Proven:

* the gradient norm the guard decides on and logs is the whole model's, not one shard's: equal, to float tolerance, to
  torch's norm of the DTensor gradients (``get_total_norm`` then ``full_tensor``) and to the guard's own under DDP
  times the factor by which FSDP2's gradients on gloo exceed DDP's (the world size: gloo sums where FSDP2 asks for an
  average, pytorch/pytorch#162338; measured in the run); the guard's inputs (loss z-score, gradient norm) and
  decisions are bitwise the same on both ranks;
* a skipped step leaves every rank's shard of every parameter and of every optimizer state tensor bitwise as before
  it (the batch before it changed them), and both ranks stop together with status 3;
* the rollback names the sharded checkpoint folder before the burst (ep0-ba6), and the continuation launched with
  its printed arguments loads it under FSDP2, skips the data, and trains to the end in its own folder; the stopped
  run's folder is not touched.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.launcher import COMPOSER, REPO
from tests.support.multirank import JSONL_LOGGER, launch_and_wait, rank_statuses, read_metrics

YAML = REPO / "yamls" / "tiny-fsdp.yaml"
CALLBACKS = REPO / "tests" / "spike" / "launcher_callbacks.py"
PROBE = REPO / "tests" / "spike" / "fsdp_callbacks.py"
FSDP2 = {"FSDP_VERSION": "2"}
BURST = [7, 8]  # 0-indexed; the checkpoints are at batches 3 and 6, the stop at the end of batch 8 (1-indexed 9)


def _overrides(demo_data: Path, folder: Path) -> list[str]:
    return [
        f"variables.data_local={demo_data}",
        f"save_folder={folder}/checkpoints",
        "run_name=burst",
        "max_duration=12ba",
        "scheduler.t_warmup=2ba",
        "save_interval=3ba",
        "eval_interval=12ba",
        "console_log_interval=1ba",
        f"code_paths=[{CALLBACKS},{PROBE},{JSONL_LOGGER}]",
        f"loggers.jsonl.path={folder}/metrics-rank{{rank}}.jsonl",
        # listed before the guard: the overflow spoils the loss it reads, the probe writes before it stops the run
        f"callbacks.spike_test_overflow={{at: {BURST}, ranks: [1]}}",
        f"callbacks.spike_test_fsdp_probe={{out: {folder}/probe, watch: [6, 7, 8]}}",
        # threshold 50: only the non-finite burst skips, whatever the z-scores of clean batches
        "callbacks.spike_guard={threshold: 50, grad_norm: true, window: 8, min_history: 4, max_skips: 2, "
        "rollback: {skip_batches: 1}}",
    ]


def _run(demo_data: Path, folder: Path, *extra: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    folder.mkdir(parents=True, exist_ok=True)
    statuses = folder / "status"
    status, output = launch_and_wait(
        YAML, [*_overrides(demo_data, folder), *extra], nproc=2, log=folder / "run.log", env=env, rank_status=statuses
    )
    assert rank_statuses(statuses, 2) == {0: "3", 1: "3"}, output[-3000:]  # each rank stopped by the guard
    return status, output


@pytest.fixture(scope="module")
def runs(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, int, str]]:
    """The burst run under FSDP2 and under DDP: folder, launcher status, output."""
    fsdp, ddp = tmp_path_factory.mktemp("fsdp"), tmp_path_factory.mktemp("ddp")
    return {
        "fsdp": (fsdp, *_run(demo_data, fsdp, env=FSDP2)),
        "ddp": (ddp, *_run(demo_data, ddp, "fsdp_config=null")),
    }


def _probe(folder: Path, rank: int) -> dict[str, Any]:
    return json.loads((folder / "probe" / f"rank{rank}.json").read_text())


def _guard_metrics(folder: Path, rank: int) -> dict[str, dict[int, float]]:
    return read_metrics(folder / f"metrics-rank{rank}.jsonl", ("spike_guard/",), last=True)


@pytest.mark.launcher
def test_the_guards_gradient_norm_under_fsdp2_is_the_whole_models(runs: dict[str, tuple[Path, int, str]]) -> None:
    (fsdp, status, output), (ddp, _, ddp_output) = runs["fsdp"], runs["ddp"]
    assert status == 3, output[-3000:]
    probe = _probe(fsdp, 0)
    assert probe["sharded"] and not _probe(ddp, 0)["sharded"]  # DTensor gradients under FSDP2, plain under DDP
    guard = _guard_metrics(fsdp, 0)
    assert guard == _guard_metrics(fsdp, 1)  # bitwise: both ranks decided on the same numbers
    norms = guard["spike_guard/grad_norm"]
    # lr_monitor's step b is batch b (0-indexed) here: the guard logs at AFTER_TRAIN_BATCH, before the timestamp moves
    accepted = list(range(7))
    assert sorted(norms)[:7] == accepted
    ddp_norms = _guard_metrics(ddp, 0)["spike_guard/grad_norm"]
    # FSDP2 reduce-scatters gradients with ReduceOp.AVG, which gloo (torch 2.7) sums: on CPU its gradients are the
    # world size times DDP's (pytorch/pytorch#162338), and so is their norm; 1 where the backend averages (NCCL)
    factor = probe["avg_factor"]
    assert factor in (1.0, 2.0)
    for b in accepted:
        torch_norm = float(probe["norms"][str(b)])
        assert norms[b] == pytest.approx(torch_norm, rel=1e-6), b  # torch's whole-model norm of the DTensors
        assert norms[b] == pytest.approx(factor * ddp_norms[b], rel=1e-5), b  # the unsharded gradient's, under DDP
        assert norms[b] > 0
    for b in BURST:
        assert math.isnan(norms[b]) or math.isinf(norms[b]), b  # the spoilt batches: non-finite
    assert "Traceback" not in output and "Traceback" not in ddp_output


@pytest.mark.launcher
def test_a_skipped_step_leaves_every_ranks_shards_bitwise_and_both_ranks_decide_alike(
    runs: dict[str, tuple[Path, int, str]],
) -> None:
    fsdp, status, output = runs["fsdp"]
    assert status == 3, output[-3000:]
    rank0, rank1 = _probe(fsdp, 0), _probe(fsdp, 1)
    assert rank0["decisions"] == rank1["decisions"]
    skipped = [batch for batch, skip, _ in rank0["decisions"] if skip]
    assert skipped == BURST  # rank 1's overflow, skipped on rank 0 too
    for probe in (rank0, rank1):
        assert probe["unchanged"] == {"6": False, "7": True, "8": True}  # trained, skipped, skipped (the stop)
    assert re.findall(r"spike_guard: skipped batch (\d+): loss inf .*reason non-finite", output) == ["8", "9"]
    assert "spike_guard: stopped at batch 9: 2 consecutive skips (max_skips 2)" in output, output[-3000:]


@pytest.mark.launcher
def test_the_rollback_continues_from_the_sharded_checkpoint(
    runs: dict[str, tuple[Path, int, str]], demo_data: Path
) -> None:
    fsdp, status, output = runs["fsdp"]
    assert status == 3, output[-3000:]
    checkpoints = fsdp / "checkpoints"
    assert sorted(p.name for p in checkpoints.glob("ep0-ba*")) == ["ep0-ba3", "ep0-ba6"]  # none of batch 9
    before = {str(p.relative_to(fsdp)): p.stat().st_mtime_ns for p in checkpoints.rglob("*")}
    words = shlex.split(re.search(r"; run: (.*)", output).group(1))  # type: ignore[union-attr]
    exe = REPO / words[0] if "/" in words[0] else shutil.which(words[0])  # the run's cwd is REPO
    assert exe and os.path.samefile(exe, COMPOSER) and words[1:3] == ["train.py", "YOUR.yaml"], words  # it pastes
    args = words[3:]
    assert f"load_path={(checkpoints / 'ep0-ba6').resolve()}" in args, args  # the folder: every rank's shards
    assert "callbacks.spike_guard.skip_data.batches=4" in args, args  # batches 6..8 read, and 1 more
    # the overflow is tied to batch numbers, not to data: the continuation has none
    extra = ["callbacks.spike_test_overflow={at: []}", f"callbacks.spike_test_fsdp_probe.out={fsdp}/probe-cont", *args]
    status, again = launch_and_wait(
        YAML, [*_overrides(demo_data, fsdp), *extra], nproc=2, log=fsdp / "continuation.log", env=FSDP2
    )
    assert status == 0, again[-3000:]
    assert "spike_guard: skipping 4 data batches (64 samples) after batch 6" in again, again[-3000:]
    assert re.findall(r"\[batch=(\d+)/12\]", again) == [str(b) for b in range(7, 13)], again[-3000:]
    continuation = fsdp / "checkpoints-rollback-ba6"
    assert (continuation / "ep0-ba12" / ".metadata").is_file()
    assert sorted(p.name for p in (continuation / "ep0-ba12").glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]
    assert {str(p.relative_to(fsdp)): p.stat().st_mtime_ns for p in checkpoints.rglob("*")} == before
