"""``foundry-ext inspect`` and :mod:`foundry_ext.checkpoint`: safe loading, refusals, and what is shown."""

from __future__ import annotations

import copy
import datetime
import gzip
import io
import json
import os
import pickle
import socket
import stat
import struct
import subprocess
import sys
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foundry_ext.checkpoint import (
    MAX_DEPTH,
    MAX_PICKLE_BYTES,
    SHARDED_KEY,
    CheckpointError,
    describe,
    load_checkpoint_safely,
)
from foundry_ext.checkpoint.pickle_check import walk_pickle
from foundry_ext.cli import main
from foundry_ext.trainer.plateau.scheduler import ReduceLROnPlateauScheduler
from tests.support.launcher import REPO
from tests.support.trainer_utils import BASE_LR, make_trainer


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


def _assert_refused(capsys: pytest.CaptureFixture, path: Path | str, message: str) -> str:
    """``inspect path`` exits 2 with one line, ``foundry-ext inspect: error: ...`` containing ``message``."""
    code, out, err = inspect(capsys, path)
    _assert_one_error_line(code, out, err, message)
    return err


def _assert_one_error_line(code: int, out: str, err: str, message: str) -> None:
    assert (code, out) == (2, ""), (code, out, err)
    assert err.startswith("foundry-ext inspect: error: ") and err.count("\n") == 1 and err.endswith("\n"), err
    assert message in err, err


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
    _assert_refused(capsys, path, "not on the allow-list")
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


def test_missing_path_and_plain_folder(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    for path, message in [
        (tmp_path / "missing.pt", "no such file or folder"),
        (tmp_path, "is a folder but not a sharded checkpoint (no .metadata)"),
    ]:
        _assert_refused(capsys, path, message)


def test_describe_without_path_needs_no_file() -> None:
    text = describe({"state": {"run_name": "r", "timestamp": {"Timestamp": {"epoch": 1, "batch": 2}}}})
    assert "run name     r" in text
    assert "epoch 1, batch 2, token ?, sample ?" in text
    assert "plateau      no ReduceLROnPlateauCallback state" in text


# -- hostile and odd inputs: every one gets a result or one line and exit 2 --------------------------------------------

# Runs the CLI on each path in one child process (one torch import), one JSON line [code, stdout, stderr] per path.
# A child process because the inputs below used to hang (a FIFO) or crash the interpreter (a deep tuple key): a
# regression must fail the test through the timeout or the exit status, not hang or kill the test session.
_CLI_BATCH = """
import contextlib, io, json, sys
from foundry_ext.cli import main
for path in sys.argv[1:]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["inspect", path])
    print(json.dumps([code, out.getvalue(), err.getvalue()]), flush=True)
"""


def _inspect_in_child(*paths: Path | str) -> list[tuple[int, str, str]]:
    # stdin is a pipe, so that /dev/stdin is a FIFO in the child; the timeout turns a hang into a failure
    result = subprocess.run(
        [sys.executable, "-c", _CLI_BATCH, *map(str, paths)],
        capture_output=True,
        text=True,
        stdin=subprocess.PIPE,
        timeout=300,
    )
    assert result.returncode == 0, f"the child died with status {result.returncode}: {result.stderr[-2000:]}"
    rows = [tuple(json.loads(line)) for line in result.stdout.splitlines()]
    assert len(rows) == len(paths), result.stdout
    return rows  # type: ignore[return-value]


def _block_device() -> str | None:
    for name in sorted(os.listdir("/dev")):
        if stat.S_ISBLK(os.stat(f"/dev/{name}").st_mode):
            return f"/dev/{name}"
    return None


def test_non_regular_files_are_refused_without_blocking(tmp_path: Path) -> None:
    """A FIFO with no writer used to hang ``inspect`` forever (``open`` blocks); devices and sockets are refused too."""
    fifo = tmp_path / "ep0-ba8-rank0.pt"
    os.mkfifo(fifo)
    sharded = tmp_path / "ep0-ba8"
    sharded.mkdir()
    os.mkfifo(sharded / ".metadata")
    (tmp_path / "latest-rank0.pt").symlink_to(fifo.name)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "s.sock"))
        cases = [
            (fifo, "is a FIFO (named pipe), not a checkpoint: only regular files (and sharded checkpoint folders)"),
            (tmp_path / "latest-rank0.pt", "latest-rank0.pt is a FIFO (named pipe), not a checkpoint"),
            (sharded, "ep0-ba8/.metadata is a FIFO (named pipe), not a checkpoint"),
            (tmp_path / "s.sock", "s.sock is a socket, not a checkpoint"),
            ("/dev/zero", "/dev/zero is a character device, not a checkpoint"),
            ("/dev/stdin", "/dev/stdin is a FIFO (named pipe), not a checkpoint"),
        ]
        if (device := _block_device()) is not None:
            cases.append((device, f"{device} is a block device, not a checkpoint"))
        results = _inspect_in_child(*(path for path, _ in cases))
    for (_, message), (code, out, err) in zip(cases, results, strict=True):
        _assert_one_error_line(code, out, err, message)


