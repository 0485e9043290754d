"""``reduce_lr_on_plateau`` and ``schedule_resume_check`` under FSDP2 with sharded checkpoints (docs/plateau.md).

``FSDP_VERSION=2 composer -n 2 train.py`` with yamls/tiny-fsdp.yaml whose scheduler is yamls/tiny-resume.yaml's
deterministic plateau (threshold 100 abs, patience 1: evaluations every 3 batches, cuts at batches 9 and 15), 15
batches, a sharded checkpoint every 5 (``ep0-ba5/``, ``ep0-ba10/``: one ``.distcp`` per rank and a ``.metadata``).
The uninterrupted run (module fixture) is the oracle of:

* a run SIGKILLed (every rank, at the end of batch 12) and relaunched with ``autoresume``: it resumes from the
  sharded checkpoint of batch 10 (one cut, a best value, the resume check's description) and the LR of every batch,
  every plateau metric (scale, cuts, best, bad evaluations) and every eval loss, before and after the kill, are
  bitwise the uninterrupted run's, on both ranks; the resume check has nothing to say;
* a run resumed from that checkpoint with ``load_path``, ``optimizer.lr`` halved and
  ``callbacks.schedule_resume_check.reset_lr: true``: the reset is announced and every batch trains at exactly half
  the uninterrupted run's LR, the restored plateau scale and the later cut included.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf as om

from tests.support.fsdp import FSDP_YAML
from tests.support.launcher import REPO
from tests.support.multirank import JSONL_LOGGER, launch_and_wait, read_metrics, same_bits

PLATEAU_YAML = REPO / "yamls" / "tiny-resume.yaml"
KILL = REPO / "tests" / "spike" / "launcher_callbacks.py"  # spike_test_kill: SIGKILL at the end of $SPIKE_TEST_KILL_AT
FSDP2 = {"FSDP_VERSION": "2"}
LR = "lr-DecoupledAdamW/group0"
EVAL = "metrics/eval/LanguageCrossEntropy"
PLATEAU = ("lr_plateau/scale", "lr_plateau/cuts", "lr_plateau/best", "lr_plateau/num_bad_evals")


def _yaml(folder: Path) -> Path:
    """tiny-fsdp.yaml with tiny-resume.yaml's scheduler block (interpolations kept, resolved by llm-foundry)."""
    cfg = om.load(FSDP_YAML)
    cfg.scheduler = om.load(PLATEAU_YAML).scheduler
    path = folder / "tiny-fsdp-plateau.yaml"
    om.save(cfg, path)
    return path


def _overrides(demo_data: Path, folder: Path, metrics: str, *extra: str) -> list[str]:
    return [
        f"variables.data_local={demo_data}",
        f"save_folder={folder}/checkpoints",
        "max_duration=15ba",
        "eval_interval=3ba",
        "save_interval=5ba",
        "console_log_interval=1ba",
        "autoresume=true",
        "save_overwrite=false",
        f"code_paths=[{JSONL_LOGGER},{KILL}]",
        "callbacks.spike_test_kill={}",
        f"loggers.jsonl.path={folder}/{metrics}-rank{{rank}}.jsonl",
        *extra,
    ]


