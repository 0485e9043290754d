"""``foundry-ext inspect`` and :mod:`foundry_ext.checkpoint`: safe loading, refusals, and what is shown."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest
import torch

from foundry_ext.checkpoint import SHARDED_KEY, CheckpointError, describe, load_checkpoint_safely
from foundry_ext.cli import main
from foundry_ext.plateau import ReduceLROnPlateauScheduler
from tests.trainer_utils import BASE_LR, make_trainer


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real Composer run with the plateau adapter: checkpoints at batches 8 and 16, one cut at batch 12.

    Evals every 4 batches all return 3.0 and patience is 1: ba4 best, ba8 bad 1, ba12 cut (0.5), ba16 bad 1.
    """
    folder = tmp_path_factory.mktemp("run") / "checkpoints"
    scheduler = ReduceLROnPlateauScheduler(monitor="metrics/eval/Scripted", factor=0.5, patience=1)
    trainer, _ = make_trainer(
        [scheduler],
        max_duration="16ba",
        eval_values=[3.0] * 4,
        eval_interval="4ba",
        run_name="inspect-demo",
        save_folder=str(folder),
        save_interval="8ba",
    )
    trainer.fit()
    trainer.close()
    return folder


def inspect(capsys: pytest.CaptureFixture, path: Path | str) -> tuple[int, str, str]:
    code = main(["inspect", str(path)])
    out, err = capsys.readouterr()
    return code, out, err


def test_real_checkpoint_shows_time_lr_and_plateau(run_dir: Path, capsys: pytest.CaptureFixture) -> None:
    code, out, err = inspect(capsys, run_dir / "ep0-ba8-rank0.pt")
    assert (code, err) == (0, "")
    assert "run name     inspect-demo" in out
    assert "timestamp    epoch 0, batch 8, token 0, sample 32" in out
    assert f"SGD group 0: lr {BASE_LR!r} (initial_lr {BASE_LR!r})" in out
    assert f"LambdaLR: last_epoch 8, base_lrs [{BASE_LR!r}], _last_lr [{BASE_LR!r}]" in out
    assert "best 3.0, num_bad_evals 1, cooldown_counter 0, scale 1.0, cuts 0, last_value 3.0, num_evals 2" in out
    assert "composer 0.32" in out

    code, out, _ = inspect(capsys, run_dir / "ep0-ba16-rank0.pt")
    assert code == 0
    assert "batch 16" in out
    assert f"lr {BASE_LR * 0.5!r}" in out
    assert "scale 0.5, cuts 1" in out and "num_evals 4" in out


def test_latest_symlink_is_resolved_and_shown(run_dir: Path, capsys: pytest.CaptureFixture) -> None:
    latest = run_dir / "latest-rank0.pt"
    assert latest.is_symlink()
    code, out, _ = inspect(capsys, latest)
    assert code == 0
    assert f"checkpoint   {latest} -> ep0-ba16-rank0.pt (monolithic" in out
    assert "batch 16" in out


def test_dangling_symlink(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "latest-rank0.pt").symlink_to("ep0-ba99-rank0.pt")
    code, _, err = inspect(capsys, tmp_path / "latest-rank0.pt")
    assert code == 2
    assert "is a symlink to ep0-ba99-rank0.pt, which does not exist" in err


def test_sharded_folder_shows_non_tensor_state(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Written as Composer writes FSDP sharded checkpoints: dist_cp.save with a FileSystemWriter on the folder."""
    import torch.distributed.checkpoint as dist_cp

    state = load_checkpoint_safely(run_dir / "ep0-ba16-rank0.pt")
    state.pop("rng")
    folder = tmp_path / "ep0-ba16"
    dist_cp.save(state_dict=state, storage_writer=dist_cp.FileSystemWriter(str(folder)))
    assert sorted(os.listdir(folder)) == [".metadata", "__0_0.distcp"]

    loaded = load_checkpoint_safely(folder)
    assert loaded[SHARDED_KEY]["tensors"] > 0
    assert (
        loaded["state"]["callbacks"]["ReduceLROnPlateauCallback"]
        == state["state"]["callbacks"]["ReduceLROnPlateauCallback"]
    )
    (tmp_path / "latest-sharded-rank0").symlink_to("ep0-ba16")
    code, out, _ = inspect(capsys, tmp_path / "latest-sharded-rank0")
    assert code == 0
    assert "-> ep0-ba16 (sharded, 1 .distcp file(s))" in out
    assert "batch 16" in out and "scale 0.5, cuts 1" in out and f"lr {BASE_LR * 0.5!r}" in out
    assert "tensors (model weights and optimizer moments) stay in the shards" in out


class _Evil:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("writer", ["torch.save", "pickle"])
def test_malicious_pickle_is_refused_and_never_runs(tmp_path: Path, writer: str, capsys: pytest.CaptureFixture) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    payload = {"state": {"timestamp": _Evil(marker)}}
    if writer == "torch.save":
        torch.save(payload, path)
    else:
        path.write_bytes(pickle.dumps(payload, protocol=2))
    with pytest.raises(CheckpointError, match=r"refusing to load .*: it needs (posix|os)\.system"):
        load_checkpoint_safely(path)
    code, out, err = inspect(capsys, path)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "not on the allow-list" in err
    assert not marker.exists()


def test_malicious_sharded_metadata_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / ".metadata").write_bytes(pickle.dumps(_Evil(marker)))
    with pytest.raises(CheckpointError, match=r"refusing to load .*\.metadata: it needs (posix|os)\.system"):
        load_checkpoint_safely(tmp_path / "ckpt")
    assert not marker.exists()


def test_truncated_checkpoint(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data = (run_dir / "ep0-ba8-rank0.pt").read_bytes()
    path = tmp_path / "cut.pt"
    path.write_bytes(data[: len(data) // 2])
    code, out, err = inspect(capsys, path)
    assert code == 2 and out == ""
    assert err.startswith(f"foundry-ext inspect: error: {path} is not a readable torch checkpoint (truncated")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param({"a": 1}, "is a torch file but not a Composer checkpoint (no 'state' dict; found: a)", id="dict"),
        pytest.param({"state": {"a": 1}}, "is not a Composer checkpoint: its 'state' has none of", id="state"),
        pytest.param([1, 2], "not a Composer checkpoint (no 'state' dict; found: list)", id="list"),
    ],
)
def test_not_a_composer_checkpoint(tmp_path: Path, content: object, message: str, capsys) -> None:
    path = tmp_path / "other.pt"
    torch.save(content, path)
    code, _, err = inspect(capsys, path)
    assert code == 2
    assert message in err


def test_text_file_missing_path_and_plain_folder(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a checkpoint\n")
    for path, message in [
        (text, "is not a readable torch checkpoint"),
        (tmp_path / "missing.pt", "no such file or folder"),
        (tmp_path, "is a folder but not a sharded checkpoint (no .metadata)"),
    ]:
        code, out, err = inspect(capsys, path)
        assert (code, out) == (2, ""), path
        assert message in err and err.count("\n") == 1, err


def test_describe_without_path_needs_no_file() -> None:
    text = describe({"state": {"run_name": "r", "timestamp": {"Timestamp": {"epoch": 1, "batch": 2}}}})
    assert "run name     r" in text
    assert "epoch 1, batch 2, token ?, sample ?" in text
    assert "plateau      no ReduceLROnPlateauCallback state" in text
