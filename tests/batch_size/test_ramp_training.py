"""Batch-size warmup in real ``composer train.py`` runs of yamls/tiny-batch-ramp.yaml (8 -> 16 -> 32 samples, sqrt).

* on 1 and 2 ranks, the global batch of every step (from Composer's own sample counter) and the LR the optimizer
  received (``lr_monitor``, at full precision through the JSONL logger) are exactly the preview's
  (``foundry-ext validate --steps``, :func:`foundry_ext.preview.batch_size.ramp_steps`);
* on 2 ranks, a run SIGKILLed twice (once as soon as its checkpoint at the stage boundary, batch 8, is complete, then
  while it writes batch 10's, inside the last stage) and relaunched with the same command ends bitwise equal to the
  uninterrupted run: the final checkpoint (weights, optimizer, timestamp, data position), every LR and every eval
  loss; on 1 rank the same, killed while it writes the boundary's checkpoint (it resumes in stage 1, at batch 6);
* ``foundry-ext anneal`` from the 1-rank run's batch 6 (stage 1) with ``--decay 8192tok`` trains batches 6-8 (16, 16,
  then 32 samples: across the stage change) with the batches and the LRs of the planned run that decays over those
  tokens.

One uninterrupted run per rank count, shared by the module; the 2-rank chain is three launches, the 1-rank one two,
the branch one.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from foundry_ext.config.train_yaml import load_train_config
from foundry_ext.preview.batch_size import ramp_steps
from tests.support.launcher import REPO
from tests.support.multirank import (
    FAULT_HOOKS,
    JSONL_LOGGER,
    checkpoint_differences,
    kill,
    launch,
    launch_and_wait,
    lost_shm_race,
    read_metrics,
    same_bits,
)

pytestmark = pytest.mark.slow

RAMP_YAML = REPO / "yamls" / "tiny-batch-ramp.yaml"
PREFIXES = ("lr-", "metrics/eval/", "time/sample", "time/token", "batch_size/")
LR = "lr-DecoupledAdamW/group0"
EVAL = "metrics/eval/LanguageCrossEntropy"


def overrides(data: Path, run_dir: Path) -> list[str]:
    """The YAML as shipped, a checkpoint every 4096 tokens (batches 4, 6, 8, 9, ... 13), autoresume and the guard."""
    return [
        f"variables.data_local={data}",
        f"save_folder={run_dir}/checkpoints",
        "save_interval=4096tok",
        "autoresume=true",
        "save_overwrite=false",
        "callbacks.checkpoint_guard={}",
        f"code_paths=[{JSONL_LOGGER},{FAULT_HOOKS}]",
        f"loggers.jsonl.path={run_dir}/metrics-rank{{rank}}.jsonl",
    ]


def train(data: Path, run_dir: Path, nproc: int) -> Path:
    run_dir.mkdir(parents=True)
    status, output = launch_and_wait(RAMP_YAML, overrides(data, run_dir), nproc=nproc, log=run_dir / "log", timeout=900)
    assert status == 0, output[-4000:]
    return run_dir


@pytest.fixture(scope="module")
def reference_2(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train(demo_data, tmp_path_factory.mktemp("ramp") / "ref2", 2)


@pytest.fixture(scope="module")
def reference_1(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train(demo_data, tmp_path_factory.mktemp("ramp") / "ref1", 1)


def check_against_preview(run_dir: Path, data: Path) -> None:
    metrics = read_metrics(run_dir / "metrics-rank0.jsonl", PREFIXES)
    _, steps = ramp_steps(load_train_config(str(RAMP_YAML), [f"variables.data_local={data}"]))
    samples = metrics["time/sample"]  # Composer's count of the samples trained before batch k, summed over ranks
    assert [samples[s.batch] for s in steps] == [s.sample for s in steps]
    end = steps[-1].sample + steps[-1].size
    assert end == 256 and {k: v for k, v in samples.items() if k >= len(steps)} in ({}, {len(steps): end})
    assert [metrics["time/token"][s.batch] for s in steps] == [s.token for s in steps]
    assert [metrics["batch_size/global"][s.batch] for s in steps] == [s.size for s in steps]
    # lr_monitor logs at the end of batch k - 1, at timestamp k: the LR batch k trains with (batch 0's is not logged)
    lrs = metrics[LR]
    for s in steps[1:]:
        assert same_bits(lrs[s.batch], s.lr), (s, lrs[s.batch])


def test_one_rank_trains_the_previewed_batches_and_lrs(reference_1: Path, demo_data: Path) -> None:
    check_against_preview(reference_1, demo_data)


def test_two_ranks_train_the_previewed_batches_and_lrs(reference_2: Path, demo_data: Path) -> None:
    check_against_preview(reference_2, demo_data)
    # each rank trained half of every global batch: rank 1 logged the same global counter
    rank1 = read_metrics(reference_2 / "metrics-rank1.jsonl", PREFIXES)
    assert rank1["time/sample"] == read_metrics(reference_2 / "metrics-rank0.jsonl", PREFIXES)["time/sample"]


def latest_batch(folder: Path) -> int:
    link = folder / "latest-rank0.pt"
    try:
        name = os.readlink(link)
    except OSError:
        return -1
    return int(Path(name).name.split("-ba")[1].split("-")[0])


def shm_clash(output: str) -> bool:
    """A start that died setting up a StreamingDataset because another job's /dev/shm names got in its way."""
    return lost_shm_race(output) or "was not registered by local leader" in output


