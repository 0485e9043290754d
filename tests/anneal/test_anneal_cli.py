"""``foundry-ext anneal``: the branch YAML it writes, and every bad input as one line, exit 2, nothing written.

The checkpoints are real (tests/anneal/conftest.py: tiny Composer runs with DecoupledAdamW).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import yaml

from foundry_ext.checkpoint import load_checkpoint_safely
from foundry_ext.cli import main
from tests.anneal.conftest import LR, Runs


def anneal(capsys: pytest.CaptureFixture, *argv: str | Path) -> tuple[int, str, str]:
    code = main(["anneal", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every path under ``root`` -> its bytes (a file) or its link target: nothing written, moved or deleted."""
    found: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if path.is_symlink():
                found[str(path)] = "-> " + os.readlink(path)
            elif path.is_file():
                found[str(path)] = path.read_bytes()
            else:
                found[str(path)] = "dir"
    return found


# -- what it writes ----------------------------------------------------------------------------------------------------


def test_a_branch_from_a_folders_latest(runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "branch.yaml"
    code, stdout, err = anneal(
        capsys, runs.stable, runs.config, "--decay", "8ba", "--shape", "sqrt", "--floor", "0.1", "--out", out
    )
    assert code == 0, err
    cfg = yaml.safe_load(out.read_text())
    target = runs.stable / "ep0-ba8-rank0.pt"  # the file the link points at now, not the link
    kept = runs.root / "stable-anneal-8ba-8ba-sqrt-floor0.1" / "checkpoints" / "anneal-source" / "ep0-ba8-rank0.pt"
    assert cfg["load_path"] == str(kept) and os.path.samefile(kept, target)  # a hard link: the same file
    assert f"  source: {kept}, a hard link of {target} (the stable run's folder is only read); the YAML loads it\n" in (
        stdout
    )
    assert cfg["autoresume"] is True
    assert cfg["max_duration"] == "16ba"
    assert cfg["run_name"] == "stable-anneal-8ba-8ba-sqrt-floor0.1"
    assert cfg["save_folder"] == str(runs.root / "stable-anneal-8ba-8ba-sqrt-floor0.1" / "checkpoints")
    assert cfg["scheduler"] == {
        "name": "warmup_stable_decay", "t_warmup": "2ba", "t_decay_start": "8ba", "decay_type": "sqrt", "alpha_f": 0.1,
    }  # fmt: skip
    peak = load_checkpoint_safely(target)["state"]["optimizers"]["DecoupledAdamW"]["param_groups"][0]["initial_lr"]
    assert peak == LR
    last = LR * (0.1 + 0.9 * (1 - (6 / 8) ** 0.5))  # batch 15 trains at the multiplier of timestamp 14
    assert f"LR at batch 8 (first): {LR:.6g}; at batch 15 (last): {last:.6g}" in stdout
    assert f"composer train.py {out}" in stdout
    # anneal made the branch's folder for the kept source only: no checkpoint, no `latest` for autoresume to find
    assert sorted(p.name for p in kept.parents[1].rglob("*")) == ["anneal-source", "ep0-ba8-rank0.pt"]
    code, _, err = main(["validate", str(out)]), *capsys.readouterr()
    assert code == 0, err


@pytest.mark.parametrize(
    ("overrides", "notes"),
    [
        (["scheduler.decay_type=cosine"], ["scheduler.decay_type=cosine is read as the stable run's"]),
        (["scheduler.alpha_f=0.5"], ["scheduler.alpha_f=0.5 is read as the stable run's"]),
        (["scheduler.decay_type=cosine", "scheduler.alpha_f=0.5"], ["decay_type=cosine", "alpha_f=0.5"]),
        (["scheduler.decay_type=linear", "scheduler.alpha_f=0.0"], []),  # the branch's own values: nothing to say
        (["scheduler.alpha_f=5e-1"], ["scheduler.alpha_f=0.5 is read as the stable run's"]),  # as the config holds it
        (["scheduler.decay_type=null"], []),  # unsets the stable run's key: nothing reads as the branch's
    ],
)
def test_a_scheduler_override_of_the_branchs_knobs_is_said_not_used(
    runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture, overrides: list[str], notes: list[str]
) -> None:
    """``scheduler.*`` overrides describe the stable run: the branch's block is written from --shape and --floor, and a
    ``decay_type`` or ``alpha_f`` unlike them (a branch shape asked the wrong way) gets a note, not a silent drop."""
    out = tmp_path / "b.yaml"
    code, stdout, err = anneal(
        capsys, runs.stable / "ep0-ba4-rank0.pt", runs.config, *overrides, "--decay", "4ba", "--out", out
    )
    assert code == 0, err
    said = [line.strip() for line in stdout.splitlines() if "is read as the stable run's" in line]
    assert len(said) == len(notes) and all(n in line for n, line in zip(notes, said, strict=True)), stdout
    for line in said:
        assert line.endswith(("the branch uses --shape linear", "the branch uses --floor 0")), line
    assert {k: yaml.safe_load(out.read_text())["scheduler"][k] for k in ("decay_type", "alpha_f")} == {
        "decay_type": "linear",
        "alpha_f": 0.0,
    }


@pytest.mark.parametrize("decay,length", [("8ba", 8), ("32sp", 8), ("0.5dur", 8), ("0.2dur", 2), ("1ba", 1)])
def test_decay_lengths(runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture, decay: str, length: int) -> None:
    """``sp`` through the checkpoint's 4 samples per batch; ``0.5dur`` from batch 8 is 8 (int(0.5 * 16) = 8)."""
    out = tmp_path / "b.yaml"
    code, _, err = anneal(capsys, runs.stable / "latest-rank0.pt", runs.config, "--decay", decay, "--out", out)
    assert code == 0, err
    assert yaml.safe_load(out.read_text())["max_duration"] == f"{8 + length}ba"


def test_save_folder_and_run_name_overrides(runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "b.yaml"
    code, _, err = anneal(
        capsys, runs.stable / "ep0-ba4-rank0.pt", runs.config, f"save_folder={tmp_path}/b1", "run_name=b1",
        "--decay", "4ba", "--out", out,
    )  # fmt: skip
    assert code == 0, err
    cfg = yaml.safe_load(out.read_text())
    assert (cfg["save_folder"], cfg["run_name"], cfg["max_duration"]) == (f"{tmp_path}/b1", "b1", "8ba")
    assert cfg["scheduler"]["t_decay_start"] == "4ba"


def test_a_sharded_checkpoint_made_with_torch_distributed_checkpoint(
    runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A folder written as Composer writes FSDP sharded checkpoints (dist_cp.save with a FileSystemWriter), on CPU."""
    import torch.distributed.checkpoint as dist_cp

    state = load_checkpoint_safely(runs.stable / "ep0-ba8-rank0.pt")
    state.pop("rng")
    folder = tmp_path / "sharded" / "ep0-ba8"
    dist_cp.save(state_dict=state, storage_writer=dist_cp.FileSystemWriter(str(folder)))
    (tmp_path / "sharded" / "latest-sharded-rank0").symlink_to("ep0-ba8")
    out = tmp_path / "b.yaml"
    code, _, err = anneal(capsys, tmp_path / "sharded", runs.config, "--decay", "4ba", "--out", out)
    assert code == 2 and not out.exists()  # the stable YAML has no fsdp_config: a sharded checkpoint cannot load
    assert err.count("\n") == 1 and "no fsdp_config, but CHECKPOINT" in err, err
    fsdp = "fsdp_config.state_dict_type=sharded"
    code, stdout, err = anneal(capsys, tmp_path / "sharded", runs.config, fsdp, "--decay", "4ba", "--out", out)
    assert code == 0, err
    cfg = yaml.safe_load(out.read_text())
    kept = Path(cfg["save_folder"]) / "anneal-source" / "ep0-ba8"
    assert cfg["load_path"] == str(kept) and cfg["max_duration"] == "12ba"
    shards = sorted(p.name for p in folder.iterdir())
    assert sorted(p.name for p in kept.iterdir()) == shards and ".metadata" in shards
    assert all(os.path.samefile(kept / name, folder / name) for name in shards)  # hard links, file by file
    assert "note: a sharded checkpoint (FSDP, written by 1 rank)" in stdout and "FSDP_VERSION=2" in stdout


def test_help_and_a_bad_option_import_neither_torch_nor_composer() -> None:
    code = (
        "import sys\nfrom foundry_ext.cli import main\n"
        "for argv in (['anneal', '--help'], ['anneal', 'x.pt', 'c.yaml', '--decay', '0ba', '--out', 'b.yaml'],\n"
        "             ['anneal', 'x.pt', 'c.yaml', '--decay', '8ba', '--floor', '2', '--out', 'b.yaml']):\n"
        "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
        "heavy = [m for m in ('torch', 'composer', 'llmfoundry') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


# -- bad inputs: one line each, exit 2, nothing written ----------------------------------------------------------------


def _evil(path: Path) -> Path:
    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {path}.pwned",))

    torch.save({"state": {"timestamp": Evil()}}, path)
    return path


def _other_model(runs: Runs, path: Path) -> Path:
    checkpoint = torch.load(runs.stable / "ep0-ba8-rank0.pt", weights_only=False)
    checkpoint["state"]["integrations"] = {"huggingface": {"model": {"config": {"content": {"d_model": 64}}}}}
    torch.save(checkpoint, path)
    return path


def _owned(folder: Path) -> Path:
    """A folder whose checkpoint_guard lock a live process (this one) holds."""
    folder.mkdir(parents=True)
    record = {"host": socket.gethostname(), "pid": os.getpid(), "run_name": "live", "heartbeat": time.time()}
    (folder / ".foundry-ext-owner.json").write_text(json.dumps(record))
    fd = os.open(folder / ".foundry-ext-owner.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    _HELD.append(fd)
    return folder


_HELD: list[int] = []

# (id, argv from (runs, tmp), the start of the one line after "foundry-ext anneal: error: ", or a part of it)
Case = tuple[str, Callable[[Runs, Path], list], str]
DECAY = ["--decay", "4ba"]
CASES: list[Case] = [
    ("missing", lambda r, t: [t / "nope.pt", r.config, *DECAY], "CHECKPOINT {t}/nope.pt: no such file or folder"),
    ("text", lambda r, t: [_write(t / "a.pt", b"hello"), r.config, *DECAY], "is not a checkpoint: it is a text file"),
    ("empty", lambda r, t: [_write(t / "a.pt", b""), r.config, *DECAY], "is not a checkpoint: it is an empty file"),
    (
        "folder-no-latest",
        lambda r, t: [t, r.config, *DECAY],
        "a folder with no latest-rank0.pt or latest-sharded-rank0",
    ),
    (
        "dangling-latest",
        lambda r, t: [_link(t / "latest-rank0.pt", "ep0-ba9-rank0.pt") and t, r.config, *DECAY],
        "latest-rank0.pt is a link to ep0-ba9-rank0.pt, which does not exist",
    ),
    ("not-composer", lambda r, t: [_save(t / "a.pt", {"a": 1}), r.config, *DECAY], "not a Composer checkpoint"),
    ("hostile-pickle", lambda r, t: [_evil(t / "evil.pt"), r.config, *DECAY], "not on the allow-list"),
    (
        "bad-metadata",
        lambda r, t: [_write(t / ".metadata", b"\x80\x04K\x01.") and t, r.config, *DECAY],
        "/.metadata is not torch.distributed.checkpoint metadata",
    ),
    (
        "no-timestamp",
        lambda r, t: [_save(t / "a.pt", {"state": {"model": {}}}), r.config, *DECAY],
        "not a Composer training checkpoint a branch can start from (its 'timestamp' is missing",
    ),
    (
        "other-model",
        lambda r, t: [_other_model(r, t / "m.pt"), r.config, *DECAY],
        "model.d_model: 16 here, 64 in the checkpoint's model",
    ),
    (
        "other-optimizer",
        lambda r, t: [r.stable, r.config, "optimizer.name=adamw", *DECAY],
        "optimizer.name: 'adamw' here, the checkpoint's optimizer is DecoupledAdamW",
    ),
    (
        "other-lr",
        lambda r, t: [r.stable, r.config, "optimizer.lr=0.002", *DECAY],
        "optimizer.lr: 0.002 here, the checkpoint's peak LR (initial_lr) is 0.001",
    ),
    (
        "other-weight-decay",
        lambda r, t: [r.stable, r.config, "optimizer.weight_decay=0.1", *DECAY],
        "optimizer.weight_decay: 0.1 here, 1e-05 in the checkpoint",
    ),
    (
        "other-batch-size",
        lambda r, t: [r.stable, r.config, "global_train_batch_size=8", *DECAY],
        "global_train_batch_size: 8 here, the checkpoint's run trained 4 samples per batch",
    ),
    ("decay-0ba", lambda r, t: [r.stable, r.config, "--decay", "0ba"], "--decay 0ba: a decay of 0 batches"),
    ("decay-0dur", lambda r, t: [r.stable, r.config, "--decay", "0dur"], "--decay 0dur: a fraction of the branched"),
    ("decay-1dur", lambda r, t: [r.stable, r.config, "--decay", "1dur"], "--decay 1dur: a fraction of the branched"),
    ("decay-fraction-ba", lambda r, t: [r.stable, r.config, "--decay", "2.5ba"], "--decay 2.5ba: '2.5ba': batches"),
    ("decay-epochs", lambda r, t: [r.stable, r.config, "--decay", "1ep"], "--decay 1ep: epochs are not allowed"),
    ("decay-text", lambda r, t: [r.stable, r.config, "--decay", "long"], "--decay long: 'long' is not a duration"),
    ("decay-negative", lambda r, t: [r.stable, r.config, "--decay=-5ba"], "--decay -5ba: a decay of 0 batches"),
    (
        "decay-tokens",
        lambda r, t: [r.stable, r.config, "--decay", "100tok"],
        "--decay 100tok: the checkpoint does not say how many tokens a batch holds",
    ),
    (
        "decay-samples-uneven",
        lambda r, t: [r.stable, r.config, "--decay", "10sp"],
        "--decay 10sp: not a whole number of batches (4 samples per batch",
    ),
    (
        "decay-past-budget",
        lambda r, t: [r.stable, r.config, "max_duration=20ba", "--decay", "100ba"],
        "--decay 100ba: the branch would end at batch 108 (= 8 + 100), past the run's budget max_duration=20ba",
    ),
    ("floor-above-1", lambda r, t: [r.stable, r.config, *DECAY, "--floor", "1.5"], "--floor 1.5: expected a number in"),
    ("floor-nan", lambda r, t: [r.stable, r.config, *DECAY, "--floor", "nan"], "--floor nan: expected a number in"),
    ("floor-text", lambda r, t: [r.stable, r.config, *DECAY, "--floor", "low"], "--floor low: expected a number in"),
    (
        "floor-above-checkpoint-lr",
        lambda r, t: [r.warmup, r.config, *DECAY, "--floor", "0.5"],
        "--floor 0.5: the floor 0.5 x the peak LR 0.001 = 0.0005 is above the checkpoint's LR 0.00015 (batch 4)",
    ),
    (
        "inside-warmup",
        lambda r, t: [r.warmup, r.config, *DECAY],
        "batch 4 trains at LR 0.00015 = 0.15 x the peak 0.001, inside a warmup or a decay",
    ),
    ("inside-decay", lambda r, t: [r.decaying, r.config, *DECAY], "batch 12 trains at LR"),
    ("shape", lambda r, t: [r.stable, r.config, *DECAY, "--shape", "exp"], "--shape exp: not a decay shape; allowed"),
    (
        "stable-folder",
        lambda r, t: [r.stable, r.config, f"save_folder={r.stable}", *DECAY],
        "the stable run's folder (where ep0-ba8-rank0.pt is)",
    ),
    (
        "live-folder",
        lambda r, t: [r.stable, r.config, f"save_folder={_owned(t / 'live')}", *DECAY],
        "owned by a live run, run 'live'",
    ),
    (
        "out-missing-folder",
        lambda r, t: [r.stable, r.config, *DECAY, "--out", t / "no" / "b.yaml"],
        "--out {t}/no/b.yaml: the folder {t}/no does not exist",
    ),
    ("out-folder", lambda r, t: [r.stable, r.config, *DECAY, "--out", t], "--out {t}: is a folder"),
    (
        "out-is-config",
        lambda r, t: [r.stable, _copy(r.config, t / "c.yaml"), *DECAY, "--out", t / "c.yaml"],
        "is CONFIG itself",
    ),
    (
        "config-missing",
        lambda r, t: [r.stable, t / "none.yaml", *DECAY],
        "{t}/none.yaml: no such file",
    ),
    ("config-invalid", lambda r, t: [r.stable, _write(t / "c.yaml", b"a: [1"), *DECAY], "invalid YAML"),
    ("config-folder", lambda r, t: [r.stable, t, *DECAY], "is a folder, expected a train YAML file"),
    (
        "run-name-stable",
        lambda r, t: [r.stable, r.config, "run_name=stable", *DECAY],
        "run_name=stable: the stable run's",
    ),
    (
        "kept-source-of-another-branch",
        lambda r, t: [r.stable / "ep0-ba8-rank0.pt", r.config, f"save_folder={_other_branch(t)}", *DECAY],
        "save_folder={t}/b: {t}/b/anneal-source/ep0-ba8-rank0.pt exists and is not ",
    ),
    # issue 46: the stable run's files are never written, whatever --out names
    (
        "out-is-the-checkpoint",
        lambda r, t: [_stable_copy(r, t), r.config, *DECAY, "--out", t / "s" / "ep0-ba8-rank0.pt"],
        "--out {t}/s/ep0-ba8-rank0.pt: inside the stable run's folder {t}/s",
    ),
    (
        "out-new-file-in-the-stable-folder",
        lambda r, t: [_stable_copy(r, t), r.config, *DECAY, "--out", t / "s" / "branch.yaml"],
        "--out {t}/s/branch.yaml: inside the stable run's folder {t}/s",
    ),
    (
        "out-is-the-latest-link",
        lambda r, t: [_stable_copy(r, t).parent, r.config, *DECAY, "--out", t / "s" / "latest-rank0.pt"],
        "--out {t}/s/latest-rank0.pt: inside the stable run's folder {t}/s",
    ),
    (
        "out-a-link-into-the-stable-folder",
        lambda r, t: [_stable_copy(r, t), r.config, *DECAY, "--out", _link(t / "l.yaml", str(t / "s" / "x.yaml"))],
        "--out {t}/l.yaml: inside the stable run's folder {t}/s",
    ),
    # issue 46: a run_name that would move the derived save_folder out of the runs' folder
    (
        "checkpoint-run-name-dot-dot",
        lambda r, t: [_renamed(r, t, "../../escape"), r.config, *DECAY],
        "CHECKPOINT {t}/s/ep0-ba8-rank0.pt: the stable run's run_name '../../escape' is not a plain name",
    ),
    (
        "checkpoint-run-name-line-break",
        lambda r, t: [_renamed(r, t, "stable\ncode_paths: [/tmp/payload.py] #"), r.config, *DECAY],
        "the stable run's run_name 'stable\\ncode_paths: [/tmp/payload.py] #' is not a plain name",
    ),
    (
        "run-name-override-dot-dot",
        lambda r, t: [r.stable, r.config, "run_name=../../escape", *DECAY],
        "run_name=../../escape: not a plain name",
    ),
    ("run-name-override-slash", lambda r, t: [r.stable, r.config, "run_name=a/b", *DECAY], "run_name=a/b: not a plain"),
    ("run-name-override-dot", lambda r, t: [r.stable, r.config, "run_name=..", *DECAY], "run_name=..: not a plain"),
    (
        "run-name-override-line-break",
        lambda r, t: [r.stable, r.config, "run_name=b\nload_weights_only: true", *DECAY],
        "run_name=b\\nload_weights_only: true: not a plain name",
    ),
    (
        "run-name-override-line-separator",
        lambda r, t: [r.stable, r.config, "run_name=b\u2028x", *DECAY],
        "run_name=b\\u2028x: not a plain name",
    ),
    ("run-name-override-backslash", lambda r, t: [r.stable, r.config, "run_name=a\\b", *DECAY], "not a plain name"),
    (
        "checkpoint-run-name-slash",
        lambda r, t: [_renamed(r, t, "runs/stable"), r.config, *DECAY],
        "the stable run's run_name 'runs/stable' is not a plain name",
    ),
    (
        "out-in-a-subfolder-of-the-stable-folder",
        lambda r, t: [_stable_copy(r, t), r.config, *DECAY, "--out", _mkdir(t / "s" / "sub") / "b.yaml"],
        "--out {t}/s/sub/b.yaml: inside the stable run's folder {t}/s",
    ),
]


def _mkdir(folder: Path) -> Path:
    folder.mkdir(parents=True)
    return folder


def _stable_copy(runs: Runs, work: Path) -> Path:
    """The stable run's folder, copied (a bug that writes into it must not spoil the session's run)."""
    (work / "s").mkdir()
    for name in ("ep0-ba4-rank0.pt", "ep0-ba8-rank0.pt"):
        _copy(runs.stable / name, work / "s" / name)
    _link(work / "s" / "latest-rank0.pt", "ep0-ba8-rank0.pt")
    return work / "s" / "ep0-ba8-rank0.pt"


def _renamed(runs: Runs, work: Path, run_name: str) -> Path:
    """A copy of the stable run's batch-8 checkpoint whose stored run_name is ``run_name``."""
    checkpoint = torch.load(runs.stable / "ep0-ba8-rank0.pt", weights_only=False)
    checkpoint["state"]["run_name"] = run_name
    (work / "s").mkdir(exist_ok=True)
    return _save(work / "s" / "ep0-ba8-rank0.pt", checkpoint)


def _garbled_owner(folder: Path, heartbeat: object) -> Path:
    """A folder whose checkpoint_guard owner record (another host's) has a heartbeat that is not a number."""
    folder.mkdir(parents=True)
    record = {"host": "elsewhere", "pid": 1, "run_name": "other", "heartbeat": heartbeat}
    (folder / ".foundry-ext-owner.json").write_text(json.dumps(record))
    return folder


def _other_branch(work: Path) -> Path:
    """A branch folder whose kept source has the name of the stable run's batch-8 checkpoint, and other bytes."""
    (work / "b" / "anneal-source").mkdir(parents=True)
    (work / "b" / "anneal-source" / "ep0-ba8-rank0.pt").write_bytes(b"another run's checkpoint")
    return work / "b"


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _save(path: Path, obj: object) -> Path:
    torch.save(obj, path)
    return path


def _link(path: Path, target: str) -> Path:
    path.symlink_to(target)
    return path


def _copy(src: Path, dst: Path) -> Path:
    dst.write_bytes(src.read_bytes())
    return dst


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_nothing_written(
    runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture, case: Case
) -> None:
    _, argv_of, expected = case
    work = tmp_path / "work"
    work.mkdir()
    argv = argv_of(runs, work)
    if "--out" not in argv:
        argv += ["--out", tmp_path / "branch.yaml"]
    before = snapshot(tmp_path), snapshot(runs.root)
    try:
        code, out, err = anneal(capsys, *argv)
    finally:
        while _HELD:
            os.close(_HELD.pop())
    assert code == 2, (out, err)
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("foundry-ext anneal: error: "), err
    assert expected.format(t=work) in lines[0], lines[0]
    assert (snapshot(tmp_path), snapshot(runs.root)) == before
    assert not list(work.glob("*.pwned"))


# Every YAML and Unicode line break (PyYAML reads \x85, \u2028 and \u2029 as one too) and the other controls
BREAKS = {"lf": "\n", "cr": "\r", "crlf": "\r\n", "nel": "\x85", "ls": "\u2028", "ps": "\u2029", "vt": "\v", "ff": "\f"}
# What a branch of the stable run holds: its config's keys and the four anneal sets (load_path, autoresume, ...)
BRANCH_KEYS = {"load_path", "save_folder", "run_name", "autoresume", "max_duration", "scheduler"}


@pytest.mark.parametrize("where", ["out", "checkpoint-run-name"])
@pytest.mark.parametrize("brk", list(BREAKS))
def test_a_line_break_in_out_or_the_checkpoints_run_name_writes_no_yaml_key(
    runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture, where: str, brk: str
) -> None:
    """Issue 46: the branch's header comment repeated --out and the stored run_name raw; a line break wrote keys."""
    injected = f"{BREAKS[brk]}code_paths: [payload.py]{BREAKS[brk]}load_weights_only: true #"  # no '/': a file name
    checkpoint, out, extra = runs.stable / "ep0-ba8-rank0.pt", tmp_path / "branch.yaml", []
    if where == "out":
        out = tmp_path / f"b{injected}.yaml"
    else:
        work = tmp_path / "w"
        work.mkdir()
        checkpoint = _renamed(runs, work, f"stable{injected}")
        extra = ["run_name=branch", f"save_folder={tmp_path}/branch"]  # the stored name is refused as a folder name
    code, _, err = anneal(capsys, checkpoint, runs.config, *extra, "--decay", "4ba", "--out", out)
    assert code == 0, err
    text = out.read_text()
    cfg = yaml.safe_load(text)
    stable = yaml.safe_load(runs.config.read_text())
    assert set(cfg) == set(stable) | BRANCH_KEYS, set(cfg) ^ (set(stable) | BRANCH_KEYS)
    assert "code_paths" not in cfg and not cfg.get("load_weights_only")
    header = text[: text.index("\n" + next(iter(stable)) + ":") + 1]
    assert [line[:1] for line in header.splitlines()] == ["#", "#"], header  # two comment lines, nothing else
    assert not any(c in header for c in "".join(BREAKS.values()).replace("\n", "")), header


@pytest.mark.parametrize(
    "heartbeat",
    ["abc", None, [1], float("nan"), float("inf"), 10**400, 1e300],
    ids=["text", "null", "list", "nan", "inf", "400-digits", "1e300"],
)
def test_a_garbled_owner_record_is_no_owner_as_checkpoint_guard_reads_it(
    runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture, heartbeat: object
) -> None:
    """Issue 46: a heartbeat of 'abc' in another host's record was a ValueError traceback.

    checkpoint_guard reads a record that is not JSON as none (the lock decides); one with a heartbeat that is not a
    time says no more about a live owner, and is read the same (checkpoint/owner.py ``read_record``).
    """
    folder = _garbled_owner(tmp_path / "g", heartbeat)
    out = tmp_path / "branch.yaml"
    code, _, err = anneal(capsys, runs.stable, runs.config, f"save_folder={folder}", "--decay", "4ba", "--out", out)
    assert code == 0, err
    assert yaml.safe_load(out.read_text())["save_folder"] == str(folder)


def test_the_corpus_covers_the_issues_list() -> None:
    ids = {c[0] for c in CASES}
    assert len(ids) == len(CASES) >= 55


def test_a_source_deleted_before_it_is_kept_is_one_line_and_nothing_is_left(runs: Runs, tmp_path: Path) -> None:
    """The stable run's rotation wins the race: the source vanishes between its reading and its linking."""
    from foundry_ext.anneal import AnnealError, plan_branch, write_branch

    (tmp_path / "s").mkdir()  # the stable folder: --out is outside it (its files are never written)
    source = _copy(runs.stable / "ep0-ba8-rank0.pt", tmp_path / "s" / "ep0-ba8-rank0.pt")
    out = tmp_path / "branch.yaml"
    branch = plan_branch(str(source), str(runs.config), [f"save_folder={tmp_path}/b"], "4ba", out=str(out))
    source.unlink()  # what save_num_checkpoints_to_keep does
    with pytest.raises(AnnealError, match=r"^CHECKPOINT .*ep0-ba8-rank0.pt: deleted while the branch was written"):
        write_branch(branch, str(out))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]  # neither the YAML nor the branch's folder


def test_the_same_command_again_reuses_the_kept_source(runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture):
    argv = [runs.stable / "ep0-ba4-rank0.pt", runs.config, f"save_folder={tmp_path}/b", *DECAY, "--out"]
    code, _, err = anneal(capsys, *argv, tmp_path / "1.yaml")
    assert code == 0, err
    code, out, err = anneal(capsys, *argv, tmp_path / "2.yaml")
    assert code == 0, err
    kept = tmp_path / "b" / "anneal-source" / "ep0-ba4-rank0.pt"
    assert f"  source: {kept} (kept by an earlier run of this command: the same checkpoint); the YAML loads it" in out
    assert os.path.samefile(kept, runs.stable / "ep0-ba4-rank0.pt")
