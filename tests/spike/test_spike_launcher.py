"""The guard through the stock entry point, ``composer train.py`` with llm-foundry's MPT (yamls/tiny-wsd.yaml).

* a bad key of the guard with ``composer -n 2``: one line naming it, exit 2, no batch trained, even when rank 1 meets
  the refusal first (rank 0 delayed: it used to make the launcher SIGTERM rank 0 and exit 241);
* the same burst on rank 1 alone with ``composer -n 2``: both ranks skip the same batches and both end with the
  stop's status 3 (each rank's own status, not only the launcher's);
* a burst (the loss of batches 5-7 made inf, as an fp overflow does, by ``tests/spike/launcher_callbacks.py`` loaded
  through ``code_paths:``) with the guard on: the guard's loss is Composer's ``loss/train/total`` at every accepted
  batch (2 micro-batches each), the three batches skipped, the run stopped with status 3 and the continuation written;
* that continuation, launched with its printed arguments, SIGKILLed at the end of its batch 8, then launched again with
  the same command: it resumes from its own latest checkpoint (batch 6), not from the rollback's (batch 4), skips no
  data a second time, and ends at batch 12; the stopped run's folder is never touched.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
from pathlib import Path

import pytest

from tests.support.launcher import COMPOSER, REPO
from tests.support.multirank import launch_and_wait, rank_statuses

YAML = REPO / "yamls" / "tiny-wsd.yaml"
CALLBACKS = REPO / "tests" / "spike" / "launcher_callbacks.py"


def _launch(
    overrides: list[str],
    log: Path,
    *,
    nproc: int = 1,
    env: dict[str, str] | None = None,
    rank_status: Path | None = None,
) -> tuple[int, str]:
    return launch_and_wait(YAML, overrides, nproc=nproc, log=log, env=env, rank_status=rank_status)


def _base(demo_data: Path, folder: Path) -> list[str]:
    return [
        f"variables.data_local={demo_data}",
        f"save_folder={folder}/checkpoints",
        "run_name=burst",
        "max_duration=12ba",
        "scheduler.t_warmup=2ba",
        "save_interval=2ba",
        "eval_interval=12ba",
        "console_log_interval=1ba",
        "device_train_microbatch_size=8",
        f"code_paths=[{CALLBACKS}]",
    ]


@pytest.mark.launcher
def test_bad_guard_key_through_composer_n2_is_one_line_and_exit_2(demo_data: Path, tmp_path: Path) -> None:
    """Rank 0 delayed 4 s: rank 1 refuses first, and still the launcher exits 2 with rank 0's one line."""
    status, output = _launch(
        [*_base(demo_data, tmp_path), "callbacks.spike_guard={threshold: 0}"],
        tmp_path / "bad.log",
        nproc=2,
        env={"SPIKE_TEST_SLOW_RANK0": "4"},
    )
    assert status == 2, output[-3000:]
    errors = [line for line in output.splitlines() if line.startswith("foundry-ext: error:")]
    assert errors == ["foundry-ext: error: callbacks.spike_guard.threshold: 0 is out of range; expected a number > 0"]
    assert "Traceback" not in output and "[batch=" not in output, output[-3000:]
    codes = dict(re.findall(r"Global rank (\d+) \(PID \d+\) exited with code (-?\d+)", output))
    assert codes.get("0") == "2", output[-3000:]  # rank 0 ended first, by its own refusal
    assert set(codes.values()) <= {"2", "143", "-15"}, output[-3000:]  # the others: their own refusal, or the launcher


@pytest.mark.launcher
def test_a_burst_on_rank_1_alone_stops_both_ranks_with_status_3(demo_data: Path, tmp_path: Path) -> None:
    """Rank 1's loss is inf at batches 5-7, rank 0's is finite: the guard decides on the loss reduced over the ranks,
    so both skip batches 6-8 and both stop after the third skip with the stop's status, 3."""
    statuses = tmp_path / "status"
    status, output = _launch(
        [
            *_base(demo_data, tmp_path),
            "callbacks.spike_test_overflow={at: [5, 6, 7], ranks: [1]}",
            "callbacks.spike_guard={window: 8, min_history: 4, max_skips: 3}",
        ],
        tmp_path / "burst2.log",
        nproc=2,
        rank_status=statuses,
    )
    assert rank_statuses(statuses, 2) == {0: "3", 1: "3"}, output[-3000:]
    assert status == 3, output[-3000:]
    skipped = re.findall(r"spike_guard: skipped batch (\d+): loss inf .*reason non-finite", output)
    assert skipped == ["6", "7", "8"], output[-3000:]  # rank 0's console: it skipped rank 1's bad batches too
    assert "spike_guard: stopped at batch 8: 3 consecutive skips (max_skips 3)" in output, output[-3000:]
    assert "Traceback" not in output, output[-3000:]


