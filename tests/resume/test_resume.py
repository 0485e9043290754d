"""Resuming a reduce_lr_on_plateau run reproduces the uninterrupted run (docs/resume.md).

LRs, plateau decisions and eval losses are compared bitwise.

The slow test drives the real launcher, ``composer -n 2 train.py yamls/tiny-resume.yaml`` (gloo on CPU), three ways:
A uninterrupted; B stopped at the batch-10 checkpoint and resumed with ``load_path``; C killed with SIGKILL after the
batch-10 checkpoint and restarted with ``autoresume: true``. The YAML cuts the LR at batches 9, 15 and 21, so cuts
happen both before and after the checkpoint. Each rank logs every LR and eval loss as JSON lines through
:class:`tests.support.jsonl_logger.JSONLLogger`, which each run loads through ``code_paths``.

The other tests use a real Composer ``Trainer`` in-process (load_ignore_keys) or llm-foundry's ``train_from_yaml``
(what ``${oc.env:RANK}`` does), and are fast enough to need no mark.
"""

from __future__ import annotations

import csv
import os
import time
from pathlib import Path
from typing import Any

import pytest

from foundry_ext.checkpoint import load_checkpoint_safely
from foundry_ext.cli import main as cli_main
from tests.support.launcher import REPO
from tests.support.multirank import JSONL_LOGGER, kill, launch, launch_and_wait, read_metrics, same_bits, wait_until

YAML = REPO / "yamls" / "tiny-resume.yaml"
PLATEAU = "ReduceLROnPlateauCallback"
LR = "lr-DecoupledAdamW/group0"
EVAL = "metrics/eval/LanguageCrossEntropy"


# -- helpers ---------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared ``demo_data`` fixture of conftest.py when there is one, else demo data written here."""
    try:
        data = request.getfixturevalue("demo_data")
    except pytest.FixtureLookupError:
        from foundry_ext.demo_data import write_demo_data

        data = write_demo_data(tmp_path_factory.mktemp("demo") / "demo-data")
    return Path(getattr(data, "path", data))


def _run(overrides: list[str], log: Path, timeout: float = 600) -> None:
    status, output = launch_and_wait(YAML, overrides, nproc=2, log=log, timeout=timeout)
    assert status == 0, f"{log.name} exited {status}:\n{output[-4000:]}"


def _overrides(data: Path, run_dir: Path, metrics: str, *extra: str) -> list[str]:
    return [
        f"variables.data_local={data}",
        f"save_folder={run_dir}/checkpoints",
        f"code_paths=[{JSONL_LOGGER}]",  # registers the `jsonl` logger in each training process
        f"loggers.jsonl.path={run_dir}/{metrics}-rank{{rank}}.jsonl",
        *extra,
    ]


def _plateau(checkpoint: Path) -> dict[str, Any]:
    return load_checkpoint_safely(checkpoint)["state"]["callbacks"][PLATEAU]


# -- the launcher test -----------------------------------------------------------------------------------------------