@pytest.mark.parametrize(
    ("links", "message"),
    [
        pytest.param({"a": "a"}, "a is a symlink loop: {tmp}/a -> a", id="a->a"),
        pytest.param({"a": "b", "b": "a"}, "a is a symlink loop: {tmp}/a -> b -> a", id="a->b->a"),
        pytest.param(
            {"latest-rank0.pt": "ep0-ba8-rank0.pt", "ep0-ba8-rank0.pt": "latest-rank0.pt"},
            "is a symlink loop: {tmp}/latest-rank0.pt -> ep0-ba8-rank0.pt -> latest-rank0.pt",
            id="latest",
        ),
        pytest.param({"d": "d"}, "d/x.pt: too many levels of symbolic links (a symlink loop in its path)", id="folder"),
    ],
)
def test_symlink_loop_is_named(tmp_path: Path, links: dict[str, str], message: str, capsys) -> None:
    """A loop used to be reported as a symlink to a file "which does not exist"."""
    for name, target in links.items():
        (tmp_path / name).symlink_to(target)
    first = next(iter(links))
    path = tmp_path / first / "x.pt" if first == "d" else tmp_path / first
    err = _assert_refused(capsys, path, message.format(tmp=tmp_path))
    assert "does not exist" not in err


def test_dangling_symlink_chain_names_every_hop(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "latest-rank0.pt").symlink_to("ep0-ba8-rank0.pt")
    (tmp_path / "ep0-ba8-rank0.pt").symlink_to("gone.pt")
    _assert_refused(capsys, tmp_path / "latest-rank0.pt", "is a symlink to ep0-ba8-rank0.pt -> gone.pt, which does not")


# a state that describe shows in full; each row of the table below breaks one field of it
_STATE: dict[str, Any] = {
    "run_name": "r",
    "timestamp": {
        "Timestamp": {"epoch": 1, "batch": 2, "token": 3, "sample": 4, "total_wct": datetime.timedelta(seconds=5)}
    },
    "metadata": {
        "composer_env_info": {"composer_version": "0.32.1"},
        "torch_version": "2.7.0",
        "world_size": 1,
        "device": "cpu",
        "precision": "fp32",
    },
    "optimizers": {"SGD": {"param_groups": [{"lr": 0.1, "initial_lr": 0.2}]}},
    "schedulers": {"LambdaLR": {"last_epoch": 2, "base_lrs": [0.2], "_last_lr": [0.1]}},
    "callbacks": {
        "ReduceLROnPlateauCallback": {"plateau": {"best": 3.0, "scale": 0.5}, "window_sum": 0.0, "window_count": 0}
    },
}
_ROWS = {  # what each row shows for _STATE
    "run name": "run name     r",
    "timestamp": "timestamp    epoch 1, batch 2, token 3, sample 4 (training time 0:00:05)",
    "versions": "versions     composer 0.32.1, torch 2.7.0, foundry-ext not stored",
    "saved by": "saved by     world size 1, device cpu, precision fp32",
    "optimizer": "optimizer    SGD group 0: lr 0.1 (initial_lr 0.2)",
    "schedulers": "schedulers   LambdaLR: last_epoch 2, base_lrs [0.2], _last_lr [0.1]",
    "plateau": "plateau      best 3.0, scale 0.5",
    "window": "             train-loss window: sum 0.0, count 0",
    "callbacks": "callbacks    ReduceLROnPlateauCallback",
}
_PLATEAU = "state.callbacks.ReduceLROnPlateauCallback"