# each save spends ~1 s writing (fault_hooks): a kill right after `latest` moves lands inside the next save
SLOW_SAVES = {"FAULT_WRITE_DELAY": "0.05"}


def kill_when(reached: Callable[[], bool], data: Path, run_dir: Path, nproc: int, log: Path) -> None:
    """Launch (or relaunch: autoresume) the run and SIGKILL it as soon as ``reached()``."""
    proc = launch(RAMP_YAML, overrides(data, run_dir), nproc=nproc, log=log, env=SLOW_SAVES)
    deadline = time.monotonic() + 900
    while not reached():
        if proc.poll() is not None and shm_clash(log.read_text()):
            proc = launch(RAMP_YAML, overrides(data, run_dir), nproc=nproc, log=log, env=SLOW_SAVES)  # once more
        assert proc.poll() is None, log.read_text()[-4000:]
        assert time.monotonic() < deadline, "no checkpoint"
        time.sleep(0.05)
    kill(proc)
    folder = run_dir / "checkpoints"
    assert not (folder / "ep0-ba13-rank0.pt").exists() or latest_batch(folder) < 13, "the run ended first"


def relaunch_ends_as(reference: Path, data: Path, run_dir: Path, nproc: int, incomplete: str) -> None:
    """The same command once more ends bitwise equal to ``reference``: the final checkpoint, every logged step."""
    log = run_dir / "last"
    status, output = launch_and_wait(RAMP_YAML, overrides(data, run_dir), nproc=nproc, log=log, env=SLOW_SAVES)
    assert status == 0, output[-4000:]
    assert f"{incomplete} is incomplete" in output, output[-4000:]  # the guard's line: killed inside the write
    # everything but the RNG state, which no resumed run restores mid-epoch with a StreamingDataset (Composer reseeds
    # at load; tests/resume/test_checkpoint_faults.py pins that down): nothing draws from it while training here
    ours, theirs = run_dir / "checkpoints" / "ep0-ba13-rank0.pt", reference / "checkpoints" / "ep0-ba13-rank0.pt"
    assert checkpoint_differences(ours, theirs, ignore=("/rng",)) == []
    # every step logged before a kill and again after it agrees bitwise (read_metrics), and with the reference
    for rank in range(nproc):
        got = read_metrics(run_dir / f"metrics-rank{rank}.jsonl", PREFIXES)
        want = read_metrics(reference / f"metrics-rank{rank}.jsonl", PREFIXES)
        for name in (LR, EVAL, "time/sample", "batch_size/global"):
            assert got[name] == want[name], name