@pytest.mark.kills_mid_run  # implies slow; one at a time under xdist (tests/conftest.py)
@pytest.mark.timeout(900)
def test_load_path_and_autoresume_after_sigkill_match_the_uninterrupted_run(demo_dir: Path, tmp_path: Path) -> None:
    timings: dict[str, float] = {}

    def timed(name: str, fn: Any, *args: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args)
        finally:
            timings[name] = time.perf_counter() - start
            print(f"{name}: {timings[name]:.1f}s")

    # A: uninterrupted
    a = tmp_path / "a"
    timed("A", _run, _overrides(demo_dir, a, "full"), tmp_path / "a.log")
    ref = read_metrics(a / "full-rank0.jsonl")
    assert ref == read_metrics(a / "full-rank1.jsonl"), "the ranks logged different LRs or eval losses"
    assert sorted(ref[EVAL]) == [3, 6, 9, 12, 15, 18, 21, 24]
    assert _plateau(a / "checkpoints" / "ep0-ba10-rank0.pt")["plateau"]["cuts"] == 1  # one cut before ...
    final = _plateau(a / "checkpoints" / "ep0-ba24-rank0.pt")
    assert final["plateau"]["cuts"] == 3 and final["plateau"]["scale"] == 0.125  # ... and two after

    # `foundry-ext plot --metrics` replaying A's own eval losses shows the LR A's batches trained with. lr_monitor's
    # value at step b is the LR of batch b except at a cut's step, where batch b already trains at the cut LR
    # (docs/plateau.md, "lr_monitor at a cut"); the plot's rows end at batch 23, the last that trains.
    metrics = tmp_path / "a-eval.csv"
    metrics.write_text("batch,value\n" + "".join(f"{b},{v!r}\n" for b, v in sorted(ref[EVAL].items())))
    table = tmp_path / "a-plot.csv"
    argv = ["plot", str(YAML), f"variables.data_local={demo_dir}", "--metrics", str(metrics), "--csv", str(table)]
    assert cli_main([*argv, "--out", str(tmp_path / "a-plot.png")]) == 0
    with open(table) as f:
        plotted = {int(row["batch"]): float(row["lr"]) for row in csv.DictReader(f)}
    assert sorted(plotted) == list(range(24))
    for b in range(1, 24):
        want = ref[LR][b] * (0.5 if b in (9, 15, 21) else 1.0)
        assert plotted[b] == pytest.approx(want, rel=1e-12, abs=0.0), b

    def check_resumed(run_dir: Path, metrics: str, first_step: int) -> None:
        logs = [read_metrics(run_dir / f"{metrics}-rank{r}.jsonl") for r in (0, 1)]
        assert logs[0] == logs[1], "the ranks logged different LRs or eval losses after the resume"
        for name in (LR, EVAL, "lr_plateau/scale", "lr_plateau/cuts"):
            got = logs[0][name]
            assert min(got) >= first_step and max(got) == 24, (name, sorted(got))
            want = {step: v for step, v in ref[name].items() if step >= min(got)}
            assert got.keys() == want.keys(), name
            # Bitwise, eval losses included: CPU, fp32, one thread per rank, same data order, same weights.
            bad = {s: (got[s], want[s]) for s in got if not same_bits(got[s], want[s])}
            assert not bad, f"{name} differs from the uninterrupted run at batches {bad}"
        resumed = _plateau(run_dir / "checkpoints" / "ep0-ba24-rank0.pt")
        last_value = resumed["plateau"].pop("last_value")
        assert same_bits(last_value, final["plateau"]["last_value"])
        assert resumed["plateau"] == {k: v for k, v in final["plateau"].items() if k != "last_value"}
        assert (resumed["window_sum"], resumed["window_count"]) == (final["window_sum"], final["window_count"])

    # B: stop at the batch-10 checkpoint, then a new launcher resumes with load_path
    b = tmp_path / "b"
    timed("B1", _run, _overrides(demo_dir, b, "first", "max_duration=10ba"), tmp_path / "b1.log")
    ckpt = b / "checkpoints" / "ep0-ba10-rank0.pt"
    assert _plateau(ckpt) == _plateau(a / "checkpoints" / "ep0-ba10-rank0.pt")
    timed("B2", _run, _overrides(demo_dir, b, "resumed", f"load_path={ckpt}"), tmp_path / "b2.log")
    check_resumed(b, "resumed", first_step=10)

    # C: SIGKILL the whole process group once the batch-10 checkpoint is complete, then autoresume
    c = tmp_path / "c"
    folder = c / "checkpoints"
    autoresume = ["autoresume=true", "save_overwrite=false"]
    start = time.perf_counter()
    proc = launch(YAML, _overrides(demo_dir, c, "killed", *autoresume), nproc=2, log=tmp_path / "c1.log")
    latest = folder / "latest-rank0.pt"
    try:
        # the symlink is made only after the file is written: it marks a complete checkpoint
        wait_until(
            "run C's batch-10 checkpoint",
            lambda: latest.is_symlink() and os.readlink(latest) == "ep0-ba10-rank0.pt",
            proc,
            tmp_path / "c1.log",
        )
        before_kill = sorted(p.name for p in folder.iterdir())
    finally:
        kill(proc)  # the launcher and both ranks (already gone if it failed on its own)
    timings["C1"] = time.perf_counter() - start
    killed = read_metrics(c / "killed-rank0.jsonl")
    assert max(killed[LR]) < 24, "run C finished before the kill"
    for name in before_kill:  # every checkpoint completed before the kill survived it
        assert load_checkpoint_safely(folder / name)["state"]["timestamp"]["Timestamp"]["batch"] == 10, name
    assert load_checkpoint_safely(latest)["state"]["callbacks"][PLATEAU] == _plateau(
        a / "checkpoints" / "ep0-ba10-rank0.pt"
    )
    timed("C2", _run, _overrides(demo_dir, c, "autoresumed", *autoresume), tmp_path / "c2.log")
    check_resumed(c, "autoresumed", first_step=10)
    assert os.readlink(latest) == "ep0-ba24-rank0.pt"
    print("timings (s):", {k: round(v, 1) for k, v in timings.items()})


# -- in-process checks -----------------------------------------------------------------------------------------------


