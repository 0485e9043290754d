"""The branch ``foundry-ext anneal`` writes, trained through the real launcher: exact, its own, and resumable.

``composer -n 2 train.py yamls/tiny-wsd.yaml`` (gloo on CPU, fixed seed):

* the stable run: no decay, checkpoints every 4 batches, 12 batches;
* while it trains, branch A is written from its checkpoint at batch 4 (an 8-batch 1-sqrt decay to 0.1) and launched;
  A is killed while it writes its batch-12 checkpoint and relaunched with the same command: it resumes from its own
  batch-8 checkpoint, not from the stable one;
* the reference: a ``warmup_stable_decay`` run planned with ``t_decay: 8ba`` (the decay from batch 4 to 12), trained
  on its own from batch 0.

A's LRs (both launches) and eval losses equal the reference's bitwise; the stable run's folder is byte for byte what
it was when the stable run ended.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from foundry_ext.cli import main
from tests.support.multirank import free_port

REPO = Path(__file__).resolve().parents[2]
COMPOSER = Path(sys.executable).parent / "composer"
YAML = REPO / "yamls" / "tiny-wsd.yaml"
JSONL_LOGGER = REPO / "tests" / "support" / "jsonl_logger.py"
FAULT_HOOKS = REPO / "tests" / "support" / "fault_hooks.py"
LR = "lr-DecoupledAdamW/group0"
EVAL = "metrics/eval/LanguageCrossEntropy"
STABLE = ["run_name=stable", "max_duration=12ba", "scheduler.t_warmup=2ba", "scheduler.t_decay=0ba",
          "save_interval=4ba", "eval_interval=4ba", "scheduler.decay_type=sqrt", "scheduler.alpha_f=0.1"]  # fmt: skip


def _launch(yaml_path: Path, overrides: list[str], log: Path, cwd: Path, **env: str) -> subprocess.Popen:
    cmd = [str(COMPOSER), "-n", "2", "--master_port", str(free_port()), str(REPO / "train.py"), str(yaml_path)]
    environ = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", **env}
    with open(log, "w") as out:
        return subprocess.Popen(
            [*cmd, *overrides], cwd=cwd, env=environ, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _wait(proc: subprocess.Popen, log: Path, timeout: float = 600) -> None:
    try:
        code = proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    assert code == 0, f"{' '.join(map(str, proc.args))} exited {code}:\n{log.read_text()[-4000:]}"


def _until(condition, timeout: float = 600) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.2)


def _read(path: Path, skip: int = 0) -> dict[str, dict[int, float]]:
    """name -> step -> value of the LR and the eval loss, from the ``skip``-th line on."""
    out: dict[str, dict[int, float]] = {}
    for line in path.read_text().splitlines()[skip:]:
        row = json.loads(line)
        if row["name"] in (LR, EVAL):
            seen = out.setdefault(row["name"], {})
            assert seen.get(row["step"], row["value"]) == row["value"], row
            seen[row["step"]] = row["value"]
    return out


def _files(folder: Path) -> dict[str, bytes | str]:
    return {
        p.name: ("-> " + os.readlink(p)) if p.is_symlink() else p.read_bytes()
        for p in sorted(folder.iterdir())
        if p.is_symlink() or p.is_file()
    }


@pytest.mark.kills_mid_run  # implies slow; one at a time under xdist (tests/conftest.py)
@pytest.mark.timeout(1800)
def test_a_killed_branch_resumes_from_its_own_checkpoint_and_trains_as_the_planned_run(
    demo_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    data = Path(getattr(demo_data, "path", demo_data))

    def common(name: str) -> list[str]:
        return [f"variables.data_local={data}", f"code_paths=[{JSONL_LOGGER},{FAULT_HOOKS}]",
                f"loggers.jsonl.path={tmp_path}/{name}-rank{{rank}}.jsonl"]  # fmt: skip

    stable_dir = tmp_path / "runs" / "stable" / "checkpoints"
    stable = _launch(
        YAML, [*STABLE, *common("stable"), f"save_folder={stable_dir}"], tmp_path / "stable.log", tmp_path,
        FAULT_WRITE_DELAY="0.05",  # the stable run is still training when the branch starts
    )  # fmt: skip
    source = stable_dir / "ep0-ba4-rank0.pt"
    _until(lambda: (stable_dir / "latest-rank0.pt").is_symlink() and os.readlink(stable_dir / "latest-rank0.pt")
           == source.name)  # fmt: skip

    # branch A, written and launched while the stable run trains
    branch = tmp_path / "branch-a.yaml"
    code = main(["anneal", str(source), str(YAML), *STABLE[1:], *common("a"), "--decay", "8ba", "--shape", "sqrt",
                 "--floor", "0.1", "--out", str(branch)])  # fmt: skip
    _, err = capsys.readouterr()
    assert code == 0, err
    cfg = yaml.safe_load(branch.read_text())
    assert stable.poll() is None, "the stable run ended before the branch was written: the test proves less"
    folder = Path(cfg["save_folder"])
    assert folder == tmp_path / "runs" / "stable-anneal-4ba-8ba-sqrt-floor0.1" / "checkpoints"
    kept = folder / "anneal-source" / source.name  # the source kept alive in the branch's folder: a hard link
    assert cfg["load_path"] == str(kept) and os.path.samefile(kept, source)
    assert cfg["max_duration"] == "12ba" and cfg["autoresume"] is True
    first = _launch(branch, [], tmp_path / "a1.log", tmp_path, FAULT_WRITE_DELAY="0.5")
    # killed while it writes its batch-12 checkpoint: its own batch-8 one is complete and `latest`
    _until(lambda: (folder / "ep0-ba12-rank0.pt").exists() or first.poll() is not None)
    assert first.poll() is None, (tmp_path / "a1.log").read_text()[-3000:]
    assert os.readlink(folder / "latest-rank0.pt") == "ep0-ba8-rank0.pt"
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    _wait(stable, tmp_path / "stable.log")
    stable_files = _files(stable_dir)
    assert sorted(stable_files) == ["ep0-ba12-rank0.pt", "ep0-ba4-rank0.pt", "ep0-ba8-rank0.pt", "latest-rank0.pt"]

    killed = _read(tmp_path / "a-rank0.jsonl")
    logged = len((tmp_path / "a-rank0.jsonl").read_text().splitlines())
    again = _launch(branch, [], tmp_path / "a2.log", tmp_path)  # the same command
    _wait(again, tmp_path / "a2.log")
    # the relaunch loaded the branch's own latest (batch 8), not load_path (the stable batch-4 checkpoint)
    relaunched = _read(tmp_path / "a-rank0.jsonl", skip=logged)
    assert sorted(relaunched[LR]) == [9, 10, 11, 12], relaunched[LR]
    resumed = {name: {**killed.get(name, {}), **relaunched.get(name, {})} for name in (LR, EVAL)}
    assert _files(stable_dir) == stable_files  # byte for byte, while and after the branch trained

    planned = _launch(
        YAML, [*(o for o in STABLE if not o.startswith(("scheduler.t_decay", "run_name"))), "scheduler.t_decay=8ba",
               "run_name=planned", *common("planned"),
               f"save_folder={tmp_path}/runs/planned/checkpoints"], tmp_path / "planned.log", tmp_path,
    )  # fmt: skip
    _wait(planned, tmp_path / "planned.log")
    reference = _read(tmp_path / "planned-rank0.jsonl")

    assert sorted(resumed[LR]) == list(range(5, 13))  # lr_monitor's step is the batch count: batches 4..11
    for step, lr in resumed[LR].items():
        assert lr == reference[LR][step], (step, lr, reference[LR][step])
    assert resumed[LR][5] == 3.0e-3 and resumed[LR][12] < 3.0e-3
    assert sorted(resumed[EVAL]) == [8, 12]
    for step in (8, 12):
        assert resumed[EVAL][step] == reference[EVAL][step], (step, resumed[EVAL], reference[EVAL])
    assert sorted(p.name for p in folder.glob("ep*.pt")) == ["ep0-ba12-rank0.pt", "ep0-ba8-rank0.pt"]
