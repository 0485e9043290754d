"""A finished run relaunched ends before the model is built (:mod:`foundry_ext.trainer.checkpoint_guard.finished`).

Through the real launcher, on the finished 2-rank runs the resume tests share (tests/resume/conftest.py; copies of
their last checkpoint and ``latest``, nothing trained here):

* FSDP2 with sharded checkpoints (``yamls/tiny-fsdp.yaml``) and DDP (``yamls/tiny-resume.yaml``): the same command
  exits 0 on both ranks with the early line, and neither rank's log has a line of what comes after the config
  transforms (llm-foundry's "Building train loader...", "Initializing model...", "Building trainer..."); the
  checkpoint's files keep their bytes, nothing is quarantined, no owner record is written, no rank aborts (the gloo
  abort of tests/resume/test_clean_exit.py), so a second relaunch would meet the same folder;
* the fallback: the same DDP run relaunched with a ``max_duration`` below its checkpoint (changed since it was
  saved) says in one line that it cannot tell early, then builds everything as before and the guard ends it with
  status 0 after the load: the control that the log lines above are there when the model is built.

In-process (no launch): the rule's cases on the real checkpoints (:func:`_decide`), and the configs the transform
leaves alone without reading or initialising anything.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import socket
from pathlib import Path

import pytest

from foundry_ext.checkpoint.owner import OWNER_FILE
from foundry_ext.trainer.checkpoint_guard.finished import FINISHED, _decide, _settings, finished_run_transform
from tests.support.fsdp import FSDP_ENV, FSDP_YAML, fsdp_overrides
from tests.support.multirank import launch_and_wait, rank_statuses
from tests.support.references import TINY_RESUME, uninterrupted_overrides

EARLY = f"{FINISHED} before building the model"
UNSURE = "callbacks.checkpoint_guard: cannot tell before building the model whether this run has finished"
# llm-foundry's train() logs these (python_log_level: info in both YAMLs) once the config transforms are done
BUILT = ("Building train loader...", "Initializing model...", "Building trainer...")
# rank 1's abort when a gloo thread outlives the exit (tests/resume/test_clean_exit.py reproduces it on every run)
ABORT = "terminate called without an active exception"


def _hashes(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (links not followed) -> SHA-256; a symlink -> its target."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _finished_copy(kind: str, request: pytest.FixtureRequest, run_dir: Path) -> tuple[Path, list[str], dict]:
    """A copy of a shared finished run's last checkpoint and ``latest`` in ``run_dir``: (yaml, overrides, env)."""
    data = request.getfixturevalue("demo_data")
    folder = run_dir / "checkpoints"
    folder.mkdir(parents=True)
    if kind == "fsdp":
        reference = request.getfixturevalue("fsdp_reference") / "checkpoints"
        shutil.copytree(reference / "ep0-ba12", folder / "ep0-ba12")
        (folder / "latest-sharded-rank0").symlink_to("ep0-ba12")
        return FSDP_YAML, fsdp_overrides(data, run_dir), FSDP_ENV
    reference = request.getfixturevalue("uninterrupted_12ba") / "checkpoints"
    shutil.copy2(reference / "ep0-ba12-rank0.pt", folder / "ep0-ba12-rank0.pt")
    (folder / "latest-rank0.pt").symlink_to("ep0-ba12-rank0.pt")
    return TINY_RESUME, uninterrupted_overrides(data, run_dir), {}


