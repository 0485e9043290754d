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

import os
from pathlib import Path

import pytest
import yaml

from foundry_ext.cli import main
from tests.support.launcher import REPO
from tests.support.multirank import FAULT_HOOKS, JSONL_LOGGER, finish, kill, launch, read_metrics, wait_until

YAML = REPO / "yamls" / "tiny-wsd.yaml"
LR = "lr-DecoupledAdamW/group0"
EVAL = "metrics/eval/LanguageCrossEntropy"
STABLE = ["run_name=stable", "max_duration=12ba", "scheduler.t_warmup=2ba", "scheduler.t_decay=0ba",
          "save_interval=4ba", "eval_interval=4ba", "scheduler.decay_type=sqrt", "scheduler.alpha_f=0.1"]  # fmt: skip


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
    stable = launch(
        YAML, [*STABLE, *common("stable"), f"save_folder={stable_dir}"], nproc=2, log=tmp_path / "stable.log",
        cwd=tmp_path, env={"FAULT_WRITE_DELAY": "0.05"},  # the stable run is still training when the branch starts
    )  # fmt: skip
    source = stable_dir / "ep0-ba4-rank0.pt"
    latest = stable_dir / "latest-rank0.pt"
    wait_until("the stable run's batch-4 checkpoint", lambda: latest.is_symlink() and os.readlink(latest)
               == source.name, stable, tmp_path / "stable.log")  # fmt: skip

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
    first = launch(branch, [], nproc=2, log=tmp_path / "a1.log", cwd=tmp_path, env={"FAULT_WRITE_DELAY": "0.5"})
    # killed while it writes its batch-12 checkpoint: its own batch-8 one is complete and `latest`
    wait_until("A's batch-12 checkpoint file", (folder / "ep0-ba12-rank0.pt").exists, first, tmp_path / "a1.log")
    assert first.poll() is None, (tmp_path / "a1.log").read_text()[-3000:]
    assert os.readlink(folder / "latest-rank0.pt") == "ep0-ba8-rank0.pt"
    kill(first)
    finish(stable, tmp_path / "stable.log")
    stable_files = _files(stable_dir)
    assert sorted(stable_files) == ["ep0-ba12-rank0.pt", "ep0-ba4-rank0.pt", "ep0-ba8-rank0.pt", "latest-rank0.pt"]

    killed = read_metrics(tmp_path / "a-rank0.jsonl")
    logged = (tmp_path / "a-rank0.jsonl").stat().st_size
    again = launch(branch, [], nproc=2, log=tmp_path / "a2.log", cwd=tmp_path)  # the same command
    finish(again, tmp_path / "a2.log")
    # the relaunch loaded the branch's own latest (batch 8), not load_path (the stable batch-4 checkpoint)
    relaunched = read_metrics(tmp_path / "a-rank0.jsonl", after=logged)
    assert sorted(relaunched[LR]) == [9, 10, 11, 12], relaunched[LR]
    resumed = {name: {**killed.get(name, {}), **relaunched.get(name, {})} for name in (LR, EVAL)}
    assert _files(stable_dir) == stable_files  # byte for byte, while and after the branch trained

    planned = launch(
        YAML, [*(o for o in STABLE if not o.startswith(("scheduler.t_decay", "run_name"))), "scheduler.t_decay=8ba",
               "run_name=planned", *common("planned"),
               f"save_folder={tmp_path}/runs/planned/checkpoints"], nproc=2, log=tmp_path / "planned.log", cwd=tmp_path,
    )  # fmt: skip
    finish(planned, tmp_path / "planned.log")
    reference = read_metrics(tmp_path / "planned-rank0.jsonl")

    assert sorted(resumed[LR]) == list(range(5, 13))  # lr_monitor's step is the batch count: batches 4..11
    for step, lr in resumed[LR].items():
        assert lr == reference[LR][step], (step, lr, reference[LR][step])
    assert resumed[LR][5] == 3.0e-3 and resumed[LR][12] < 3.0e-3
    assert sorted(resumed[EVAL]) == [8, 12]
    for step in (8, 12):
        assert resumed[EVAL][step] == reference[EVAL][step], (step, resumed[EVAL], reference[EVAL])
    assert sorted(p.name for p in folder.glob("ep*.pt")) == ["ep0-ba12-rank0.pt", "ep0-ba8-rank0.pt"]