@pytest.mark.kills_mid_run
def test_killed_twice_and_relaunched_ends_bitwise_equal(reference_2: Path, demo_data: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "chain"
    run_dir.mkdir()
    folder = run_dir / "checkpoints"
    # kill 1: once batch 8's checkpoint (the stage boundary: batch 8 is stage 2's first) is complete; the relaunch
    # resumes exactly at the boundary. kill 2: while batch 10's checkpoint is being written (its file partly on disk,
    # `latest` still batch 9's): checkpoint_guard quarantines it and the relaunch resumes inside stage 2, at batch 9
    kill_when(lambda: latest_batch(folder) >= 8, demo_data, run_dir, 2, run_dir / "log0")
    kill_when(lambda: (folder / "ep0-ba10-rank0.pt").exists(), demo_data, run_dir, 2, run_dir / "log1")
    assert latest_batch(folder) == 9, "batch 10's checkpoint was complete before the kill"
    relaunch_ends_as(reference_2, demo_data, run_dir, 2, "ep0-ba10-rank0.pt")


@pytest.mark.kills_mid_run
def test_one_rank_killed_writing_the_stage_boundary_and_relaunched_ends_bitwise_equal(
    reference_1: Path, demo_data: Path, tmp_path: Path
) -> None:
    """``composer -n 1``, SIGKILLed while batch 8's checkpoint (the boundary: batch 8 is stage 2's first) is being
    written: the guard quarantines it, the relaunch resumes inside stage 1 at batch 6 and trains across the stage
    change again, ending bitwise equal to the uninterrupted 1-rank run."""
    run_dir = tmp_path / "one"
    run_dir.mkdir()
    folder = run_dir / "checkpoints"
    kill_when(lambda: (folder / "ep0-ba8-rank0.pt").exists(), demo_data, run_dir, 1, run_dir / "log0")
    assert latest_batch(folder) == 6, "batch 8's checkpoint was complete before the kill"
    relaunch_ends_as(reference_1, demo_data, run_dir, 1, "ep0-ba8-rank0.pt")


def test_a_resume_on_another_number_of_ranks_is_refused_in_one_line(reference_1: Path, tmp_path: Path) -> None:
    """The 1-rank run's checkpoint at batch 9 loaded by 2 ranks: one line, exit 2, before the first batch."""
    status, output = launch_and_wait(
        RAMP_YAML,
        [
            f"save_folder={tmp_path}/checkpoints",
            f"load_path={reference_1}/checkpoints/ep0-ba9-rank0.pt",
            f"code_paths=[{JSONL_LOGGER}]",
            f"loggers.jsonl.path={tmp_path}/metrics-rank{{rank}}.jsonl",
        ],
        nproc=2,
        log=tmp_path / "log",
    )
    assert status != 0
    lines = [line for line in output.splitlines() if line.startswith("foundry-ext: error: ")]
    assert lines == [
        "foundry-ext: error: callbacks.batch_size_schedule: the checkpoint was trained on 1 ranks, this run has 2: "
        "resuming a batch-size ramp on another number of ranks is not supported; relaunch on the checkpoint's"
    ], output[-3000:]
    assert (
        not (tmp_path / "metrics-rank0.jsonl").exists()
        or "time/sample" not in (tmp_path / "metrics-rank0.jsonl").read_text()
    )


def test_inspect_shows_the_stage_of_a_checkpoint(reference_1: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """ep0-ba4 is at the first boundary (sample 32: the next batch is 16); ep0-ba9 inside the last stage."""
    from foundry_ext.cli import main

    expected = {
        4: "stage 1 of 0-2: the next batch, from sample 32, is 16 samples, LR x 1.41421 (lr_scaling sqrt)",
        9: "stage 2 of 0-2: the next batch, from sample 128, is 32 samples, LR x 2 (lr_scaling sqrt)",
    }
    for batch, row in expected.items():
        assert main(["inspect", str(reference_1 / "checkpoints" / f"ep0-ba{batch}-rank0.pt")]) == 0
        out = capsys.readouterr().out
        assert f"batch size   {row}\n" in out, out
        assert "ramp: 8 from sample 0, 16 from sample 32, 32 from sample 96; saved on 1 rank(s)" in out


def test_anneal_from_a_ramped_checkpoint_trains_the_planned_decay(
    reference_1: Path, demo_data: Path, tmp_path: Path
) -> None:
    """Batch 6 of the 1-rank run is in stage 1 (16 samples, LR x sqrt 2) at the peak; ``--decay 8192tok`` is batches
    6 and 7 (2048 tokens each) and batch 8 (stage 2: 4096 tokens). The planned run: the same YAML with
    ``max_duration=16384tok`` and ``t_decay=8192tok`` (its steps are the preview's, which the tests above hold to a
    real run's bits)."""
    from foundry_ext.cli import main

    branch = tmp_path / "branch.yaml"
    data = f"variables.data_local={demo_data}"
    source = reference_1 / "checkpoints" / "ep0-ba6-rank0.pt"
    argv = ["anneal", str(source), str(RAMP_YAML), data, f"save_folder={tmp_path}/checkpoints", "--decay", "8192tok"]
    assert main([*argv, "--out", str(branch)]) == 0
    logged = [f"code_paths=[{JSONL_LOGGER}]", f"loggers.jsonl.path={tmp_path}/metrics-rank{{rank}}.jsonl"]
    status, output = launch_and_wait(branch, logged, nproc=1, log=tmp_path / "log")
    assert status == 0, output[-4000:]
    got = read_metrics(tmp_path / "metrics-rank0.jsonl", PREFIXES)
    planned_cfg = [data, "max_duration=16384tok", "scheduler.t_decay=8192tok", "scheduler.alpha_f=0"]
    _, planned = ramp_steps(load_train_config(str(RAMP_YAML), planned_cfg))
    assert [s.size for s in planned[6:]] == [16, 16, 32]  # the decay crosses the stage change
    assert got["batch_size/global"] == {s.batch: s.size for s in planned[6:]}
    assert {b: v for b, v in got["time/sample"].items() if b < 9} == {s.batch: s.sample for s in planned[6:]}
    # batch 6 trains with the LR the checkpoint holds (the stable run logged it); 7 and 8 with the branch's decay
    assert same_bits(read_metrics(reference_1 / "metrics-rank0.jsonl", PREFIXES)[LR][6], planned[6].lr)
    assert sorted(got[LR])[:2] == [7, 8]
    for s in planned[7:]:
        assert same_bits(got[LR][s.batch], s.lr), (s, got[LR][s.batch])
    assert planned[8].multiplier == 0.75  # inside the decay: (10240 - 8192) / 8192 of it done at batch 7's end
