"""``callbacks.checkpoint_guard``: a partial checkpoint or a missing ``latest`` never blocks or corrupts a restart.

The Trainer tests restart a real Composer ``Trainer`` (``autoresume=True, save_overwrite=False``, as docs/resume.md
recommends) on a copy of a real run's save folder, damaged the way a kill damages it, once without the guard (to
show the failure is real) and once with it. The resumed run's final checkpoint must equal the uninterrupted run's
bitwise (weights, optimizer, schedulers), and every completed checkpoint must keep its bytes.

The completeness checks are run against real checkpoints: every prefix of a Composer checkpoint file, and sharded
folders written by ``torch.distributed.checkpoint.save`` with a ``FileSystemWriter`` (what Composer calls for FSDP
``state_dict_type: sharded``; FSDP itself needs CUDA and is not run here).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import struct
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch

from foundry_ext.checkpoint import load_checkpoint_safely
from foundry_ext.config.errors import ConfigError
from foundry_ext.trainer.checkpoint_guard import CheckpointGuard
from foundry_ext.trainer.checkpoint_guard.integrity import file_problem, sharded_problem
from foundry_ext.trainer.checkpoint_guard.recovery import Layout, apply, plan
from tests.support.trainer_utils import make_trainer

GUARD_LOG = "foundry_ext.trainer.checkpoint_guard.callback"
CONFLICT = "may conflict with a future checkpoint of the current run"


# -- a real run to damage ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted run: checkpoints at batches 4, 8 and 12, ``latest-rank0.pt -> ep0-ba12-rank0.pt``."""
    folder = tmp_path_factory.mktemp("reference") / "checkpoints"
    trainer, _ = _trainer(folder, autoresume=False)
    trainer.fit()
    trainer.close()
    assert os.readlink(folder / "latest-rank0.pt") == "ep0-ba12-rank0.pt"
    return folder


def _trainer(folder: Path, *, guard: CheckpointGuard | None = None, **kwargs: Any) -> tuple[Any, Any]:
    settings: dict[str, Any] = {
        "run_name": "guarded",
        "save_folder": str(folder),
        "save_interval": "4ba",
        "max_duration": "12ba",
        "autoresume": True,
        "save_overwrite": False,
        **kwargs,
    }
    return make_trainer([], callbacks=[guard] if guard else [], **settings)


def _copy(reference: Path, tmp_path: Path, *names: str) -> Path:
    folder = tmp_path / "checkpoints"
    folder.mkdir(parents=True)
    for name in names:
        shutil.copyfile(reference / name, folder / name)
    return folder


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _same_training_state(a: Path, b: Path) -> None:
    """Weights, optimizer moments, LambdaLR and timestamp counters bitwise equal (wall-clock times excluded)."""
    sa, sb = load_checkpoint_safely(a)["state"], load_checkpoint_safely(b)["state"]
    for key in ("model", "optimizers"):
        flat_a, flat_b = _flatten(sa[key]), _flatten(sb[key])
        assert flat_a.keys() == flat_b.keys()
        for name, value in flat_a.items():
            other = flat_b[name]
            same = torch.equal(value, other) if isinstance(value, torch.Tensor) else value == other
            assert same, f"{key}/{name} differs"
    assert sa["schedulers"] == sb["schedulers"]
    counters = ("epoch", "batch", "sample", "token", "batch_in_epoch", "sample_in_epoch")
    ta, tb = sa["timestamp"]["Timestamp"], sb["timestamp"]["Timestamp"]
    assert {k: ta[k] for k in counters} == {k: tb[k] for k in counters}


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict):
        return {k: v for key, child in node.items() for k, v in _flatten(child, f"{prefix}{key}/").items()}
    if isinstance(node, (list, tuple)):
        return {k: v for i, child in enumerate(node) for k, v in _flatten(child, f"{prefix}{i}/").items()}
    return {prefix.rstrip("/"): node}


def _guard_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == GUARD_LOG and r.levelno >= logging.WARNING]


def _resume(folder: Path, guard: CheckpointGuard | None = None, **kwargs: Any) -> Any:
    """Run the same command again (a new Trainer on the folder); return the batches it trained."""
    trainer, recorder = _trainer(folder, guard=guard, **kwargs)
    trainer.fit()
    trainer.close()
    return sorted(recorder.lrs)