def _replaced(state: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    state = copy.deepcopy(state)
    node = state
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return state


@pytest.mark.parametrize(
    ("path", "value", "rows"),
    [
        pytest.param(("timestamp",), 5, {"timestamp": "state.timestamp: expected a mapping, got int 5"}, id="ts"),
        pytest.param(
            ("timestamp", "Timestamp"), [],
            {"timestamp": "state.timestamp.Timestamp: expected a mapping, got list of 0 items"}, id="ts.Timestamp",
        ),
        pytest.param(
            ("timestamp", "Timestamp", "batch"), "2",
            {"timestamp": "state.timestamp.Timestamp.batch: expected an integer, got str '2'"}, id="ts.batch",
        ),
        pytest.param(
            ("timestamp", "Timestamp", "total_wct"), 5.0,
            {"timestamp": "state.timestamp.Timestamp.total_wct: expected a timedelta, got float 5.0"}, id="ts.wct",
        ),
        pytest.param(("run_name",), 5, {"run name": "state.run_name: expected a string, got int 5"}, id="run_name"),
        pytest.param(
            ("metadata",), 5,
            {
                "versions": "state.metadata: expected a mapping, got int 5",
                "saved by": "state.metadata: expected a mapping, got int 5",
            },
            id="metadata",
        ),
        pytest.param(
            ("metadata", "composer_env_info"), [1],
            {"versions": "state.metadata.composer_env_info: expected a mapping, got list of 1 item"}, id="env",
        ),
        pytest.param(
            ("metadata", "torch_version"), 2.7,
            {"versions": "state.metadata.torch_version: expected a string, got float 2.7"}, id="torch_version",
        ),
        pytest.param(
            ("metadata", "world_size"), "1",
            {"saved by": "state.metadata.world_size: expected an integer, got str '1'"}, id="world_size",
        ),
        pytest.param(
            ("metadata", "device"), None, {"saved by": "world size 1, device ?, precision fp32"}, id="device-missing"
        ),
        pytest.param(("optimizers",), 5, {"optimizer": "state.optimizers: expected a mapping, got int 5"}, id="opts"),
        pytest.param(
            ("optimizers", "SGD"), 5, {"optimizer": "state.optimizers.SGD: expected a mapping, got int 5"}, id="opt"
        ),
        pytest.param(
            ("optimizers", "SGD", "param_groups"), 5,
            {"optimizer": "state.optimizers.SGD.param_groups: expected a list, got int 5"}, id="param_groups",
        ),
        pytest.param(
            ("optimizers", "SGD", "param_groups"), [5],
            {"optimizer": "state.optimizers.SGD.param_groups[0]: expected a mapping, got int 5"}, id="param_groups[0]",
        ),
        pytest.param(
            ("optimizers", "SGD", "param_groups"), [{"lr": 0.1}, 5],
            {
                "optimizer": "SGD group 0: lr 0.1",
                "": "state.optimizers.SGD.param_groups[1]: expected a mapping, got int 5",
            },
            id="param_groups[1]",
        ),
        pytest.param(
            ("optimizers", "SGD", "param_groups"), [{"lr": torch.ones(2)}],
            {
                "optimizer": "state.optimizers.SGD.param_groups[0].lr: expected a number, "
                "got Tensor of shape (2,), dtype torch.float32"
            },
            id="lr-tensor",
        ),
        pytest.param(
            ("optimizers", "SGD", "param_groups"), [{"lr": True}],
            {"optimizer": "state.optimizers.SGD.param_groups[0].lr: expected a number, got bool True"}, id="lr-bool",
        ),
        pytest.param(
            ("optimizers", "SGD", "param_groups"), [{"lr": torch.tensor(0.5, dtype=torch.float64), "initial_lr": "x"}],
            {"optimizer": "state.optimizers.SGD.param_groups[0].initial_lr: expected a number, got str 'x'"},
            id="initial_lr",
        ),
        pytest.param(
            ("schedulers",), [1], {"schedulers": "state.schedulers: expected a mapping, got list of 1 item"}, id="sch"
        ),
        pytest.param(
            ("schedulers", "LambdaLR"), 5,
            {"schedulers": "state.schedulers.LambdaLR: expected a mapping, got int 5"}, id="sched",
        ),
        pytest.param(
            ("schedulers", "LambdaLR", "last_epoch"), 1.5,
            {"schedulers": "state.schedulers.LambdaLR.last_epoch: expected an integer, got float 1.5"}, id="last_epoch",
        ),
        pytest.param(
            ("schedulers", "LambdaLR", "base_lrs"), 0.2,
            {"schedulers": "state.schedulers.LambdaLR.base_lrs: expected a list of numbers, got float 0.2"},
            id="base_lrs",
        ),
        pytest.param(
            ("schedulers", "LambdaLR", "_last_lr"), [None],
            {"schedulers": "state.schedulers.LambdaLR._last_lr[0]: expected a number, got None"}, id="_last_lr",
        ),
        pytest.param(
            ("callbacks",), 5,
            {
                "callbacks": "state.callbacks: expected a mapping, got int 5",
                "plateau": "no ReduceLROnPlateauCallback state (not a reduce_lr_on_plateau run)",
            },
            id="callbacks",
        ),
        pytest.param(
            ("callbacks", "ReduceLROnPlateauCallback"), 5,
            {"plateau": f"{_PLATEAU}: expected a mapping, got int 5"}, id="plateau",
        ),
        pytest.param(
            ("callbacks", "ReduceLROnPlateauCallback", "plateau"), [1, 2],
            {"plateau": f"{_PLATEAU}.plateau: expected a mapping, got list of 2 items"}, id="plateau.plateau",
        ),
        pytest.param(
            ("callbacks", "ReduceLROnPlateauCallback", "plateau", "best"), "3.0",
            {"plateau": f"{_PLATEAU}.plateau.best: expected a number, got str '3.0'"}, id="plateau.best",
        ),
        pytest.param(
            ("callbacks", "ReduceLROnPlateauCallback", "window_sum"), {"a": 1},
            {"plateau": "best 3.0, scale 0.5", "": f"{_PLATEAU}.window_sum: expected a number, got dict with 1 key"},
            id="window_sum",
        ),
        pytest.param(
            ("callbacks", "ReduceLROnPlateauCallback", "window_count"), 1.5,
            {"": f"{_PLATEAU}.window_count: expected an integer, got float 1.5"}, id="window_count",
        ),
    ],
)  # fmt: skip
def test_unexpected_structure_is_shown_in_its_row(
    tmp_path: Path, path: tuple[str, ...], value: Any, rows: dict[str, str], capsys: pytest.CaptureFixture
) -> None:
    """Each used to be a traceback (``AttributeError: 'int' object has no attribute 'get'``, ...).

    Now the row says what is unexpected, with its path in the checkpoint, and the other rows are still shown; the
    exit status stays 0 (the checkpoint was read; only that field is not understood).
    """
    checkpoint = tmp_path / "odd.pt"
    torch.save({"state": _replaced(_STATE, path, value)}, checkpoint)
    code, out, err = inspect(capsys, checkpoint)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    for label, text in rows.items():
        assert f"{label:<12} {text}" in lines, out
    broken = {"run_name": "run name", "timestamp": "timestamp", "optimizers": "optimizer", "schedulers": "schedulers"}
    for key, label in broken.items():
        if key != path[0]:
            assert _ROWS[label] in lines, out  # the rest is still shown


@pytest.mark.parametrize(
    ("state", "row"),
    [
        pytest.param({"timestamp": 5}, "timestamp    state.timestamp: expected a mapping, got int 5", id="timestamp"),
        pytest.param(
            {"timestamp": {}, "metadata": 5},
            "versions     state.metadata: expected a mapping, got int 5",
            id="metadata",
        ),
        pytest.param(
            {"optimizers": {"AdamW": {"param_groups": [5]}}},
            "optimizer    state.optimizers.AdamW.param_groups[0]: expected a mapping, got int 5",
            id="param_groups",
        ),
        pytest.param(
            {"timestamp": {}, "callbacks": {"ReduceLROnPlateauCallback": 5}},
            f"plateau      {_PLATEAU}: expected a mapping, got int 5",
            id="plateau",
        ),
    ],
)
def test_reported_odd_checkpoints(tmp_path: Path, state: dict[str, Any], row: str, capsys) -> None:
    """The exact files from the reports: ``torch.save({'state': {'timestamp': 5}}, f)`` and its kin."""
    checkpoint = tmp_path / "odd.pt"
    torch.save({"state": state}, checkpoint)
    code, out, err = inspect(capsys, checkpoint)
    assert (code, err) == (0, "")
    assert row in out.splitlines(), out


_KEYS = st.sampled_from(
    [
        "timestamp", "Timestamp", "epoch", "batch", "token", "sample", "total_wct", "metadata", "composer_env_info",
        "composer_version", "torch_version", "foundry_ext_version", "world_size", "device", "precision", "run_name",
        "optimizers", "SGD", "param_groups", "lr", "initial_lr", "schedulers", "LambdaLR", "last_epoch", "base_lrs",
        "_last_lr", "callbacks", "ReduceLROnPlateauCallback", "plateau", "best", "window_sum", "window_count",
        SHARDED_KEY, "files", "tensors",
    ]
) | st.text(max_size=5) | st.integers(-3, 3)  # fmt: skip
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)  # lone surrogates and newlines included
    | st.binary(max_size=8)
    | st.builds(datetime.timedelta, seconds=st.integers(0, 10**6))
    | st.builds(torch.tensor, st.floats(allow_nan=True))
    | st.builds(torch.zeros, st.integers(0, 3))
    | st.builds(torch.tensor, st.booleans())
    | st.builds(np.int64, st.integers(-5, 5))
    | st.builds(np.float64, st.floats(allow_nan=True))
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=12,
)


