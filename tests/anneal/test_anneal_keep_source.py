"""A stable run whose rotation deletes the branch's source checkpoint while the branch is written: the branch keeps it.

Real ``train.py`` processes (llm-foundry's ``train_from_yaml``, one rank each, CPU, fixed seed):

* the stable run keeps one checkpoint (``save_num_checkpoints_to_keep: 1``), saving every 2 batches to batch 8. It is
  held just before it writes its batch-6 checkpoint (:mod:`tests.anneal.hold_save`), while ``anneal`` writes a branch
  from its batch-4 checkpoint; let go, it writes batch 6 and its rotation deletes batch 4 from its folder;
* a second branch from the same checkpoint (a 3-batch decay) is written while the stable run is held, and trains
  beside the first, in its own folder, exactly as a run planned with ``t_decay: 3ba``;
* the branch (a 4-batch 1-sqrt decay to 0.1, batches 4..7) is held before its batch-8 checkpoint, killed there
  (SIGKILL), and relaunched with the same command: it resumes from its own batch-6 checkpoint;
* the reference: a ``warmup_stable_decay`` run planned with ``t_decay: 4ba`` (the same shape and floor), trained on
  its own from batch 0.

The branch's LRs (both launches) and its eval loss equal the reference's bitwise; the kept source (a hard link in the
branch's folder) still holds the batch-4 checkpoint's bytes; Composer's autoresume took the branch's own ``latest``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from foundry_ext.cli import main
from tests.support.launcher import REPO
from tests.support.multirank import JSONL_LOGGER, finish, kill, launch, read_metrics, wait_for_line, wait_until

YAML = REPO / "yamls" / "tiny-wsd.yaml"
HOLD = REPO / "tests" / "anneal" / "hold_save.py"
LR = "lr-DecoupledAdamW/group0"
EVAL = "metrics/eval/LanguageCrossEntropy"
STABLE = ["run_name=stable", "max_duration=8ba", "scheduler.t_warmup=1ba", "scheduler.t_decay=0ba",
          "save_interval=2ba", "save_num_checkpoints_to_keep=1", "eval_interval=4ba", "scheduler.decay_type=sqrt",
          "scheduler.alpha_f=0.1"]  # fmt: skip


def _launch(yaml_path: Path, overrides: list[str], log: Path, cwd: Path, **env: str) -> subprocess.Popen:
    """Start one ``train.py`` process and return once its dataloaders are built, so that the next one starts after.

    mosaicml-streaming's shared-memory prefix is found by a scan and then created (streaming/base/shared/prefix.py,
    get_shm_prefix): two StreamingDatasets created at the same moment in two processes can pick the same prefix and
    the second dies with FileExistsError '/NNNNNN_locals'. This test's runs still train at the same time.
    """
    proc = launch(yaml_path, overrides, nproc=None, log=log, cwd=cwd, env=env)
    # llm-foundry logs it after the train and eval loaders (python_log_level: info)
    wait_for_line(proc, log, "Building trainer...")
    return proc


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_rotated_away_source_is_kept_and_the_killed_branch_still_trains_exactly(
    demo_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    data = Path(getattr(demo_data, "path", demo_data))

    def common(name: str) -> list[str]:
        return [f"variables.data_local={data}", f"code_paths=[{JSONL_LOGGER},{HOLD}]",
                f"loggers.jsonl.path={tmp_path}/{name}-rank{{rank}}.jsonl"]  # fmt: skip

    planned = _launch(
        YAML, [*(o for o in STABLE if not o.startswith(("scheduler.t_decay", "run_name", "save_num"))),
               "scheduler.t_decay=4ba", "run_name=planned", *common("planned"),
               f"save_folder={tmp_path}/runs/planned/checkpoints"], tmp_path / "planned.log", tmp_path,
    )  # fmt: skip
    planned_b = _launch(
        YAML, [*(o for o in STABLE if not o.startswith(("scheduler.t_decay", "run_name", "save_num", "max_dur"))),
               "max_duration=7ba", "eval_interval=7ba", "scheduler.t_decay=3ba", "run_name=planned-b",
               *common("planned-b"), f"save_folder={tmp_path}/runs/planned-b/checkpoints"],
        tmp_path / "planned-b.log", tmp_path,
    )  # fmt: skip
    stable_dir = tmp_path / "runs" / "stable" / "checkpoints"
    go = tmp_path / "stable-go"
    stable = _launch(YAML, [*STABLE, *common("stable"), f"save_folder={stable_dir}"], tmp_path / "stable.log",
                     tmp_path, HOLD_SAVE=f"ba6={go}")  # fmt: skip
    source = stable_dir / "ep0-ba4-rank0.pt"
    wait_until("the stable run held before ba6's save", Path(f"{go}.waiting").exists, stable, tmp_path / "stable.log")
    assert os.readlink(stable_dir / "latest-rank0.pt") == source.name
    assert sorted(p.name for p in stable_dir.iterdir()) == [source.name, "latest-rank0.pt"]  # batch 2 rotated away
    source_bytes = source.read_bytes()

    branch = tmp_path / "branch.yaml"
    code = main(["anneal", str(source), str(YAML), *STABLE[1:], *common("branch"), "--decay", "4ba",
                 "--shape", "sqrt", "--floor", "0.1", "--out", str(branch)])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    cfg = yaml.safe_load(branch.read_text())
    folder = Path(cfg["save_folder"])
    assert folder == tmp_path / "runs" / "stable-anneal-4ba-4ba-sqrt-floor0.1" / "checkpoints"
    kept = folder / "anneal-source" / source.name
    assert cfg["load_path"] == str(kept) and cfg["save_num_checkpoints_to_keep"] == 1
    why = "the stable run's rotation cannot delete it"
    assert f"  source: {kept}, a hard link of {source} ({why}); the YAML loads it\n" in out
    assert "save_num_checkpoints_to_keep" not in out  # no note left to act on: the source is kept
    # a second branch from the same checkpoint, while the stable run is still held: a 3-batch decay, its own folder
    branch_b = tmp_path / "branch-b.yaml"
    code = main(["anneal", str(source), str(YAML), *STABLE[1:], "eval_interval=7ba", *common("b"), "--decay", "3ba",
                 "--shape", "sqrt", "--floor", "0.1", "--out", str(branch_b)])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    folder_b = Path(yaml.safe_load(branch_b.read_text())["save_folder"])
    assert folder_b == tmp_path / "runs" / "stable-anneal-4ba-3ba-sqrt-floor0.1" / "checkpoints"
    assert os.path.samefile(folder_b / "anneal-source" / source.name, kept)  # two links to the stable run's file
    assert stable.poll() is None, "the stable run ended before the branches were written: the test proves less"

    go.touch()  # the stable run writes batch 6, and its rotation deletes batch 4
    finish(stable, tmp_path / "stable.log")
    assert sorted(p.name for p in stable_dir.iterdir()) == ["ep0-ba8-rank0.pt", "latest-rank0.pt"]
    assert not source.exists() and kept.read_bytes() == source_bytes

    # the branch: held before its batch-8 checkpoint (its own batch 6 is complete and `latest`), killed there
    branch_go = tmp_path / "branch-go"
    first = _launch(branch, [], tmp_path / "b1.log", tmp_path, HOLD_SAVE=f"ba8={branch_go}")
    second = _launch(branch_b, [], tmp_path / "bb.log", tmp_path)  # both branches train at once
    wait_until("the branch held", Path(f"{branch_go}.waiting").exists, first, tmp_path / "b1.log")
    assert os.readlink(folder / "latest-rank0.pt") == "ep0-ba6-rank0.pt"
    kill(first)
    killed = read_metrics(tmp_path / "branch-rank0.jsonl")
    logged = (tmp_path / "branch-rank0.jsonl").stat().st_size

    again = _launch(branch, [], tmp_path / "b2.log", tmp_path)  # the same command
    finish(again, tmp_path / "b2.log")
    relaunched = read_metrics(tmp_path / "branch-rank0.jsonl", after=logged, last=True)
    # Composer's autoresume loaded the branch's own latest (batch 6), not load_path (the kept batch-4 source)
    assert sorted(relaunched[LR]) == [7, 8], relaunched[LR]
    # the killed launch's batch 6 stays: Composer's rotation deletes only what the same process saved
    assert sorted(p.name for p in folder.iterdir()) == [
        "anneal-source", "ep0-ba6-rank0.pt", "ep0-ba8-rank0.pt", "latest-rank0.pt"
    ]  # fmt: skip
    assert kept.read_bytes() == source_bytes

    finish(planned, tmp_path / "planned.log")
    reference = read_metrics(tmp_path / "planned-rank0.jsonl")
    resumed = {name: {**killed.get(name, {}), **relaunched.get(name, {})} for name in (LR, EVAL)}
    assert sorted(resumed[LR]) == [5, 6, 7, 8]  # lr_monitor's step is the batch count: batches 4..7
    for step, lr in resumed[LR].items():
        assert lr == reference[LR][step], (step, lr, reference[LR][step])
    assert resumed[LR][5] == 3.0e-3 and resumed[LR][8] < resumed[LR][7] < 3.0e-3
    assert sorted(resumed[EVAL]) == [8]
    assert resumed[EVAL][8] == reference[EVAL][8], (resumed[EVAL], reference[EVAL])

    finish(second, tmp_path / "bb.log")
    finish(planned_b, tmp_path / "planned-b.log")
    got, reference_b = read_metrics(tmp_path / "b-rank0.jsonl"), read_metrics(tmp_path / "planned-b-rank0.jsonl")
    assert sorted(got[LR]) == [5, 6, 7] and sorted(got[EVAL]) == [7]
    assert all(got[LR][step] == reference_b[LR][step] for step in (5, 6, 7)) and got[LR][7] < 3.0e-3
    assert got[EVAL][7] == reference_b[EVAL][7]
    assert os.readlink(folder_b / "latest-rank0.pt") == "ep0-ba7-rank0.pt" and (folder_b / "anneal-source").is_dir()