# -- a kill during a write ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kept", [0.0, 0.01, 0.5, 0.99], ids=["0-bytes", "1%", "half", "99%"])
def test_partial_checkpoint_is_quarantined_with_one_warning_and_the_run_resumes(
    reference: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, kept: float
) -> None:
    """Killed while writing ep0-ba12 (users saw 0 bytes, and about half): latest still -> ep0-ba8."""
    folder = _copy(reference, tmp_path, "ep0-ba4-rank0.pt", "ep0-ba8-rank0.pt")
    data = (reference / "ep0-ba12-rank0.pt").read_bytes()
    partial = data[: int(len(data) * kept)]
    (folder / "ep0-ba12-rank0.pt").write_bytes(partial)
    (folder / "latest-rank0.pt").symlink_to("ep0-ba8-rank0.pt")
    before = {name: _sha(folder / name) for name in ("ep0-ba4-rank0.pt", "ep0-ba8-rank0.pt")}

    with pytest.raises(FileExistsError, match=CONFLICT):  # without the guard: every restart fails
        _resume(folder)

    caplog.set_level(logging.INFO)
    batches = _resume(folder, CheckpointGuard())
    assert batches == [8, 9, 10, 11]  # resumed from ep0-ba8, not from scratch
    lines = _guard_lines(caplog)
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"checkpoint_guard: {folder / 'ep0-ba12-rank0.pt'} is incomplete (")
    assert lines[0].endswith(f"moved to {folder / 'quarantine' / 'ep0-ba12-rank0.pt'}")
    assert (folder / "quarantine" / "ep0-ba12-rank0.pt").read_bytes() == partial
    assert {name: _sha(folder / name) for name in before} == before  # completed checkpoints untouched
    _same_training_state(folder / "ep0-ba12-rank0.pt", reference / "ep0-ba12-rank0.pt")
    assert os.readlink(folder / "latest-rank0.pt") == "ep0-ba12-rank0.pt"


