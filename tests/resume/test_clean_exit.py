"""Early exits end every rank with the intended status: a finished run relaunched, a refusal, and the abort's cause.

A CI run of the suite once saw the relaunch of a finished 2-rank run print the guard's "this run has finished
training" on both ranks, then rank 1 abort (``terminate called without an active exception``, exit -6) and the
launcher exit 241. The cause (:mod:`foundry_ext._exit`): a gloo worker thread waiting for the GIL when the
interpreter is finalised is ended with ``pthread_exit`` inside a ``noexcept`` C++ destructor. Here:

* :func:`test_exit_run_runs_the_exit_handlers_then_ends_without_finalisation`: what ``exit_run`` does, quick (no
  torch): on a launched rank, the exit handlers run and finalisation does not, with the status given;

* :func:`test_a_gloo_thread_waiting_for_the_gil_at_finalisation_aborts_a_plain_exit`: the abort reproduced on every
  run, with torch alone (two processes, a gloo process group): ``sys.exit(0)`` aborts, ``exit_run(0)`` exits 0; a bare
  ``raise RunStopped`` (how ``stop_run`` ended a run before) aborts, ``stop_run`` exits 2;
* :func:`test_a_refusal_at_the_first_call_ends_both_ranks_with_status_2`: ``stop_run`` raised after the process group
  exists (the scheduler's first call, as the Trainer is built), with the real launcher: each rank's own status is 2,
  one line (one launch; ``FOUNDRY_EXT_REFUSALS=N`` for N);
* the real case, ``composer -n 2 train.py`` on a finished run, is
  ``tests/resume/test_finished_relaunch.py::test_the_finished_run_relaunched_exits_0_before_building_the_model``:
  one relaunch per layout (DDP and FSDP2) exits 0 on both ranks before the model is built, without this abort, and
  leaves the folder byte for byte as it was, so a further relaunch meets the same state. It was 20 launches of
  ~15-55 s here when each built the model; the abort they caught once in four CI runs of the suite (~80 launches) is
  reproduced on every run by the gloo test above: more launches buy CI time, not certainty.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from foundry_ext import _exit as clean_exit
from tests.support.launcher import REPO
from tests.support.multirank import free_port, launch_and_wait, rank_statuses

RANK_SCRIPT = REPO / "tests" / "support" / "gil_at_exit.py"
ABORT = "terminate called without an active exception"


# Exits 0 after the other exit handlers, without finalisation (a global's __del__ would print "finalised"), on a
# launched rank; elsewhere (a test, a notebook) it is a plain SystemExit and the process ends its own way.
EXIT_SCRIPT = """
import atexit, sys
class Final:
    def __del__(self): print("finalised", flush=True)
keep = Final()
atexit.register(print, "handler ran")
from foundry_ext._exit import exit_run
try:
    exit_run(5)
except SystemExit as e:
    print("caught", e.code, flush=True)
exit_run(3)
"""


@pytest.mark.parametrize(
    ("launched", "lines"), [(True, ["caught 5", "handler ran"]), (False, ["caught 5", "handler ran", "finalised"])]
)
def test_exit_run_runs_the_exit_handlers_then_ends_without_finalisation(launched: bool, lines: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "RANK")}
    if launched:
        env.update(MASTER_ADDR="127.0.0.1", RANK="1")
    with pytest.MonkeyPatch.context() as patch:  # what the child decides from
        patch.setattr(os, "environ", env)
        assert clean_exit.launched() is launched
    done = subprocess.run(
        [sys.executable, "-c", EXIT_SCRIPT], env={**env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True
    )
    assert done.stdout.splitlines() == lines, done.stdout + done.stderr
    assert done.returncode == 3  # the last call's status (the first one was caught)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("how", "status"),
    [("raise", -signal.SIGABRT), ("exit_run", 0), ("raise_stopped", -signal.SIGABRT), ("stop_run", 2)],
)
def test_a_gloo_thread_waiting_for_the_gil_at_finalisation_aborts_a_plain_exit(
    how: str, status: int, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "GO_FILE": str(tmp_path / "go"),
        "EXIT": how,
        "PYTHONPATH": str(REPO),
        "OMP_NUM_THREADS": "1",
    }
    ranks = [
        subprocess.Popen(
            [sys.executable, str(RANK_SCRIPT)],
            env={**env, "RANK": str(rank)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in (0, 1)
    ]
    try:
        out, _ = ranks[1].communicate(timeout=240)
    finally:
        ranks[0].kill()  # it lingers so that rank 1 never sees its peer gone first
        ranks[0].communicate()
    assert "rank 1: exiting" in out, out  # it got as far as the exit
    assert (tmp_path / "go").exists(), out  # and rank 0 was told to join while the GIL was held
    assert ranks[1].returncode == status, out
    assert (ABORT in out) == (how in ("raise", "raise_stopped")), out
    assert "foundry-ext: error:" not in out  # rank 1: stop_run prints on rank 0 only


REFUSALS = int(os.environ.get("FOUNDRY_EXT_REFUSALS", "1"))  # ~25 s a launch on an idle 2-core machine
REFUSED = "foundry-ext: error: scheduler.t_max: '0.0001dur' converts to 0 batches"


@pytest.mark.launcher  # implies slow
@pytest.mark.timeout(1800)
def test_a_refusal_at_the_first_call_ends_both_ranks_with_status_2(demo_data: Path, tmp_path: Path) -> None:
    """``t_max: 0.0001dur`` of a 1-epoch run: the pre-flight cannot count an epoch's batches (the YAML does not say),
    so the scheduler's first call refuses it while the Trainer is built, after the process group's first collectives.
    """
    overrides = [
        f"variables.data_local={demo_data}",
        "max_duration=1ep",
        "scheduler.t_warmup=0ba",
        "scheduler.t_decay=0ba",
        "scheduler.t_max=0.0001dur",
        "save_folder=null",
    ]
    for attempt in range(1, REFUSALS + 1):
        status_dir = tmp_path / f"status-{attempt}"
        launcher_status, output = launch_and_wait(
            REPO / "yamls" / "tiny-wsd.yaml",
            overrides,
            nproc=2,
            log=tmp_path / f"refusal-{attempt}.log",
            timeout=600,
            cwd=tmp_path,
            rank_status=status_dir,
        )
        statuses = rank_statuses(status_dir, 2)
        assert statuses == {0: "2", 1: "2"}, f"refusal {attempt}: {statuses}\n{output[-3000:]}"
        assert launcher_status == 2, output[-3000:]
        errors = [line for line in output.splitlines() if line.startswith("foundry-ext: error:")]
        assert len(errors) == 1 and errors[0].startswith(REFUSED), output[-3000:]
        assert ABORT not in output and "Traceback" not in output, output[-3000:]