def test_load_ignore_keys_resets_the_plateau_on_purpose(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``load_ignore_keys: [state/callbacks/ReduceLROnPlateauCallback]`` starts the plateau afresh (scale 1)."""
    from foundry_ext.trainer.plateau.scheduler import ReduceLROnPlateauScheduler
    from tests.support.trainer_utils import BASE_LR, make_trainer

    def plateau_run(**kwargs: Any) -> tuple[Any, Any]:
        scheduler = ReduceLROnPlateauScheduler(monitor="metrics/eval/Scripted", factor=0.5, patience=0)
        trainer, recorder = make_trainer([scheduler], eval_values=[3.0] * 8, eval_interval="4ba", **kwargs)
        trainer.fit()
        trainer.close()
        return scheduler.callback, recorder

    first, _ = plateau_run(max_duration="12ba", save_folder=str(tmp_path), save_interval="12ba")  # cuts at ba8, ba12
    assert (first.plateau.cuts, first.plateau.scale) == (2, 0.25)
    ckpt = str(tmp_path / "ep0-ba12-rank0.pt")

    kept, recorder = plateau_run(max_duration="16ba", load_path=ckpt)
    assert recorder.lrs[12] == [BASE_LR * 0.25]  # restored: the cut LR goes on
    assert (kept.plateau.cuts, kept.plateau.scale) == (3, 0.125)

    # Composer says so when it restores the callbacks; the adapter adds one line of its own, naming this cause
    from foundry_ext.config import notices

    monkeypatch.setattr(notices, "_seen", set())
    capsys.readouterr()
    with pytest.warns(UserWarning) as warned:
        reset, recorder = plateau_run(
            max_duration="16ba", load_path=ckpt, load_ignore_keys=[f"state/callbacks/{PLATEAU}"]
        )
    messages = [str(w.message) for w in warned]
    assert f"{PLATEAU} is not in the state_dict. Its state will not be restored." in messages
    ours = [line for line in capsys.readouterr().err.splitlines() if "plateau state" in line]
    assert len(ours) == 1 and "resumed at batch 12 with no plateau state" in ours[0]
    assert "reset with load_ignore_keys" in ours[0]
    # the LambdaLR state still holds the cut LR for batch 12; from batch 13 the fresh scale (1.0) applies, and the
    # first evaluation after the reset (ba16) only sets the best
    assert recorder.lrs[13] == [BASE_LR]
    assert (reset.plateau.cuts, reset.plateau.scale, reset.plateau.num_evals) == (0, 1.0, 1)


@pytest.mark.parametrize(
    ("value", "error"),
    [
        pytest.param("latest-rank${oc.env:RANK}.pt", "Unsupported interpolation type oc.env", id="oc.env"),
        pytest.param("latest-rank${RANK}.pt", "Interpolation key 'RANK' not found", id="bare"),
    ],
)
def test_env_interpolation_is_not_available_in_llm_foundry_yaml(
    value: str, error: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llm-foundry clears OmegaConf's ``oc.env`` resolver: write Composer's ``{rank}`` instead (docs/resume.md)."""
    from llmfoundry.command_utils import train_from_yaml

    monkeypatch.setenv("RANK", "0")
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(YAML.read_text() + f"\nsave_latest_filename: {value}\n")
    with pytest.raises(Exception, match=error):
        train_from_yaml(str(cfg), [f"save_folder={tmp_path}/ckpt"])


@pytest.mark.parametrize("name", ["resume-autoresume", "resume-load-path", "tiny-resume"])
def test_resume_examples_are_valid_train_configs(name: str, capsys: pytest.CaptureFixture) -> None:
    """The GPU examples are not trained here: llm-foundry's TrainConfig accepts them and their schedule builds."""
    from llmfoundry.utils.config_utils import TRAIN_CONFIG_KEYS, TrainConfig, make_dataclass_and_log_config
    from omegaconf import OmegaConf as om

    from foundry_ext.cli import main

    path = REPO / "yamls" / f"{name}.yaml"
    _, cfg = make_dataclass_and_log_config(om.load(path), TrainConfig, TRAIN_CONFIG_KEYS, transforms="all")
    assert cfg.scheduler["name"] == "reduce_lr_on_plateau"
    assert "{run_name}" in cfg.save_folder
    if name == "resume-autoresume":
        assert cfg.autoresume and cfg.run_name and cfg.fsdp_config["state_dict_type"] == "sharded"
        assert cfg.save_latest_filename == "latest-sharded-rank{rank}"
    if name == "resume-load-path":
        assert cfg.load_path and cfg.load_ignore_keys == [f"state/callbacks/{PLATEAU}"]
        assert cfg.fsdp_config["state_dict_type"] == "full" and cfg.precision == "amp_bf16"
    assert main(["validate", str(path)]) == 0, capsys.readouterr()