@pytest.mark.parametrize(("name", "shown"), [("", "''"), ("   ", "'   '"), ("\t", "'\\t'")])
def test_blank_text_is_shown_quoted(tmp_path: Path, name: str, shown: str, capsys: pytest.CaptureFixture) -> None:
    """A blank run name used to print an empty row (``run name     ``); found by the property test below."""
    checkpoint = tmp_path / "blank.pt"
    torch.save({"state": _replaced(_STATE, ("run_name",), name)}, checkpoint)
    code, out, err = inspect(capsys, checkpoint)
    assert (code, err) == (0, "")
    assert f"run name     {shown}" in out.splitlines(), out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(state=st.dictionaries(_KEYS, _VALUES, max_size=6).map(lambda d: {"timestamp": {}, **d}))
def test_any_structure_gives_rows_or_one_error_line(tmp_path: Path, state: dict[Any, Any], capsys) -> None:
    """Random nested dicts, lists, tuples and scalars under ``state`` with the keys ``describe`` reads: ``inspect``
    exits 0 with one row per line, or 2 with one error line; it never raises."""
    checkpoint = tmp_path / "fuzz.pt"
    torch.save({"state": state}, checkpoint)
    code, out, err = inspect(capsys, checkpoint)
    if code == 2:
        _assert_one_error_line(code, out, err, "")
        return
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith("checkpoint   ") and lines[1].startswith("run name     ")
    for line in lines:
        assert len(line) > 13 and line[12] == " " and line.isprintable(), line