def test_partial_first_checkpoint_starts_from_scratch(
    reference: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Killed while writing the very first checkpoint: no complete checkpoint, no latest."""
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    (folder / "ep0-ba4-rank0.pt").write_bytes((reference / "ep0-ba4-rank0.pt").read_bytes()[:1000])
    with pytest.raises(FileExistsError, match=CONFLICT):
        _resume(folder)
    assert _resume(folder, CheckpointGuard()) == list(range(12))
    assert len(_guard_lines(caplog)) == 1
    for name in ("ep0-ba4-rank0.pt", "ep0-ba8-rank0.pt", "ep0-ba12-rank0.pt"):
        _same_training_state(folder / name, reference / name)


def test_two_partial_checkpoints_and_a_taken_quarantine_name(reference: Path, tmp_path: Path) -> None:
    """Two kills in a row (ba8 and ba12 partial), and a quarantine that already holds an ep0-ba12 from before."""
    folder = _copy(reference, tmp_path, "ep0-ba4-rank0.pt")
    for name in ("ep0-ba8-rank0.pt", "ep0-ba12-rank0.pt"):
        (folder / name).write_bytes((reference / name).read_bytes()[:5000])
    (folder / "quarantine").mkdir()
    (folder / "quarantine" / "ep0-ba12-rank0.pt").write_bytes(b"an earlier one")
    (folder / "latest-rank0.pt").symlink_to("ep0-ba4-rank0.pt")
    assert _resume(folder, CheckpointGuard()) == list(range(4, 12))
    assert sorted(p.name for p in (folder / "quarantine").iterdir()) == [
        "ep0-ba12-rank0.pt",
        "ep0-ba12-rank0.pt.1",
        "ep0-ba8-rank0.pt",
    ]
    assert (folder / "quarantine" / "ep0-ba12-rank0.pt").read_bytes() == b"an earlier one"


# -- a kill around the latest symlink ----------------------------------------------------------------------------------


def test_missing_symlink_resolves_to_the_newest_complete_checkpoint(
    reference: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Killed between Composer's os.remove(latest) and os.symlink(...) after writing ep0-ba8."""
    folder = _copy(reference, tmp_path, "ep0-ba4-rank0.pt", "ep0-ba8-rank0.pt")
    before = {name: _sha(folder / name) for name in ("ep0-ba4-rank0.pt", "ep0-ba8-rank0.pt")}

    # without the guard Composer finds no latest, starts from scratch, and its conflict check refuses the folder
    with pytest.raises(FileExistsError, match=CONFLICT):
        _resume(folder)

    assert _resume(folder, CheckpointGuard()) == [8, 9, 10, 11]
    assert _guard_lines(caplog) == [f"checkpoint_guard: {folder / 'latest-rank0.pt'} -> ep0-ba8-rank0.pt (was missing)"]
    assert {name: _sha(folder / name) for name in before} == before
    _same_training_state(folder / "ep0-ba12-rank0.pt", reference / "ep0-ba12-rank0.pt")


def test_missing_symlink_with_save_overwrite_never_rewrites_a_completed_checkpoint(
    reference: Path, tmp_path: Path
) -> None:
    """The second report: save_overwrite true, no latest: without the guard the run restarts from scratch and
    rewrites ep0-ba4 in place (a kill during that rewrite truncated a completed checkpoint)."""
    folder = _copy(reference, tmp_path, "ep0-ba4-rank0.pt", "ep0-ba8-rank0.pt")
    os.utime(folder / "ep0-ba4-rank0.pt", ns=(0, 0))
    assert _resume(folder, save_overwrite=True) == list(range(12))  # from scratch ...
    assert (folder / "ep0-ba4-rank0.pt").stat().st_mtime_ns != 0  # ... rewriting ep0-ba4

    folder = _copy(reference, tmp_path / "guarded", "ep0-ba4-rank0.pt", "ep0-ba8-rank0.pt")
    os.utime(folder / "ep0-ba4-rank0.pt", ns=(0, 0))
    os.utime(folder / "ep0-ba8-rank0.pt", ns=(0, 0))
    assert _resume(folder, CheckpointGuard(), save_overwrite=True) == [8, 9, 10, 11]
    assert (folder / "ep0-ba4-rank0.pt").stat().st_mtime_ns == 0  # never opened for writing
    assert (folder / "ep0-ba8-rank0.pt").stat().st_mtime_ns == 0


def test_complete_checkpoint_newer_than_latest_is_resumed_from(
    reference: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Killed after ep0-ba8 was written but before Composer replaced latest (-> ep0-ba4)."""
    folder = _copy(reference, tmp_path, "ep0-ba4-rank0.pt", "ep0-ba8-rank0.pt")
    (folder / "latest-rank0.pt").symlink_to("ep0-ba4-rank0.pt")
    with pytest.raises(FileExistsError, match=CONFLICT):
        _resume(folder)
    assert _resume(folder, CheckpointGuard()) == [8, 9, 10, 11]
    assert _guard_lines(caplog) == [
        f"checkpoint_guard: {folder / 'latest-rank0.pt'} -> ep0-ba8-rank0.pt (was -> ep0-ba4-rank0.pt)"
    ]


def test_intact_folder_is_left_alone(reference: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = _copy(reference, tmp_path, "ep0-ba4-rank0.pt", "ep0-ba8-rank0.pt")
    (folder / "latest-rank0.pt").symlink_to("ep0-ba8-rank0.pt")
    assert _resume(folder, CheckpointGuard()) == [8, 9, 10, 11]
    assert _guard_lines(caplog) == []
    assert not (folder / "quarantine").exists()


# -- a kill after the final checkpoint ---------------------------------------------------------------------------------


def test_finished_run_exits_with_status_0(reference: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = _copy(reference, tmp_path, "ep0-ba4-rank0.pt", "ep0-ba8-rank0.pt", "ep0-ba12-rank0.pt")
    (folder / "latest-rank0.pt").symlink_to("ep0-ba12-rank0.pt")
    before = _sha(folder / "ep0-ba12-rank0.pt")
    with pytest.raises(ValueError, match="No training would occur"):
        _resume(folder)
    with pytest.raises(ValueError, match="No training would occur"):
        _resume(folder, CheckpointGuard(exit_if_finished=False))
    with pytest.raises(SystemExit) as exited:
        _resume(folder, CheckpointGuard())
    assert exited.value.code == 0
    assert _guard_lines(caplog) == [
        f"checkpoint_guard: {folder / 'latest-rank0.pt'} -> ep0-ba12-rank0.pt is at 12ba, max_duration is 12ba: "
        "this run has finished training; exiting with status 0 (set callbacks.checkpoint_guard.exit_if_finished: "
        "false to let Trainer.fit() raise instead)"
    ]
    assert _sha(folder / "ep0-ba12-rank0.pt") == before


# -- completeness: every prefix of a real checkpoint -----------------------------------------------------------------


def test_every_prefix_of_a_real_checkpoint_is_incomplete(reference: Path, tmp_path: Path) -> None:
    data = (reference / "ep0-ba12-rank0.pt").read_bytes()
    assert file_problem(reference / "ep0-ba12-rank0.pt") is None
    assert file_problem(reference / "ep0-ba12-rank0.pt", full=True) is None
    path = tmp_path / "cut.pt"
    # the start, every 509th length, and the whole tail, where the central directory and the end records are
    lengths = sorted({*range(0, 100), *range(0, len(data), 509), *range(len(data) - 2000, len(data))})
    for length in lengths:
        path.write_bytes(data[:length])
        assert file_problem(path) is not None, f"a {length}-byte prefix of {len(data)} passed as complete"


def test_full_verify_reads_every_record(reference: Path, tmp_path: Path) -> None:
    """A flipped byte inside a tensor keeps the size and structure (what a power loss can leave): only
    ``verify: full`` sees it. A kill cannot cause it: it cuts a file short."""
    source = reference / "ep0-ba12-rank0.pt"
    data = bytearray(source.read_bytes())
    with zipfile.ZipFile(source) as archive:
        record = next(i for i in archive.infolist() if "/data/" in i.filename)  # a tensor's storage
    name_length, extra_length = struct.unpack("<HH", data[record.header_offset + 26 : record.header_offset + 30])
    start = record.header_offset + 30 + name_length + extra_length
    data[start + record.compress_size // 2] ^= 0xFF
    path = tmp_path / "flipped.pt"
    path.write_bytes(bytes(data))
    assert file_problem(path) is None
    assert file_problem(path, full=True) == f"record {record.filename} fails its CRC32 check"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        pytest.param(b"", "0 bytes", id="empty"),
        pytest.param(b"hello world " * 10, "no end-of-archive record", id="text"),
    ],
)
def test_non_checkpoints_are_incomplete(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "x.pt"
    path.write_bytes(content)
    assert reason in str(file_problem(path))


# -- sharded folders (torch.distributed.checkpoint, as Composer writes them for FSDP sharded) ------------------------


def _write_sharded(folder: Path, step: int) -> None:
    import torch.distributed.checkpoint as dist_cp

    state = {
        "state": {"model": {"w": torch.full((256, 64), float(step))}, "timestamp": {"batch": step}},
        "rng": [{"python": step}],
    }
    dist_cp.save(state_dict=state, storage_writer=dist_cp.FileSystemWriter(str(folder)))


def _sharded_layout(folder: Path) -> Layout:
    return Layout(folder=folder, name="ep{epoch}-ba{batch}", sharded=True, latest="latest-sharded-rank0")


def test_sharded_completeness(tmp_path: Path) -> None:
    folder = tmp_path / "ep0-ba4"
    _write_sharded(folder, 4)
    assert sharded_problem(folder) is None
    shard = folder / "__0_0.distcp"
    data = shard.read_bytes()
    shard.write_bytes(data[:-1])
    assert "__0_0.distcp has" in str(sharded_problem(folder))
    shard.unlink()
    assert sharded_problem(folder) == "shard __0_0.distcp is missing"
    shard.write_bytes(data)
    (folder / ".metadata").rename(folder / ".metadata.tmp")
    assert "no .metadata (.metadata.tmp exists" in str(sharded_problem(folder))


@pytest.mark.slow
def test_sharded_folder_written_by_two_ranks(tmp_path: Path) -> None:
    """Two processes (gloo) save one checkpoint: .metadata names both ranks' shard files, and each is checked."""
    import torch.multiprocessing as mp

    from tests.support.multirank import free_port, write_sharded_checkpoint

    folder = tmp_path / "ep0-ba8"
    ranks = mp.start_processes(
        write_sharded_checkpoint, args=(2, str(folder), free_port()), nprocs=2, join=False, start_method="spawn"
    )
    deadline = time.monotonic() + 120  # a hung rank fails this test; it must not hold the suite until its timeout
    while not ranks.join(timeout=1):
        if time.monotonic() > deadline:
            for process in ranks.processes:
                process.kill()
            pytest.fail("the two ranks did not finish within 120 s")
    assert sorted(p.name for p in folder.iterdir()) == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    assert sharded_problem(folder) is None
    shard = folder / "__1_0.distcp"
    shard.write_bytes(shard.read_bytes()[:-10])
    assert "shard __1_0.distcp has" in str(sharded_problem(folder))
    shard.unlink()
    assert sharded_problem(folder) == "shard __1_0.distcp is missing"


def test_sharded_metadata_is_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, (f"touch {marker}",))

    folder = tmp_path / "ep0-ba4"
    folder.mkdir()
    (folder / ".metadata").write_bytes(__import__("pickle").dumps(Evil()))
    assert "does not unpickle" in str(sharded_problem(folder))
    assert not marker.exists()


def test_sharded_folder_partial_newer_is_quarantined_and_latest_repaired(tmp_path: Path) -> None:
    """ep0-ba4 complete, ep0-ba8 complete but latest missing (kill between remove and create), ep0-ba12 cut short."""
    for step in (4, 8, 12):
        _write_sharded(tmp_path / f"ep0-ba{step}", step)
    shard = tmp_path / "ep0-ba12" / "__0_0.distcp"
    shard.write_bytes(shard.read_bytes()[:100])
    before = {p.name: _sha(p) for step in (4, 8) for p in (tmp_path / f"ep0-ba{step}").iterdir()}
    result = plan(_sharded_layout(tmp_path))
    assert result.resume == tmp_path / "ep0-ba8"
    assert [(a.kind, a.source) for a in result.actions] == [
        ("quarantine", tmp_path / "ep0-ba12"),
        ("link", result.resume),
    ]
    apply(result)
    assert os.readlink(tmp_path / "latest-sharded-rank0") == "ep0-ba8"
    assert (tmp_path / "quarantine" / "ep0-ba12" / "__0_0.distcp").stat().st_size == 100
    assert {p.name: _sha(p) for step in (4, 8) for p in (tmp_path / f"ep0-ba{step}").iterdir()} == before
    assert plan(_sharded_layout(tmp_path)).actions == []  # a second start finds nothing to do


def test_latest_pointing_at_nothing_complete_is_removed(tmp_path: Path) -> None:
    _write_sharded(tmp_path / "ep0-ba4", 4)
    (tmp_path / "ep0-ba4" / ".metadata").unlink()
    (tmp_path / "latest-sharded-rank0").symlink_to("ep0-ba4")
    result = plan(_sharded_layout(tmp_path))
    apply(result)
    assert result.resume is None
    assert not (tmp_path / "latest-sharded-rank0").is_symlink()
    assert (tmp_path / "quarantine" / "ep0-ba4").is_dir()


def test_latest_outside_the_naming_is_left_as_is(reference: Path, tmp_path: Path) -> None:
    folder = _copy(reference, tmp_path, "ep0-ba4-rank0.pt")
    shutil.copyfile(reference / "ep0-ba8-rank0.pt", folder / "hand-made.pt")
    (folder / "latest-rank0.pt").symlink_to("hand-made.pt")
    result = plan(Layout(folder=folder, name="ep{epoch}-ba{batch}-rank0.pt"))
    assert result.actions == [] and "left as is" in result.note


def test_latest_that_is_a_file_is_never_replaced(reference: Path, tmp_path: Path) -> None:
    folder = _copy(reference, tmp_path, "ep0-ba4-rank0.pt", "ep0-ba8-rank0.pt")
    shutil.copyfile(reference / "ep0-ba4-rank0.pt", folder / "latest-rank0.pt")
    result = plan(Layout(folder=folder, name="ep{epoch}-ba{batch}-rank0.pt"))
    apply(result)
    assert result.actions == [] and result.note.endswith("latest-rank0.pt is not a symlink; left as is")
    assert _sha(folder / "latest-rank0.pt") == _sha(reference / "ep0-ba4-rank0.pt")


def test_time_variables_in_a_folder_part_are_refused() -> None:
    with pytest.raises(ValueError, match="last part of a checkpoint's name only"):
        Layout(folder=Path("."), name="ba{batch}/model.pt")


def test_compressed_checkpoints_are_refused_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Their end cannot be checked without decompressing them whole: the guard says so instead of guessing.

    The line is all that is printed (no traceback), and the run ends with status 2.
    """
    with pytest.raises(SystemExit) as raised:
        _trainer(
            tmp_path / "checkpoints", guard=CheckpointGuard(), save_filename="ep{epoch}-ba{batch}-rank{rank}.pt.lz4"
        )
    assert raised.value.code == 2
    assert capsys.readouterr().err == (
        "callbacks.checkpoint_guard: error: "
        "save_filename: 'ep{epoch}-ba{batch}-rank{rank}.pt.lz4' is compressed or a tar archive; "
        "callbacks.checkpoint_guard checks uncompressed torch files (.pt) and sharded folders only: save uncompressed, "
        "or remove the callback\n"
    )
    assert not (tmp_path / "checkpoints" / ".foundry-ext-owner.json").exists()  # refused: the folder is released


def test_other_ranks_wait_until_they_see_rank_0s_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rank that shares the folder waits for the new latest; one that does not see the folder does not wait."""
    from foundry_ext.trainer.checkpoint_guard import callback

    resume = tmp_path / "ep0-ba8-rank0.pt"
    resume.write_bytes(b"x")
    latest = tmp_path / "latest-rank0.pt"
    monkeypatch.setattr(callback, "VISIBILITY_TIMEOUT_S", 0.3)
    with pytest.raises(RuntimeError, match="still does not see rank 0's changes"):
        callback._wait_until_visible(str(resume), str(latest), [])
    latest.symlink_to(resume.name)
    callback._wait_until_visible(str(resume), str(latest), [])  # visible: returns at once
    with pytest.raises(RuntimeError, match="still does not see"):
        callback._wait_until_visible(str(resume), str(latest), [str(resume)])  # a moved file still listed
    callback._wait_until_visible(str(tmp_path / "elsewhere.pt"), str(latest), [])  # node-local: nothing to wait for


# -- configuration ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param(
            {"verfy": "full"},
            "callbacks.checkpoint_guard.verfy: unknown key (did you mean 'verify'?); "
            "allowed keys: quarantine_folder, verify, exit_if_finished, stale_after, heartbeat_interval",
            id="unknown",
        ),
        pytest.param(
            {"verify": "crc"},
            "callbacks.checkpoint_guard.verify: 'crc' is not allowed; allowed: structure, full",
            id="verify",
        ),
        pytest.param(
            {"quarantine_folder": "/mnt/other"},
            "callbacks.checkpoint_guard.quarantine_folder: '/mnt/other' is not allowed; expected a plain relative "
            "folder name inside save_folder (printable, no '.' or '..' parts, at most 255 bytes per part; the move "
            "must be a rename on the same filesystem), e.g. quarantine",
            id="absolute",
        ),
        pytest.param(
            {"quarantine_folder": "../q"},
            "callbacks.checkpoint_guard.quarantine_folder: '../q' is not allowed; expected a plain relative "
            "folder name inside save_folder (printable, no '.' or '..' parts, at most 255 bytes per part; the move "
            "must be a rename on the same filesystem), e.g. quarantine",
            id="dotdot",
        ),
        pytest.param(
            {"exit_if_finished": "yes"},
            "callbacks.checkpoint_guard.exit_if_finished: 'yes' (str) is not a boolean; expected true or false",
            id="bool",
        ),
    ],
)
def test_bad_key_gets_one_line(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        CheckpointGuard(**kwargs)
    assert str(raised.value) == message


def test_each_problem_gets_its_own_line_through_llm_foundry() -> None:
    from llmfoundry.utils.builders import build_callback

    with pytest.raises(ConfigError) as raised:
        build_callback("checkpoint_guard", {"verify": "crc", "quarantine": "q"})
    assert str(raised.value).splitlines() == [
        "callbacks.checkpoint_guard.verify: 'crc' is not allowed; allowed: structure, full",
        "callbacks.checkpoint_guard.quarantine: unknown key (did you mean 'quarantine_folder'?); "
        "allowed keys: quarantine_folder, verify, exit_if_finished, stale_after, heartbeat_interval",
    ]
    assert isinstance(build_callback("checkpoint_guard", {"verify": "full"}), CheckpointGuard)
