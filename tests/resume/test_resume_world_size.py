"""Resuming on a different number of ranks (2 -> 1 and 1 -> 2) through the real launcher (docs/resume.md).

``yamls/tiny-resume.yaml`` for 18 batches (evaluations at 0, 3, ..., 18; the plateau cuts at 9 and 15), checkpoint
at batch 10, ``global_train_batch_size`` 16 on either world size, ``eval_subset_num_batches=-1``:

* U2 and U1: uninterrupted on 2 and on 1 rank;
* R21: ``composer -n 1`` resumed from U2's ``ep0-ba10-rank0.pt`` (``load_path``); R12: ``composer -n 2`` from U1's.

Asserted: the resumed run's LR at every batch and its plateau state (scale, best, bad evaluations, cuts, cooldown)
at every evaluation and in its final checkpoint equal the run it was saved from, bitwise. The eval losses agree to
a few float32 ulps, not bitwise: training on another world size rounds differently (the weights end up a few ulps
apart), and the eval metric sums in another grouping. On *identical* weights (the initial ones, ``eval_first``),
``eval_subset_num_batches=-1`` (all 256 validation samples on any world size) gives losses one ulp apart at most,
while the YAML's ``1`` (each rank evaluates its own first batch: 16 samples on one rank, 32 on two) gives values
thousands of ulps apart (two more short runs).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import torch

from foundry_ext.checkpoint import load_checkpoint_safely
from tests.support.launcher import REPO
from tests.support.multirank import JSONL_LOGGER, launch_and_wait, read_metrics, same_bits

YAML = REPO / "yamls" / "tiny-resume.yaml"
LR = "lr-DecoupledAdamW/group0"
EVAL = "metrics/eval/LanguageCrossEntropy"
PLATEAU_METRICS = ("lr_plateau/scale", "lr_plateau/best", "lr_plateau/num_bad_evals", "lr_plateau/cuts")


def _run(tmp_path: Path, name: str, nproc: int, data: Path, *extra: str) -> Path:
    run_dir = tmp_path / name
    overrides = [
        f"variables.data_local={data}",
        f"save_folder={run_dir}/checkpoints",
        f"code_paths=[{JSONL_LOGGER}]",
        f"loggers.jsonl.path={run_dir}/metrics-rank{{rank}}.jsonl",
        "max_duration=18ba",
        "save_interval=10ba",
        "eval_first=true",
        *extra,
    ]
    log = tmp_path / f"{name}.log"
    start = time.perf_counter()
    status, output = launch_and_wait(YAML, overrides, nproc=nproc, log=log, timeout=900)
    assert status == 0, f"{name}:\n{output[-4000:]}"
    print(f"{name}: {time.perf_counter() - start:.0f}s")
    logs = [read_metrics(run_dir / f"metrics-rank{r}.jsonl") for r in range(nproc)]
    assert all(other == logs[0] for other in logs), f"{name}: the ranks logged different values"
    return run_dir


def _plateau(checkpoint: Path) -> dict:
    return load_checkpoint_safely(checkpoint)["state"]["callbacks"]["ReduceLROnPlateauCallback"]["plateau"]


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_world_size_change_continues_schedule_and_plateau_exactly(demo_data: Path, tmp_path: Path) -> None:
    every_sample = "eval_subset_num_batches=-1"
    u2 = _run(tmp_path, "u2", 2, demo_data, every_sample)
    u1 = _run(tmp_path, "u1", 1, demo_data, every_sample)
    r21 = _run(tmp_path, "r21", 1, demo_data, every_sample, f"load_path={u2}/checkpoints/ep0-ba10-rank0.pt")
    r12 = _run(tmp_path, "r12", 2, demo_data, every_sample, f"load_path={u1}/checkpoints/ep0-ba10-rank0.pt")

    for saved_by, resumed in ((u2, r21), (u1, r12)):
        want, got = read_metrics(saved_by / "metrics-rank0.jsonl"), read_metrics(resumed / "metrics-rank0.jsonl")
        assert sorted(got[LR]) == list(range(11, 19))  # batch b is logged at step b + 1
        for name in (LR, *PLATEAU_METRICS):
            steps = sorted(s for s in want[name] if s > 10)
            assert sorted(got[name]) == steps, name
            bad = {s: (got[name][s], want[name][s]) for s in steps if not same_bits(got[name][s], want[name][s])}
            assert not bad, f"{resumed.name}: {name} differs from {saved_by.name} at {bad}"
        assert got["lr_plateau/cuts"][15] == 2 and got["lr_plateau/scale"][15] == 0.25  # a cut after the resume
        final_want = _plateau(saved_by / "checkpoints" / "ep0-ba18-rank0.pt")
        final_got = _plateau(resumed / "checkpoints" / "ep0-ba18-rank0.pt")
        assert final_got.pop("last_value") != final_want.pop("last_value")  # an eval loss: see below
        assert final_got == final_want  # scale, best, num_bad_evals, cooldown_counter, cuts, num_evals

        # The eval losses after the resume agree to float32 rounding, not bitwise (measured: equal at 12 and 15,
        # 2 ulps apart at 18): the weights were trained, and the losses summed, in another order.
        for step in (12, 15, 18):
            assert abs(got[EVAL][step] - want[EVAL][step]) <= 8 * _ulp(want[EVAL][step]), (step, got[EVAL], want[EVAL])
        weights = [
            load_checkpoint_safely(run / "checkpoints" / "ep0-ba18-rank0.pt")["state"]["model"]
            for run in (saved_by, resumed)
        ]
        differ = [k for k in weights[0] if not torch.equal(weights[0][k], weights[1][k])]
        assert differ, "training on another world size gave bitwise identical weights: update docs/resume.md"

    # What eval_subset_num_batches does, on identical weights (the initial ones, evaluated first):
    # with -1 both world sizes evaluate the same 256 samples, and the losses agree to float32 rounding (measured: one
    # ulp apart; the metric's float32 sum is accumulated per rank, then all-reduced: another grouping) ...
    first = [read_metrics(run / "metrics-rank0.jsonl")[EVAL][0] for run in (u1, u2)]
    assert abs(first[0] - first[1]) <= 2 * _ulp(first[0]), first
    # ... with 1 (the YAML's value) each rank evaluates its own first batch: 16 samples on 1 rank, 32 on 2
    one = [_run(tmp_path, f"e{n}", n, demo_data, "max_duration=1ba", "save_folder=null") for n in (1, 2)]
    first = [read_metrics(run / "metrics-rank0.jsonl")[EVAL][0] for run in one]
    assert abs(first[0] / first[1] - 1) > 1e-4, first  # thousands of ulps: different samples


def _ulp(value: float) -> float:
    """The spacing of float32 numbers at ``value``: the metric is a float32."""
    return float(np.spacing(np.float32(abs(value))))
