"""``foundry-ext average``'s bad inputs as a table: each is one line naming the input, exit 2, nothing written.

The checkpoints are written here, in the two layouts Composer writes: ``torch.save`` files and sharded folders
written by ``torch.distributed.checkpoint.save`` (the writer FSDP uses, here without a process group), with the
keys Composer's readers look at (``state.model``, ``state.timestamp``, ``state.run_name``). The same folders
give the sharded average's quick check (the average of the chunks equals the mean of the tensors); real Composer
and FSDP checkpoints are averaged in test_average_full.py and test_average_sharded.py.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed.checkpoint as dcp

# each module of foundry_ext.average runs in these tests, in process (tests/test_tiers.py reads these names)
import foundry_ext.average.full
import foundry_ext.average.selection
import foundry_ext.average.sharded
import foundry_ext.average.source
import foundry_ext.average.write
import foundry_ext.cli.average
from foundry_ext.cli import main


def _state(run: str, batch: int, seed: int, **model: torch.Tensor) -> dict[str, Any]:
    g = torch.Generator().manual_seed(seed)
    weights = {"net.weight": torch.randn(3, 4, generator=g), "net.bias": torch.randn(3, generator=g)}
    weights.update(model)
    return {
        "state": {
            "model": weights,
            "timestamp": {"Timestamp": {"batch": batch, "sample": batch * 4}},
            "run_name": run,
            "optimizers": {"SGD": {"param_groups": [{"lr": 0.1}]}},
        },
        "rng": [],
    }


class _Hostile:
    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.target}",))


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("average-bad")
    run = root / "run"
    run.mkdir()
    for i, batch in enumerate((4, 8, 12)):
        torch.save(_state("r1", batch, i), run / f"ep0-ba{batch}-rank0.pt")
    os.symlink("ep0-ba12-rank0.pt", run / "latest-rank0.pt")
    (run / "quarantine").mkdir()
    shutil.copy(run / "ep0-ba12-rank0.pt", run / "quarantine" / "ep0-ba16-rank0.pt")
    other = root / "other"
    other.mkdir()
    torch.save(_state("r2", 16, 3), other / "ep0-ba16-rank0.pt")  # another run
    torch.save(_state("r1", 16, 4, **{"net.weight": torch.zeros(5, 4)}), other / "shape.pt")
    torch.save(_state("r1", 16, 5, **{"net.bias": torch.zeros(3, dtype=torch.float64)}), other / "dtype.pt")
    torch.save(_state("r1", 16, 6, extra=torch.zeros(2)), other / "extra.pt")
    torch.save(_state("r1", 8, 7), other / "same-batch.pt")
    whole = (run / "ep0-ba12-rank0.pt").read_bytes()
    (other / "truncated.pt").write_bytes(whole[: len(whole) // 2])
    hostile = _state("r1", 20, 8)
    hostile["state"]["callbacks"] = {"X": _Hostile(root / "pwned")}
    torch.save(hostile, other / "hostile.pt")
    (other / "text.pt").write_text("not a checkpoint\n")
    sharded = root / "sharded"
    for i, batch in enumerate((4, 8, 12)):
        dcp.save(_state("r1", batch, 10 + i), checkpoint_id=sharded / f"ep0-ba{batch}", no_dist=True)
    (sharded / "ep0-ba16").mkdir()  # a checkpoint being written, or cut short: no .metadata yet
    shutil.copy(sharded / "ep0-ba12" / "__0_0.distcp", sharded / "ep0-ba16")
    return root


# case -> (argv, after "foundry-ext average: error: "), paths relative to the fixture's folder; OUT is the output
CASES = {
    "different-runs": (
        ["run/ep0-ba4-rank0.pt", "other/ep0-ba16-rank0.pt"],
        "CKPT other/ep0-ba16-rank0.pt: of run 'r2', not 'r1'",
    ),
    "model-shape": (["run/ep0-ba4-rank0.pt", "other/shape.pt"], "'net.weight' has shape (3, 4), other/shape.pt (5, 4)"),
    "model-dtype": (
        ["run/ep0-ba4-rank0.pt", "other/dtype.pt"],
        "'net.bias' has dtype torch.float32, other/dtype.pt torch.float64",
    ),
    "model-keys": (
        ["run/ep0-ba4-rank0.pt", "other/extra.pt"],
        "model tensor 'extra' is in other/extra.pt but not in run/ep0-ba4-rank0.pt",
    ),
    "same-batch": (
        ["run/ep0-ba8-rank0.pt", "other/same-batch.pt"],
        "batch 8, as run/ep0-ba8-rank0.pt; average checkpoints of different batches",
    ),
    "layouts-mixed": (
        ["run/ep0-ba4-rank0.pt", "sharded/ep0-ba8"],
        "CKPT run/ep0-ba4-rank0.pt is a .pt file and sharded/ep0-ba8 a sharded folder",
    ),
    "single": (
        ["run/ep0-ba4-rank0.pt"],
        "CKPT run/ep0-ba4-rank0.pt: 1 checkpoint selected; an average needs two or more",
    ),
    "single-of-folder": (["run", "--last", "5", "--batches", "12:"], "CKPT run: 1 checkpoint selected"),
    "twice": (
        ["run/ep0-ba12-rank0.pt", "run/latest-rank0.pt"],
        "CKPT run/latest-rank0.pt: the same checkpoint as run/ep0-ba12-rank0.pt",
    ),
    "weights-zero-sum": (["run", "--weights", "1,-1,0"], "--weights 1,-1,0: the weights sum to 0"),
    "weights-nan": (["run", "--weights", "1,nan,1"], "--weights 1,nan,1: nan is not a finite number"),
    "weights-count": (["run", "--weights", "1,2"], "--weights 1,2: 2 weights for 3 checkpoints"),
    "missing": (
        ["run/ep0-ba4-rank0.pt", "run/ep0-ba99-rank0.pt"],
        "CKPT run/ep0-ba99-rank0.pt: no such file or folder",
    ),
    "partial-sharded": (
        ["sharded/ep0-ba12", "sharded/ep0-ba16"],
        "CKPT sharded/ep0-ba16: a sharded checkpoint folder without .metadata",
    ),
    "partial-in-folder": (
        ["sharded", "--last", "2"],
        "CKPT sharded/ep0-ba16: a sharded checkpoint folder without .metadata",
    ),
    "quarantined": (["run/ep0-ba4-rank0.pt", "run/quarantine/ep0-ba16-rank0.pt"], "a quarantined checkpoint"),
    "truncated": (
        ["run/ep0-ba4-rank0.pt", "other/truncated.pt"],
        "CKPT other/truncated.pt: other/truncated.pt is not a readable torch checkpoint",
    ),
    "not-a-checkpoint": (
        ["run/ep0-ba4-rank0.pt", "other/text.pt"],
        "CKPT other/text.pt: other/text.pt is not a checkpoint: it is a text file",
    ),
    "hostile": (["run/ep0-ba4-rank0.pt", "other/hostile.pt"], "it needs posix.system, which is not on the allow-list"),
    "folder-among-others": (["run", "run/ep0-ba4-rank0.pt"], "CKPT run: a save folder among other checkpoints"),
    "selection-without-folder": (
        ["run/ep0-ba4-rank0.pt", "run/ep0-ba8-rank0.pt", "--last", "2"],
        "--last, --every and --batches choose among a save folder's",
    ),
    "out-exists": (["run", "--out", "other/text.pt"], "--out other/text.pt: already exists"),
    "out-in-save-folder": (["run", "--out", "run/avg.pt"], "--out run/avg.pt: inside the run's save folder"),
    "out-in-sharded-save-folder": (
        ["sharded", "--last", "2", "--batches", ":12", "--out", "sharded/avg"],
        "--out sharded/avg: inside the run's save folder",
    ),
    "out-missing-folder": (["run", "--out", "nodir/avg.pt"], "--out nodir/avg.pt: the folder"),
}


def _files(folder: Path) -> dict[str, bytes | str]:
    return {
        str(p.relative_to(folder)): ("-> " + os.readlink(p)) if p.is_symlink() else p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() or p.is_symlink()
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_exit_2_and_nothing_written(
    case: str, ckpts: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, expected = CASES[case]
    monkeypatch.chdir(ckpts)
    before = _files(ckpts)
    if "--out" not in argv:
        argv = [*argv, "--out", "avg-out"]
    assert main(["average", *argv]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("checking [")]  # progress lines
    assert len(lines) == 1 and lines[0].startswith("foundry-ext average: error: "), err
    assert expected in lines[0], lines[0]
    assert _files(ckpts) == before  # nothing written, nothing changed: no output, no partial, no input touched
    assert not (ckpts / "pwned").exists()


def test_the_sharded_average_of_dcp_folders_is_the_mean(ckpts: Path, tmp_path: Path) -> None:
    out = tmp_path / "avg"
    before = _files(ckpts / "sharded")
    assert main(["average", *(str(ckpts / "sharded" / f"ep0-ba{b}") for b in (4, 8, 12)), "--out", str(out)]) == 0
    assert _files(ckpts / "sharded") == before
    expected = [_state("r1", b, 10 + i)["state"]["model"] for i, b in enumerate((4, 8, 12))]
    got = {k: torch.empty_like(v) for k, v in expected[0].items()}
    loaded = {"state": {"model": got}}
    dcp.load(loaded, checkpoint_id=out, no_dist=True)  # torch's own reader, as Composer's sharded load
    for name, tensor in got.items():
        mean = sum(m[name].double() for m in expected) / 3
        torch.testing.assert_close(tensor.double(), mean, rtol=0, atol=1e-6)
    newest = {"state": {"timestamp": {"Timestamp": {"batch": -1}}, "run_name": ""}}
    dcp.load(newest, checkpoint_id=out, no_dist=True)
    assert newest["state"]["timestamp"]["Timestamp"]["batch"] == 12 and newest["state"]["run_name"] == "r1"


def test_a_failure_while_writing_leaves_no_output(ckpts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(foundry_ext.average.sharded, "_copy", broken)
    out = tmp_path / "avg"
    with pytest.raises(OSError, match="disk full"):
        main(["average", str(ckpts / "sharded"), "--batches", ":12", "--out", str(out)])
    assert list(tmp_path.iterdir()) == []  # neither the output nor its hidden partial folder