def _launch(yaml: Path, overrides: list[str], log: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    return launch_and_wait(yaml, overrides, nproc=2, log=log, env={**FSDP2, **(env or {})})


@pytest.fixture(scope="module")
def uninterrupted(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    """The uninterrupted run: the derived YAML, its folder, rank 0's metrics (checked equal to rank 1's)."""
    folder = tmp_path_factory.mktemp("plateau-fsdp")
    yaml = _yaml(folder)
    status, output = _launch(yaml, _overrides(demo_data, folder, "full"), folder / "full.log")
    assert status == 0, output[-3000:]
    assert "Prepare FSDP2" in output, output[-3000:]  # fully_shard, not DDP
    ref = read_metrics(folder / "full-rank0.jsonl")
    assert ref == read_metrics(folder / "full-rank1.jsonl"), "the ranks logged different LRs or eval losses"
    assert sorted(ref[EVAL]) == [3, 6, 9, 12, 15]
    assert {b: ref["lr_plateau/cuts"][b] for b in (9, 15)} == {9: 1.0, 15: 2.0}  # one cut before ba10, one after
    checkpoint = folder / "checkpoints" / "ep0-ba10"
    assert sorted(p.name for p in checkpoint.iterdir()) == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    return yaml, folder, ref


def _assert_same(got: dict, ref: dict, steps: dict[str, range]) -> None:
    """``got`` logged each metric at exactly ``ref``'s steps within ``steps[name]``, with bitwise the same values."""
    for name, within in steps.items():
        assert sorted(got[name]) == [s for s in sorted(ref[name]) if s in within], name
        bad = {s: (got[name][s], ref[name][s]) for s in got[name] if not same_bits(got[name][s], ref[name][s])}
        assert not bad, f"{name} differs from the uninterrupted run at {bad}"


@pytest.mark.launcher
def test_plateau_survives_a_kill_and_autoresume_from_a_sharded_checkpoint_bitwise(
    uninterrupted: tuple[Path, Path, dict], demo_data: Path, tmp_path: Path
) -> None:
    yaml, _, ref = uninterrupted
    status, killed = _launch(
        yaml, _overrides(demo_data, tmp_path, "killed"), tmp_path / "killed.log", env={"SPIKE_TEST_KILL_AT": "12"}
    )
    assert status != 0, killed[-3000:]
    # killed at batch 12's BATCH_END, where callbacks run before the console logger prints that batch's block
    assert re.findall(r"\[batch=(\d+)/15\]", killed)[-1] == "11", killed[-3000:]
    assert (tmp_path / "checkpoints" / "ep0-ba10" / ".metadata").is_file()

    status, resumed = _launch(yaml, _overrides(demo_data, tmp_path, "resumed"), tmp_path / "resumed.log")
    assert status == 0, resumed[-3000:]
    assert re.findall(r"\[batch=(\d+)/15\]", resumed) == ["11", "12", "13", "14", "15"], resumed[-3000:]
    assert "cut LR scale 0.5 -> 0.25" in resumed and "cut LR scale 1 -> 0.5" not in resumed, resumed[-3000:]
    assert "changes the LR" not in resumed and "is not used" not in resumed  # the resume check: nothing to say
    # lr_monitor's step b is the LR of 0-indexed batch b, logged at its end; the kill came before batch 12's evaluation
    killed_steps = {LR: range(13), **{name: range(12) for name in (EVAL, *PLATEAU)}}
    for rank in (0, 1):
        _assert_same(read_metrics(tmp_path / f"killed-rank{rank}.jsonl"), ref, killed_steps)
        resumed_steps = {name: range(11, 16) for name in (LR, EVAL, *PLATEAU)}  # the resumed batch ends: 11 to 15
        _assert_same(read_metrics(tmp_path / f"resumed-rank{rank}.jsonl"), ref, resumed_steps)


@pytest.mark.launcher
def test_reset_lr_and_the_resume_check_read_the_sharded_checkpoint(
    uninterrupted: tuple[Path, Path, dict], demo_data: Path, tmp_path: Path
) -> None:
    yaml, folder, ref = uninterrupted
    overrides = _overrides(
        demo_data,
        tmp_path,
        "reset",
        f"load_path={folder}/checkpoints/ep0-ba10",
        "optimizer.lr=1.5e-3",
        "callbacks.schedule_resume_check={reset_lr: true}",
    )
    status, output = _launch(yaml, overrides, tmp_path / "reset.log")
    assert status == 0, output[-3000:]
    # the callback's state came from the sharded checkpoint: without it, reset_lr has no checkpoint to compare with
    assert (
        "callbacks.schedule_resume_check.reset_lr: resuming at batch 10 with this config's optimizer lr 0.0015 instead "
        "of the checkpoint's 0.003: batch 10 trains at 0.00075" in output
    ), output[-3000:]
    got = read_metrics(tmp_path / "reset-rank0.jsonl")
    assert got[LR] == read_metrics(tmp_path / "reset-rank1.jsonl")[LR]
    assert sorted(got[LR]) == list(range(11, 16))
    for b in range(11, 16):  # halving is exact in binary: the plateau scale (0.5, then 0.25 from 15) kept
        assert same_bits(got[LR][b], ref[LR][b] / 2), (b, got[LR][b], ref[LR][b])
    assert got["lr_plateau/cuts"][15] == 2.0
