"""``foundry-ext demo-data``: deterministic, read by llm-foundry offline, atomic, careful with foreign folders."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from foundry_ext.cli import main
from foundry_ext.demo_data import (
    EOS,
    MARKER,
    SEQ_LEN,
    VOCAB_SIZE,
    DemoDataError,
    read_marker,
    write_demo_data,
)
from foundry_ext.streaming_cleanup import streaming_cleanup
from tests.support.launcher import REPO


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_seed_same_bytes_other_seed_other_data(tmp_path: Path) -> None:
    a = write_demo_data(tmp_path / "a", seed=3)
    b = write_demo_data(tmp_path / "b", seed=3)
    c = write_demo_data(tmp_path / "c", seed=4)
    assert a.created and b.created
    files_a, files_b = _files(a.path), _files(b.path)
    assert {"train/index.json", "train/shard.00000.mds", "val/shard.00000.mds", MARKER} <= set(files_a)
    assert files_a == files_b
    assert _files(c.path)["train/shard.00000.mds"] != files_a["train/shard.00000.mds"]


def test_tokenizer_loads_offline_with_auto_tokenizer(demo_data: Path) -> None:
    from llmfoundry.utils.builders import build_tokenizer
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(demo_data / "tokenizer"), local_files_only=True)
    assert len(tokenizer) == VOCAB_SIZE == read_marker(demo_data)["vocab_size"]
    assert tokenizer.eos_token == EOS
    special = {tokenizer.eos_token_id, tokenizer.bos_token_id, tokenizer.pad_token_id}
    assert None not in special and len(special) == 3  # pad != eos: the LM collator masks pad labels
    text = "the two cats that a dog sees sleep. three plus four is seven."
    assert tokenizer.decode(tokenizer(text)["input_ids"]) == text
    # what llm-foundry's train.py does with `tokenizer: {name: <folder>}`
    built = build_tokenizer(str(demo_data / "tokenizer"), {"model_max_length": SEQ_LEN})
    assert built.eos_token_id == tokenizer.eos_token_id and built.model_max_length == SEQ_LEN


def test_llm_foundry_text_dataloader_reads_the_shards(
    demo_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    from llmfoundry import registry
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(demo_data / "tokenizer"), local_files_only=True)
    build_text_dataloader = registry.dataloaders.get("text")
    locks = tmp_path / "tmp"  # where streaming puts its lock files: tempfile.gettempdir()
    locks.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(locks))
    with streaming_cleanup():  # this session trains again: the dataset's threads, /dev/shm and lock files end here
        spec = build_text_dataloader(
            tokenizer=tokenizer,
            device_batch_size=4,
            dataset={"local": str(demo_data), "split": "val", "shuffle": False, "max_seq_len": SEQ_LEN},
            drop_last=False,
            num_workers=0,
            prefetch_factor=None,
            persistent_workers=False,
            pin_memory=False,
        )
        assert len(spec.dataloader.dataset) == read_marker(demo_data)["sequences"]["val"]
        batch = next(iter(spec.dataloader))
        ids = batch["input_ids"]
        assert tuple(ids.shape) == (4, SEQ_LEN)
        assert int(ids.min()) >= 0 and int(ids.max()) < VOCAB_SIZE
        assert (batch["labels"] == ids).all()  # packed rows, no padding: every token is a target
        assert (ids == tokenizer.eos_token_id).any()  # documents are separated by EOS
        assert "where does the" in tokenizer.decode(ids[0])
        assert sorted(p.name.split("_", 1)[1] for p in locks.iterdir()) == ["barrier_filelock", "cache_filelock"]
    assert list(locks.iterdir()) == []  # streaming itself leaves them for good


def test_previous_output_is_reused_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "data"
    assert main(["demo-data", str(target)]) == 0
    assert "wrote demo data" in capsys.readouterr().out
    before = {p: p.stat().st_mtime_ns for p in target.rglob("*")}
    assert main(["demo-data", str(target)]) == 0
    out = capsys.readouterr().out
    assert f"demo data is already in the folder {target}/ ({target}, seed 17); reusing it" in out
    assert f"the example YAMLs read ./demo-data: train on this folder with variables.data_local={target}" in out
    assert {p: p.stat().st_mtime_ns for p in target.rglob("*")} == before


def test_without_dir_it_is_the_folder_the_yamls_read(
    demo_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``foundry-ext demo-data`` alone uses ./demo-data, the yamls' ``variables.data_local``; no folder named DIR."""
    shutil.copytree(demo_data, tmp_path / "demo-data")
    monkeypatch.chdir(tmp_path)
    assert main(["demo-data"]) == 0
    out = capsys.readouterr().out
    assert out == f"demo data is already in the folder demo-data/ ({tmp_path / 'demo-data'}, seed 17); reusing it\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo-data"]
    assert main(["demo-data", "./demo-data/"]) == 0
    assert "already in the folder demo-data/ (" in capsys.readouterr().out
    local = yaml.safe_load((REPO / "yamls" / "tiny-wsd.yaml").read_text())["variables"]["data_local"]
    assert local == "./demo-data"