@pytest.fixture(scope="module")
def burst(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], int, str]:
    folder = tmp_path_factory.mktemp("burst")
    overrides = [
        *_base(demo_data, folder),
        "callbacks.spike_test_overflow={at: [5, 6, 7]}",  # before the guard: it reads the spoilt loss
        "callbacks.spike_guard={window: 8, min_history: 4, max_skips: 3, rollback: {skip_batches: 2}}",
        "callbacks.spike_test_probe={}",
        "callbacks.spike_test_kill={}",
    ]
    status, output = _launch(overrides, folder / "burst.log")
    return folder, overrides, status, output


@pytest.mark.launcher
def test_mpt_burst_is_skipped_on_composers_loss_and_stops_with_the_continuation(
    burst: tuple[Path, list[str], int, str],
) -> None:
    folder, _, status, output = burst
    assert status == 3, output[-3000:]
    probes = re.findall(r"spike_test: batch (\d+) guard (\S+) composer (\S+)", output)
    assert [int(b) for b, _, _ in probes] == [1, 2, 3, 4, 5]  # accepted batches; the first gives no z-score yet
    for _, guard, composer in probes:  # the batch's loss over its 2 micro-batches, as Composer reduces it
        assert math.isclose(float(guard), float(composer), rel_tol=1e-6), (guard, composer)
    skipped = re.findall(r"spike_guard: skipped batch (\d+): loss inf .*reason non-finite", output)
    assert skipped == ["6", "7", "8"], output[-3000:]
    assert "spike_guard: stopped at batch 8: 3 consecutive skips (max_skips 3); rollback written to" in output
    checkpoints = sorted(p.name for p in (folder / "checkpoints").glob("ep*-ba*-rank0.pt"))
    assert checkpoints == ["ep0-ba2-rank0.pt", "ep0-ba4-rank0.pt", "ep0-ba6-rank0.pt"]  # none of batch 8
    assert (folder / "spike_guard-rollback-ba4.yaml").is_file()


@pytest.mark.launcher
def test_continuation_killed_and_relaunched_resumes_from_its_own_checkpoint(
    burst: tuple[Path, list[str], int, str],
) -> None:
    folder, overrides, status, output = burst
    assert status == 3, output[-3000:]
    before = {p.name: p.stat().st_mtime_ns for p in (folder / "checkpoints").iterdir()}
    words = shlex.split(re.search(r"; run: (.*)", output).group(1))  # type: ignore[union-attr]
    exe = REPO / words[0] if "/" in words[0] else shutil.which(words[0])  # the run's cwd is REPO
    assert exe and os.path.samefile(exe, COMPOSER) and words[1:3] == ["train.py", "YOUR.yaml"], words  # it pastes
    args = words[3:]
    assert "autoresume=true" in args and "callbacks.spike_guard.skip_data.batches=6" in args, args
    # the injected overflow is tied to batch numbers, not to data: the continuation has none
    command = [*overrides, "callbacks.spike_test_overflow={at: []}", *args]
    killed_status, killed = _launch(command, folder / "killed.log", env={"SPIKE_TEST_KILL_AT": "8"})
    assert killed_status != 0, killed[-3000:]
    assert "spike_guard: skipping 6 data batches (96 samples) after batch 4" in killed, killed[-3000:]
    assert re.findall(r"\[batch=(\d+)/12\]", killed) == ["5", "6", "7"], killed[-3000:]  # killed before batch 8's
    assert "spike_test: batch 8 " in killed, killed[-3000:]  # console line, after batch 8 was trained
    continuation = folder / "checkpoints-rollback-ba4"
    assert sorted(p.name for p in continuation.glob("ep*-rank0.pt")) == ["ep0-ba6-rank0.pt"]

    status, again = _launch(command, folder / "again.log")  # the same command
    assert status == 0, again[-3000:]
    assert "spike_guard: skipping" not in again  # the data skip applies to the load at batch 4 only
    assert re.findall(r"\[batch=(\d+)/12\]", again) == ["7", "8", "9", "10", "11", "12"], again[-3000:]
    assert (continuation / "ep0-ba12-rank0.pt").is_file()
    assert {p.name: p.stat().st_mtime_ns for p in (folder / "checkpoints").iterdir()} == before