@pytest.fixture(scope="module")
def legacy_checkpoint() -> bytes:
    """A checkpoint-shaped state with a tensor, in torch's legacy format (no CRC: every flipped byte reaches torch)."""
    buffer = io.BytesIO()
    torch.save({"state": {**_STATE, "model": {"w": torch.arange(6.0)}}}, buffer, _use_new_zipfile_serialization=False)
    return buffer.getvalue()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_corrupted_bytes_give_rows_or_one_error_line(
    tmp_path: Path, legacy_checkpoint: bytes, data: st.DataObject, capsys: pytest.CaptureFixture
) -> None:
    """A real file with 1-4 random bytes changed, perhaps cut short: rows or one error line, never a traceback.

    (3,000 such files, half of them zip checkpoints, were also run by hand: all answered, the slowest in 0.2 s.)
    """
    content = bytearray(legacy_checkpoint)
    for _ in range(data.draw(st.integers(1, 4))):
        content[data.draw(st.integers(0, len(content) - 1))] = data.draw(st.integers(0, 255))
    content = content[: data.draw(st.integers(1, len(content)))]
    path = tmp_path / "corrupt.pt"
    path.write_bytes(content)
    code, out, err = inspect(capsys, path)
    if code == 2:
        _assert_one_error_line(code, out, err, "")
    else:
        assert (code, err) == (0, "") and out.startswith("checkpoint   ")


def _deep_list_pickle(depth: int) -> bytes:
    """``{"state": {"timestamp": [[...[1]...]]}}`` nested ``depth`` lists deep, as protocol-2 opcodes.

    Written by hand because ``torch.save`` of such a list needs a raised recursion limit and a larger C stack.
    """
    return (
        b"\x80\x02}X\x05\x00\x00\x00state}X\x09\x00\x00\x00timestamp"
        + b"]" * depth  # depth empty lists on the stack
        + b"K\x01"
        + b"a" * depth  # each APPEND puts the one above into the one below
        + b"ss."
    )


