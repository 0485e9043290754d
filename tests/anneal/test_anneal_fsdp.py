"""``foundry-ext anneal`` from a sharded (FSDP) checkpoint, trained through the real launcher: exact, and its own.

``FSDP_VERSION=2 composer -n 2 train.py yamls/tiny-fsdp.yaml`` (torch's FSDP2 on CPU with gloo, sharded checkpoints,
fixed seed):

* the stable run: no decay, a sharded checkpoint every 4 batches, 12 batches;
* the branch ``anneal`` writes from its folder ``ep0-ba4`` (an 8-batch 1-sqrt decay to 0.1), trained on 2 ranks;
* the reference: a ``warmup_stable_decay`` run planned with ``t_decay: 8ba``, trained on its own from batch 0.

The branch's LRs and eval losses equal the reference's bitwise; the source folder is kept in the branch's folder
(hard links) and the stable run's folder is byte for byte what it was. docs/anneal.md, "Sharded checkpoints (FSDP)".
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from foundry_ext.cli import main
from tests.support.launcher import REPO
from tests.support.multirank import launch_and_wait, read_metrics

YAML = REPO / "yamls" / "tiny-fsdp.yaml"
JSONL_LOGGER = REPO / "tests" / "support" / "jsonl_logger.py"
LR = "lr-DecoupledAdamW/group0"
EVAL = "metrics/eval/LanguageCrossEntropy"
SHORT = ["max_duration=12ba", "scheduler.t_warmup=2ba", "save_interval=4ba", "eval_interval=4ba",
         "scheduler.decay_type=sqrt", "scheduler.alpha_f=0.1"]  # fmt: skip
FSDP2 = {"FSDP_VERSION": "2"}

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def _files(folder: Path) -> dict[str, bytes | str]:
    """Every file and link under ``folder``, by relative path: its bytes, or where the link points."""
    return {
        str(p.relative_to(folder)): ("-> " + os.readlink(p)) if p.is_symlink() else p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_symlink() or p.is_file()
    }


@pytest.fixture(scope="module")
def trained(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The stable run, the branch `anneal` wrote from its batch-4 folder, both trained, and the planned run."""
    data = Path(getattr(demo_data, "path", demo_data))
    root = tmp_path_factory.mktemp("anneal-fsdp")

    def common(name: str) -> list[str]:
        return [f"variables.data_local={data}", f"code_paths=[{JSONL_LOGGER}]",
                f"loggers.jsonl.path={root}/{name}-rank{{rank}}.jsonl"]  # fmt: skip

    def train(yaml_path: Path, overrides: list[str], name: str) -> None:
        status, output = launch_and_wait(yaml_path, overrides, nproc=2, log=root / f"{name}.log", env=FSDP2, cwd=root)
        assert status == 0, output[-3000:]

    stable_dir = root / "runs" / "stable" / "checkpoints"
    train(YAML, [*SHORT, "scheduler.t_decay=0ba", "run_name=stable", *common("stable"), f"save_folder={stable_dir}"],
          "stable")  # fmt: skip
    stable_files = _files(stable_dir)
    source = stable_dir / "ep0-ba4"
    config = root / "stable.yaml"
    config.write_text(YAML.read_text())
    branch = root / "branch.yaml"
    argv = ["anneal", str(source), str(config), *SHORT, "scheduler.t_decay=0ba", *common("branch"),
            "--decay", "8ba", "--shape", "sqrt", "--floor", "0.1", "--out", str(branch)]  # fmt: skip
    cwd = os.getcwd()
    os.chdir(root)  # the YAML's relative save_folder is the branch's, as a user running anneal there
    try:
        code = main(argv)
    finally:
        os.chdir(cwd)
    assert code == 0
    cfg = yaml.safe_load(branch.read_text())
    train(branch, [], "branch")
    train(YAML, [*SHORT, "scheduler.t_decay=8ba", "run_name=planned", *common("planned"),
                 f"save_folder={root}/runs/planned/checkpoints"], "planned")  # fmt: skip
    return {
        "root": root, "stable_dir": stable_dir, "stable_files": stable_files, "source": source, "config": config,
        "branch_cfg": cfg, "branch": read_metrics(root / "branch-rank0.jsonl"),
        "planned": read_metrics(root / "planned-rank0.jsonl"), "common": common,
    }  # fmt: skip


def test_a_branch_of_a_sharded_checkpoint_trains_as_the_planned_fsdp_run_bitwise(trained: dict) -> None:
    branch, planned = trained["branch"], trained["planned"]
    assert sorted(branch[LR]) == list(range(5, 13))  # lr_monitor's step is the batch count: batches 4..11
    for step, lr in branch[LR].items():
        assert lr == planned[LR][step], (step, lr, planned[LR][step])
    assert branch[LR][5] == 3.0e-3 and branch[LR][12] < branch[LR][8] < 3.0e-3  # the decay, from the peak
    assert sorted(branch[EVAL]) == [8, 12]
    for step in (8, 12):
        assert branch[EVAL][step] == planned[EVAL][step], (step, branch[EVAL], planned[EVAL])


def test_the_sharded_source_is_kept_in_the_branch_folder_and_the_stable_folder_is_only_read(trained: dict) -> None:
    cfg, source = trained["branch_cfg"], trained["source"]
    folder = Path(cfg["save_folder"])
    kept = folder / "anneal-source" / "ep0-ba4"
    assert cfg["load_path"] == str(kept) and cfg["fsdp_config"]["state_dict_type"] == "sharded"
    names = sorted(p.name for p in source.iterdir())
    assert names == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    assert sorted(p.name for p in kept.iterdir()) == names
    for name in names:  # a folder of hard links: the same bytes, no copy, the stable folder untouched
        assert os.path.samefile(kept / name, source / name)
    assert _files(trained["stable_dir"]) == trained["stable_files"]
    assert sorted(p.name for p in folder.glob("ep*")) == ["ep0-ba12", "ep0-ba8"]  # the branch's own checkpoints


def test_the_note_says_how_to_train_a_sharded_branch_and_a_config_without_fsdp_is_refused(
    trained: dict, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    source, config = trained["source"], trained["config"]
    argv = ["anneal", str(source), str(config), *SHORT, "scheduler.t_decay=0ba", *trained["common"]("x"),
            "--decay", "8ba", "--out"]  # fmt: skip
    assert main([*argv, str(tmp_path / "b.yaml"), f"save_folder={tmp_path}/b"]) == 0
    out = capsys.readouterr().out
    assert "note: a sharded checkpoint (FSDP, written by 2 ranks)" in out and "FSDP_VERSION=2" in out
    assert "CUDA" not in out

    before = _files(trained["stable_dir"])
    assert main([*argv, str(tmp_path / "c.yaml"), f"save_folder={tmp_path}/c", "fsdp_config=null"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no fsdp_config" in err[0] and "is sharded" in err[0], err
    assert not (tmp_path / "c.yaml").exists() and not (tmp_path / "c").exists()
    assert _files(trained["stable_dir"]) == before