@pytest.mark.launcher  # implies slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("kind", ["fsdp", "ddp"])
def test_the_finished_run_relaunched_exits_0_before_building_the_model(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    yaml, overrides, env = _finished_copy(kind, request, tmp_path / "run")
    folder = tmp_path / "run" / "checkpoints"
    before = _hashes(folder)
    status, output = launch_and_wait(
        yaml, overrides, nproc=2, log=tmp_path / "relaunch.log", env=env, rank_status=tmp_path / "status"
    )
    assert status == 0 and rank_statuses(tmp_path / "status", 2) == {0: "0", 1: "0"}, output[-3000:]
    assert ABORT not in output, output[-3000:]
    for rank in (0, 1):  # the launcher shows rank 0 only; train.py keeps each rank's console in a log
        log = (tmp_path / "run" / f"train-rank{rank}.log").read_text()
        lines = [line for line in log.splitlines() if EARLY in line]
        assert len(lines) == 1, f"rank {rank}:\n{log[-3000:]}"
        latest = "latest-sharded-rank0 -> ep0-ba12" if kind == "fsdp" else "latest-rank0.pt -> ep0-ba12-rank0.pt"
        assert f"{latest} is at 12ba, max_duration is 12ba" in lines[0]
        assert not [line for line in log.splitlines() if line.endswith(BUILT)], f"rank {rank}:\n{log[-3000:]}"
        assert "Traceback" not in log and ABORT not in log
    assert _hashes(folder) == before  # nothing moved, written or removed: no quarantine, no owner record


@pytest.mark.launcher  # implies slow
@pytest.mark.timeout(900)
def test_a_changed_max_duration_is_said_then_decided_after_the_load(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    yaml, overrides, _ = _finished_copy("ddp", request, tmp_path / "run")
    folder = tmp_path / "run" / "checkpoints"
    before = _hashes(folder)
    status, output = launch_and_wait(yaml, [*overrides, "max_duration=10ba"], nproc=2, log=tmp_path / "l.log")
    assert status == 0, output[-3000:]
    log = (tmp_path / "run" / "train-rank0.log").read_text()
    unsure = [line for line in log.splitlines() if UNSURE in line]
    assert len(unsure) == 1 and "is at 12ba, past max_duration 10ba: max_duration changed" in unsure[0], log[-3000:]
    assert all(any(line.endswith(built) for line in log.splitlines()) for built in BUILT), log[-3000:]
    assert "this run has finished training; exiting with status 0" in log and EARLY not in log  # the guard's line
    assert {k: v for k, v in _hashes(folder).items() if not k.startswith(".foundry-ext-owner")} == before


# -- the rule, in-process, on the real checkpoints ---------------------------------------------------------------------


def _cfg(overrides: list[str], **changes: object) -> dict:
    """The config keys the rule reads, from a launch's overrides."""
    cfg: dict = {"callbacks": {"checkpoint_guard": {}}, "run_name": "tiny", "autoresume": True}
    for item in overrides:
        key, _, value = item.partition("=")
        if key in ("save_folder", "max_duration"):
            cfg[key] = value
    return {**cfg, **changes}


@pytest.mark.slow  # the shared reference runs
@pytest.mark.parametrize("kind", ["fsdp", "ddp"])
def test_the_rule_on_real_checkpoints(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    _, overrides, _ = _finished_copy(kind, request, tmp_path)
    cfg = _cfg(overrides)
    if kind == "fsdp":
        cfg["fsdp_config"] = {"state_dict_type": "sharded"}
    folder, run_name, guard = _settings(cfg) or pytest.fail("the transform does not apply")

    def decide(**changes: object) -> tuple[bool, str | None]:
        return _decide({**cfg, **changes}, folder, run_name, guard, world_size=2)

    finished, line = decide()
    assert finished and line is not None and EARLY in line
    assert decide(max_duration="24ba") == (False, None)  # an extended run resumes: nothing to say
    finished, line = decide(max_duration="1ep")
    assert not finished and line is not None and line.startswith(UNSURE) and "1ep is not in batches" in line
    finished, line = decide(max_duration="100000tok")
    assert not finished and line is not None and "is not in batches" in line

    # a live owner (this process, this host): the guard refuses this start at BEFORE_LOAD, as before
    record = {"host": socket.gethostname(), "pid": os.getpid(), "run_name": "x", "token": "t", "heartbeat": 0}
    (Path(folder) / OWNER_FILE).write_text(json.dumps(record))
    assert decide() == (False, None)
    record["pid"] = 2**22 + 1  # gone: the record of a killed run does not count
    (Path(folder) / OWNER_FILE).write_text(json.dumps(record))
    assert decide()[0]

    # a partial newer checkpoint: the guard's repair comes first, it decides after the load
    newer = Path(folder) / ("ep0-ba14" if kind == "fsdp" else "ep0-ba14-rank0.pt")
    if kind == "fsdp":
        newer.mkdir()
        (newer / "__0_0.distcp").write_bytes(b"\0" * 100)
    else:
        newer.write_bytes(b"PK\x03\x04partial")
    assert decide() == (False, None)
    newer_files = _hashes(Path(folder))
    assert decide() == (False, None) and _hashes(Path(folder)) == newer_files  # deciding changes nothing


@pytest.fixture
def no_process_group(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """Every call of Composer's ``initialize_dist`` in the test, recorded instead of made (an earlier in-process
    Trainer on the same worker may already have made one, so ``is_initialized()`` alone says nothing)."""
    from composer.utils import dist

    calls: list[tuple] = []
    monkeypatch.setattr(dist, "initialize_dist", lambda *args, **kwargs: calls.append((args, kwargs)))
    return calls


def test_configs_it_does_not_apply_to_are_returned_untouched(tmp_path: Path, no_process_group: list[tuple]) -> None:
    base = {"save_folder": str(tmp_path), "run_name": "r", "autoresume": True, "max_duration": "4ba"}
    guard = {"callbacks": {"checkpoint_guard": {}}}
    for cfg in (
        base,  # no guard
        {**base, "callbacks": {"checkpoint_guard": {"exit_if_finished": False}}},
        {**base, **guard, "autoresume": False},
        {**base, **guard, "autoresume": None},  # llm-foundry passes autoresume through as written
        {**base, **guard, "save_folder": None},
        {**base, **guard, "run_name": None},
        {**base, **guard, "save_weights_only": True},
        {**base, "callbacks": {"checkpoint_guard": {"verify": "crc"}}},  # reported by the pre-flight and the guard
    ):
        assert finished_run_transform(cfg) is cfg
    assert no_process_group == []
    assert list(tmp_path.iterdir()) == []


def test_a_remote_save_folder_is_said_without_reading_anything(
    caplog: pytest.LogCaptureFixture, no_process_group: list[tuple]
) -> None:
    cfg = {
        "save_folder": "s3://bucket/{run_name}/checkpoints",
        "run_name": "r",
        "autoresume": True,
        "max_duration": "4ba",
        "callbacks": {"checkpoint_guard": {}},
    }
    with caplog.at_level(logging.WARNING):
        assert finished_run_transform(cfg) is cfg
    assert [r.getMessage() for r in caplog.records] == [
        f"{UNSURE} (save_folder s3://bucket/{{run_name}}/checkpoints is remote); the Trainer loads the checkpoint "
        "and decides"
    ]
    assert no_process_group == []