def _deep_tuple_key_pickle(depth: int) -> bytes:
    """``{"state": {"timestamp": {((...(1,)...),): 1}}}``: a tuple nested ``depth`` deep used as a dict key."""
    return b"\x80\x02}X\x05\x00\x00\x00state}X\x09\x00\x00\x00timestamp}K\x01" + b"\x85" * depth + b"K\x01sss."


def _legacy_file(body: bytes) -> bytes:
    """A legacy (``_use_new_zipfile_serialization=False``) torch file whose object pickle is ``body``."""
    from torch.serialization import MAGIC_NUMBER, PROTOCOL_VERSION

    sys_info = {"protocol_version": PROTOCOL_VERSION, "little_endian": True, "type_sizes": {"short": 2, "int": 4}}
    header = b"".join(pickle.dumps(x, protocol=2) for x in (MAGIC_NUMBER, PROTOCOL_VERSION, sys_info))
    return header + body + pickle.dumps([], protocol=2)


def _zip_file(path: Path, body: bytes) -> None:
    """A torch zip file (the archive ``torch.save`` writes, as it writes it) whose data.pkl is ``body``."""
    torch.save({}, path)
    with zipfile.ZipFile(path) as archive:
        entries = {info.filename: archive.read(info) for info in archive.infolist()}
    entries[next(name for name in entries if name.endswith("/data.pkl"))] = body
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)


def test_deep_nesting_is_refused_before_unpickling(tmp_path: Path) -> None:
    """A 100,000-deep list used to give ``RecursionError``; a 1,000,000-deep tuple key crashes ``torch.load`` itself.

    torch's weights-only unpickler builds the deep list (it is iterative), but hashing the deep tuple to use it as a
    dict key recurses in C and the interpreter dies with SIGSEGV: no ``except`` can catch that, so the depth is
    decided from the opcodes before anything is unpickled. Run in a child process so that a regression fails here
    instead of killing the test session.
    """
    paths = []
    for name, body in [("list", _deep_list_pickle(100_000)), ("tuple", _deep_tuple_key_pickle(1_000_000))]:
        _zip_file(tmp_path / f"{name}.pt", body)
        (tmp_path / f"{name}-legacy.pt").write_bytes(_legacy_file(body))
        paths += [tmp_path / f"{name}.pt", tmp_path / f"{name}-legacy.pt"]
    for path, (code, out, err) in zip(paths, _inspect_in_child(*paths), strict=True):
        _assert_one_error_line(code, out, err, f"{path.name} is not a checkpoint: it nests containers more than")
        assert f"more than {MAX_DEPTH} levels deep (the limit;" in err


def _depth(checkpoint: Path) -> int:
    """The nesting depth of a zip checkpoint's data.pkl as the pre-unpickling walk measures it (a flat dict is 1)."""
    with zipfile.ZipFile(checkpoint) as archive:
        data = archive.read(next(n for n in archive.namelist() if n.endswith("/data.pkl")))
    return walk_pickle(io.BytesIO(data), checkpoint.name)


