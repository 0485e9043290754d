"""Resuming on a different number of ranks (2 -> 1 and 1 -> 2) through the real launcher (docs/resume.md).

``yamls/tiny-plateau.yaml`` for 18 batches (evaluations at 0, 3, ..., 18; the plateau cuts at 9 and 15), checkpoint
at batch 10, ``global_train_batch_size`` 16 on either world size, ``eval_subset_num_batches=-1``:

* U2 and U1: uninterrupted on 2 and on 1 rank;
* R21: ``composer -n 1`` resumed from U2's ``ep0-ba10-rank0.pt`` (``load_path``); R12: ``composer -n 2`` from U1's.

Asserted: the resumed run's LR at every batch and its plateau state (scale, best, bad evaluations, cuts, cooldown)
at every evaluation and in its final checkpoint equal the run it was saved from, bitwise. The eval losses are not
asserted bitwise: training on another world size rounds differently (the weights end up a few float32 ulps apart),
so every later loss differs in its last digits. Two more short runs show what ``eval_subset_num_batches`` does on
*identical* weights (the initial ones, ``eval_first``): with ``-1`` (all 256 validation samples) one and two ranks
give the same loss bitwise; with the YAML's ``1`` they do not, because each rank evaluates its own first batch.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from foundry_ext.checkpoint import load_checkpoint_safely
from tests.launcher import REPO
from tests.multirank import JSONL_LOGGER, launch, read_metrics, same_bits

YAML = REPO / "yamls" / "tiny-plateau.yaml"
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
    proc = launch(YAML, overrides, nproc=nproc, log=log)
    assert proc.wait(timeout=900) == 0, f"{name}:\n{log.read_text()[-4000:]}"
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

        # The eval losses after the resume are close, not bitwise: the weights were trained on another world size.
        for step in (12, 15, 18):
            assert abs(got[EVAL][step] / want[EVAL][step] - 1) < 1e-5, (step, got[EVAL][step], want[EVAL][step])
        weights = [
            load_checkpoint_safely(run / "checkpoints" / "ep0-ba18-rank0.pt")["state"]["model"]
            for run in (saved_by, resumed)
        ]
        differ = [k for k in weights[0] if not torch.equal(weights[0][k], weights[1][k])]
        assert differ, "training on another world size gave bitwise identical weights: update docs/resume.md"

    # What eval_subset_num_batches does, on identical weights (the initial ones, evaluated first):
    # with -1 every sample is evaluated once on any world size, and the loss is the same bitwise ...
    first = [read_metrics(run / "metrics-rank0.jsonl")[EVAL][0] for run in (u1, u2)]
    assert same_bits(*first), first
    # ... with 1 (the YAML's value) each rank evaluates its own first batch: 16 samples on 1 rank, 32 on 2
    one = [_run(tmp_path, f"e{n}", n, demo_data, "max_duration=1ba", "save_folder=null") for n in (1, 2)]
    first = [read_metrics(run / "metrics-rank0.jsonl")[EVAL][0] for run in one]
    assert not same_bits(*first) and abs(first[0] / first[1] - 1) > 1e-4, first
