"""``foundry-ext anneal`` from a sharded (FSDP) checkpoint, trained through the real launcher: exact, and its own.

``FSDP_VERSION=2 composer -n 2 train.py yamls/tiny-fsdp.yaml`` (torch's FSDP2 on CPU with gloo, sharded checkpoints,
fixed seed):

* the stable run: the sharded tests' shared reference run (:func:`tests.support.fsdp.fsdp_reference`: 12 batches, a
  sharded checkpoint and an evaluation of every validation sample every 4, warmup 4 batches, its own decay planned
  from batch 9), trained once per suite;
* the branch ``anneal`` writes from its folder ``ep0-ba8`` (batch 8 trains at the peak: a 4-batch 1-sqrt decay to
  0.1, batches 8 to 11), trained on 2 ranks;
* the planned run: a ``warmup_stable_decay`` run with ``t_decay: 4ba``, trained on its own from batch 0.

The branch's LRs and its eval loss at batch 12 equal the planned run's bitwise; the source folder is kept in the
branch's folder (hard links) and the stable run's folder is byte for byte what it was. docs/anneal.md, "Sharded
checkpoints (FSDP)".
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from foundry_ext.cli import main
from tests.support.fsdp import FSDP_ENV, FSDP_YAML, fsdp_reference  # noqa: F401 (a fixture)
from tests.support.multirank import JSONL_LOGGER, launch_and_wait, read_metrics

LR = "lr-DecoupledAdamW/group0"
EVAL = "metrics/eval/LanguageCrossEntropy"
# what the reference run trains with beyond the YAML (tests.support.fsdp.fsdp_overrides), less its folders, its
# checkpoint guard and autoresume: nothing of those reaches the numbers. The YAML's warmup (4ba), 1-sqrt shape and
# floor 0.1 are the branch's and the planned run's.
SHORT = ["max_duration=12ba", "save_interval=4ba", "eval_interval=4ba", "eval_subset_num_batches=-1"]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def _files(folder: Path) -> dict[str, bytes | str]:
    """Every file and link under ``folder``, by relative path: its bytes, or where the link points."""
    return {
        str(p.relative_to(folder)): ("-> " + os.readlink(p)) if p.is_symlink() else p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_symlink() or p.is_file()
    }


@pytest.fixture(scope="module")
def trained(fsdp_reference: Path, demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:  # noqa: F811
    """The stable run (the shared reference), the branch `anneal` wrote from its batch-8 folder, trained, and the
    planned run."""
    data = Path(getattr(demo_data, "path", demo_data))
    root = tmp_path_factory.mktemp("anneal-fsdp")

    def common(name: str) -> list[str]:
        return [f"variables.data_local={data}", f"code_paths=[{JSONL_LOGGER}]",
                f"loggers.jsonl.path={root}/{name}-rank{{rank}}.jsonl"]  # fmt: skip

    def train(yaml_path: Path, overrides: list[str], name: str) -> None:
        status, output = launch_and_wait(
            yaml_path, overrides, nproc=2, log=root / f"{name}.log", env=FSDP_ENV, cwd=root
        )
        assert status == 0, output[-3000:]

    stable_dir = fsdp_reference / "checkpoints"
    stable_files = _files(stable_dir)
    source = stable_dir / "ep0-ba8"
    config = root / "stable.yaml"
    config.write_text(FSDP_YAML.read_text())
    branch = root / "branch.yaml"
    argv = ["anneal", str(source), str(config), *SHORT, *common("branch"),
            "--decay", "4ba", "--shape", "sqrt", "--floor", "0.1", "--out", str(branch)]  # fmt: skip
    cwd = os.getcwd()
    os.chdir(root)  # the YAML's relative save_folder is the branch's, as a user running anneal there
    try:
        code = main(argv)
    finally:
        os.chdir(cwd)
    assert code == 0
    cfg = yaml.safe_load(branch.read_text())
    train(branch, [], "branch")
    train(FSDP_YAML, [*SHORT, "scheduler.t_decay=4ba", "run_name=planned", *common("planned"),
                      f"save_folder={root}/runs/planned/checkpoints"], "planned")  # fmt: skip
    return {
        "root": root, "stable_dir": stable_dir, "stable_files": stable_files, "source": source, "config": config,
        "branch_cfg": cfg, "branch": read_metrics(root / "branch-rank0.jsonl"),
        "planned": read_metrics(root / "planned-rank0.jsonl"), "common": common,
        "stable": read_metrics(fsdp_reference / "metrics-rank0.jsonl"),
    }  # fmt: skip


def test_a_branch_of_a_sharded_checkpoint_trains_as_the_planned_fsdp_run_bitwise(trained: dict) -> None:
    branch, planned = trained["branch"], trained["planned"]
    assert sorted(branch[LR]) == list(range(9, 13))  # logged as batches 8..11 end: step s holds batch s's LR
    for step, lr in branch[LR].items():
        assert lr == planned[LR][step], (step, lr, planned[LR][step])
    stable = trained["stable"][LR]
    assert [stable[s] for s in range(6, 10)] == [3.0e-3] * 4  # the stable run: batches 5 to 8 at the peak ...
    assert branch[LR][9] == 3.0e-3 > branch[LR][10] > branch[LR][11] > branch[LR][12] > 3.0e-4  # the branch decays
    assert sorted(branch[EVAL]) == [12]
    assert branch[EVAL][12] == planned[EVAL][12], (branch[EVAL], planned[EVAL])


def test_the_sharded_source_is_kept_in_the_branch_folder_and_the_stable_folder_is_only_read(trained: dict) -> None:
    cfg, source = trained["branch_cfg"], trained["source"]
    folder = Path(cfg["save_folder"])
    kept = folder / "anneal-source" / "ep0-ba8"
    assert cfg["load_path"] == str(kept) and cfg["fsdp_config"]["state_dict_type"] == "sharded"
    names = sorted(p.name for p in source.iterdir())
    assert names == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    assert sorted(p.name for p in kept.iterdir()) == names
    for name in names:  # a folder of hard links: the same bytes, no copy, the stable folder untouched
        assert os.path.samefile(kept / name, source / name)
    assert _files(trained["stable_dir"]) == trained["stable_files"]
    assert sorted(p.name for p in folder.glob("ep*")) == ["ep0-ba12"]  # the branch's own checkpoint


def test_the_note_says_how_to_train_a_sharded_branch_and_a_config_without_fsdp_is_refused(
    trained: dict, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    source, config = trained["source"], trained["config"]
    argv = ["anneal", str(source), str(config), *SHORT, *trained["common"]("x"), "--decay", "4ba", "--out"]  # fmt: skip
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