def test_nesting_up_to_the_limit_is_read(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Exactly MAX_DEPTH levels are read and shown; one more is refused."""
    checkpoint = tmp_path / "nested.pt"
    nested: Any = 1
    for _ in range(MAX_DEPTH - 4):  # the file's dict, state, callbacks, the callback's dict, then the lists
        nested = [nested]
    torch.save({"state": {**_STATE, "callbacks": {"Deep": {"x": nested}}}}, checkpoint)
    assert _depth(checkpoint) == MAX_DEPTH
    code, out, _ = inspect(capsys, checkpoint)
    assert code == 0 and "callbacks    Deep" in out
    torch.save({"state": {**_STATE, "callbacks": {"Deep": {"x": [nested]}}}}, checkpoint)
    _assert_refused(capsys, checkpoint, f"it nests containers more than {MAX_DEPTH} levels deep")


def test_real_checkpoint_depth_is_far_below_the_limit(run_dir: Path) -> None:
    """docs/cli.md quotes these figures: the real Trainer's checkpoint nests 9 deep and its data.pkl is small."""
    assert _depth(run_dir / "ep0-ba16-rank0.pt") == 9
    with zipfile.ZipFile(run_dir / "ep0-ba16-rank0.pt") as archive:
        size = next(i.file_size for i in archive.infolist() if i.filename.endswith("/data.pkl"))
    assert size < MAX_PICKLE_BYTES / 1_000


def test_container_filled_after_use_is_measured_exactly() -> None:
    """``a = []; p = [a]``, then ``a.append(<deep list>)``: p is deeper than it was when it was built.

    ``pickle`` never writes this (it fills a container before using it), but a handmade file can; the walk then
    measures the whole graph again at the end.
    """

    def late_fill(depth: int) -> bytes:
        return (
            b"\x80\x02]q\x00"  # a = [], memo 0
            + b"]h\x00a"  # p = [a]
            + b"h\x00"  # a again
            + b"]" * depth
            + b"K\x01"
            + b"a" * depth  # a list `depth` deep
            + b"a0."  # a.append(it), pop a, p is the result
        )

    assert walk_pickle(io.BytesIO(late_fill(MAX_DEPTH - 2)), "late.pt") == MAX_DEPTH
    with pytest.raises(CheckpointError, match=f"more than {MAX_DEPTH} levels deep"):
        walk_pickle(io.BytesIO(late_fill(MAX_DEPTH - 1)), "late.pt")


def test_reference_cycle_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``l = []; l.append(l)`` pickles fine and torch.load builds it; ``describe`` would loop on it."""
    looped: list[Any] = []
    looped.append(looped)
    torch.save({"state": {"timestamp": looped}}, tmp_path / "cycle.pt")
    _assert_refused(capsys, tmp_path / "cycle.pt", "its pickle holds a reference cycle")


def _png() -> bytes:
    """A valid 1x1 grey PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    pixels = zlib.compress(b"\x00\x80")  # one row: filter byte 0, one grey pixel
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def _zip(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _tar(first_member: str) -> bytes:
    """A tar archive; its first member's name is written byte for byte (``\\udc80`` is the byte 0x80)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT, errors="surrogateescape") as archive:
        for name in (first_member, "pickle"):
            info = tarfile.TarInfo(name)
            info.size = 4
            archive.addfile(info, io.BytesIO(b"data"))
    return buffer.getvalue()


def _safetensors() -> bytes:
    header = b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
    return len(header).to_bytes(8, "little") + header + b"\x00" * 4


@pytest.mark.parametrize(
    ("content", "looks_like"),
    [
        pytest.param(lambda: b"run_name: r\nscheduler:\n  name: wsd\n", "a text file", id="yaml"),
        pytest.param(lambda: b"not a checkpoint\n", "a text file", id="text"),
        pytest.param(lambda: b"", "an empty file", id="empty"),
        pytest.param(_png, "a PNG image", id="png"),
        pytest.param(
            lambda: _zip({"d/a.txt": b"hi"}), "a zip archive without data.pkl, so not written by torch.save", id="zip"
        ),
        pytest.param(
            lambda: gzip.compress(b"PK\x03\x04"),
            "gzip-compressed data (compressed or tar checkpoints are not read; decompress/extract it first)",
            id="gzip",
        ),
        pytest.param(_safetensors, "a safetensors file (weights only, no training state)", id="safetensors"),
        pytest.param(lambda: _tar("notes.txt"), "a tar archive (compressed or tar checkpoints are not read;", id="tar"),
        pytest.param(lambda: _tar("\udc80\x02"), "a tar archive", id="tar-starting-like-a-pickle"),
        pytest.param(
            lambda: _zip({"data.pkl": pickle.dumps({}, protocol=2)}),
            "a zip archive whose entries are not in one folder, so not written by torch.save",
            id="zip-no-folder",
        ),
        pytest.param(
            lambda: _zip({"archive/data.pkl": pickle.dumps({}, protocol=2), "archive/DATA.PKL": b""}),
            "a zip archive with duplicate entry names, which torch.save never writes",
            id="zip-duplicates",
        ),
        pytest.param(
            lambda: bytes(range(256)), "binary data of an unknown kind (first bytes 00 01 02 03 04 05 06 07)", id="bin"
        ),
        pytest.param(
            lambda: pickle.dumps({"state": {"timestamp": 1}}, protocol=2),
            "a pickle that torch.save did not write",
            id="pickle",
        ),
    ],
)  # fmt: skip
def test_not_a_checkpoint_says_what_it_looks_like(
    tmp_path: Path, content: Callable[[], bytes], looks_like: str, capsys: pytest.CaptureFixture
) -> None:
    """These used to print torch's words (``Unsupported operand 118``, ``EOFError``, ...)."""
    path = tmp_path / "ep0-ba8-rank0.pt"
    path.write_bytes(content())
    _assert_refused(capsys, path, f"{path} is not a checkpoint: it is {looks_like}")


def test_torchscript_archive_is_not_a_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "model.pt"
    torch.jit.script(torch.nn.Linear(1, 1)).save(str(path))
    _assert_refused(capsys, path, f"{path} is not a checkpoint: it is a TorchScript archive (torch.jit.save)")


def _bytes_read() -> int:
    """Bytes this process has read through read(2) so far (page cache included)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs Linux's /proc/self/io to count bytes read")
@pytest.mark.parametrize(
    ("head", "message"),
    [
        pytest.param(b"", "is not a checkpoint: it is binary data of an unknown kind (first bytes 00 00", id="zeros"),
        pytest.param(b"a: 1\n", "is not a checkpoint: it is binary data of an unknown kind", id="text-then-zeros"),
        pytest.param(
            b"PK\x03\x04", "is not a readable torch checkpoint (truncated, or not written by torch.save)", id="zip"
        ),
        pytest.param(b"\x80\x02", "opcode b'\\x00' unknown", id="pickle-header"),
        pytest.param(
            b"\x80\x02\x8e" + (2**40).to_bytes(8, "little"), "its pickle is larger than 32 MiB", id="1TiB-bytes"
        ),
        pytest.param(b"\x80\x02c", "no newline found", id="endless-line"),
    ],
)  # fmt: skip
def test_large_non_checkpoint_is_not_read_to_its_end(
    tmp_path: Path, head: bytes, message: str, capsys: pytest.CaptureFixture
) -> None:
    """An 8 GiB file (sparse: it costs no disk) is refused after reading at most a few MB of it."""
    path = tmp_path / "huge.pt"
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(8 * 2**30)
    inspect(capsys, tmp_path / "missing.pt")  # imports what inspect needs, so that only reading the file is counted
    before = _bytes_read()
    _assert_refused(capsys, path, message)
    assert _bytes_read() - before < 8 * 2**20


def test_unprintable_path_stays_on_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "two\nlines.pt"
    path.write_text("text\n")
    _assert_refused(capsys, path, "two\\nlines.pt is not a checkpoint: it is a text file")


def test_shards_outside_the_folder_are_not_read(run_dir: Path, tmp_path: Path) -> None:
    """A .metadata that names ``../x`` or ``/dev/zero`` as a shard is refused, never followed."""
    import torch.distributed.checkpoint as dist_cp

    state = load_checkpoint_safely(run_dir / "ep0-ba8-rank0.pt")
    state.pop("rng")
    folder = tmp_path / "ep0-ba8"
    dist_cp.save(state_dict=state, storage_writer=dist_cp.FileSystemWriter(str(folder)))
    metadata = pickle.loads((folder / ".metadata").read_bytes())
    for info in metadata.storage_data.values():
        info.relative_path = "/dev/zero"
    (folder / ".metadata").write_bytes(pickle.dumps(metadata))
    with pytest.raises(CheckpointError, match=r"\.metadata names a shard outside the folder: '/dev/zero'"):
        load_checkpoint_safely(folder)


def test_a_save_folder_gives_its_latest_checkpoint_as_anneal_takes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 46: inspect refused a save folder that anneal accepts; now it reads the folder's latest, and says so."""
    from foundry_ext.cli import main

    fixture = REPO / "tests" / "resume" / "fixtures" / "plateau_resume" / "ep0-ba12-rank0.pt"
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    (folder / "ep0-ba12-rank0.pt").symlink_to(fixture)
    (folder / "latest-rank0.pt").symlink_to("ep0-ba12-rank0.pt")
    assert main(["inspect", str(folder)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{folder} is a save folder: its latest checkpoint, latest-rank0.pt"
    assert out[1].startswith(f"checkpoint   {folder}/latest-rank0.pt -> ep0-ba12-rank0.pt (monolithic")
    (folder / "latest-rank0.pt").unlink()  # a folder without a latest link: still refused in one line
    assert main(["inspect", str(folder)]) == 2
    assert "is a folder but not a sharded checkpoint" in capsys.readouterr().err