def test_other_seed_replaces_a_previous_output(tmp_path: Path) -> None:
    first = write_demo_data(tmp_path / "data", seed=1)
    second = write_demo_data(tmp_path / "data", seed=2)
    assert second.created and read_marker(second.path)["seed"] == 2
    assert first.path == second.path
    assert [p.name for p in tmp_path.iterdir()] == ["data"]  # no leftovers beside it


def test_empty_folder_is_filled(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    assert write_demo_data(tmp_path / "data", seed=1).created


@pytest.mark.parametrize("content", ["a file inside", "a file instead"])
def test_foreign_path_is_refused_and_kept(tmp_path: Path, content: str, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "mine"
    if content == "a file inside":
        target.mkdir()
        (target / "notes.txt").write_text("keep me")
    else:
        target.write_text("keep me")
    before = sorted(p.name for p in tmp_path.rglob("*"))

    assert main(["demo-data", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("foundry-ext demo-data: error: ") and err.count("\n") == 1
    assert str(target) in err
    with pytest.raises(DemoDataError):
        write_demo_data(target)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    assert (target / "notes.txt" if target.is_dir() else target).read_text() == "keep me"


def test_folder_without_valid_marker_is_not_taken_for_finished(demo_data: Path, tmp_path: Path) -> None:
    # A copy of complete data minus the marker, as if a writer had stopped just before it: refused, not reused.
    target = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(demo_data), str(target)], check=True)
    (target / MARKER).unlink()
    assert read_marker(target) is None
    with pytest.raises(DemoDataError, match="not a foundry-ext demo-data folder"):
        write_demo_data(target)
    assert (target / "train" / "index.json").exists()  # nothing deleted

    # marker there but a shard index gone: incomplete, refused too
    write_demo_data(tmp_path / "other", seed=1)
    (tmp_path / "other" / "val" / "index.json").unlink()
    assert read_marker(tmp_path / "other") is None
    with pytest.raises(DemoDataError):
        write_demo_data(tmp_path / "other", seed=1)


def test_killed_writer_leaves_no_finished_looking_folder(tmp_path: Path) -> None:
    target = tmp_path / "data"
    code = f"from foundry_ext.demo_data import write_demo_data; write_demo_data({str(target)!r}, seed=5)"
    proc = subprocess.Popen([sys.executable, "-c", code])
    partial = None
    deadline = time.monotonic() + 120
    while partial is None and proc.poll() is None and time.monotonic() < deadline:
        partial = next((p for p in tmp_path.iterdir() if p.name.startswith(".foundry-ext-demo-partial")), None)
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)  # mid-write: the temporary folder exists, the target must not
    proc.wait()
    assert partial is not None, "the writer finished before it could be interrupted"
    assert not target.exists()
    assert partial.exists()

    result = write_demo_data(target, seed=5)  # the next run starts over and clears the dead writer's folder
    assert result.created and read_marker(target)["seed"] == 5
    assert not partial.exists()
    assert json.loads((target / MARKER).read_text())["sequences"] == {"train": 4096, "val": 256}
