"""One completeness check of a sharded folder (:func:`foundry_ext.checkpoint.layout.sharded_gap`), two wordings.

The pre-flight check (``load_path: '<folder>' lacks ...``) and ``checkpoint_guard`` (``shard ... is missing``) had a
check each, which differed at the edges; each edge below is answered the stricter way, by both. The folders are real
``torch.distributed.checkpoint`` saves (``FileSystemWriter``, Composer's call) whose ``.metadata`` is then rewritten.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dist_cp

from foundry_ext.checkpoint.layout import sharded_folder_problem, sharded_gap
from foundry_ext.trainer.checkpoint_guard.integrity import sharded_problem


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    out = tmp_path / "ep0-ba4"
    state = {"state": {"model": {"w": torch.arange(4096.0)}, "timestamp": {"batch": 4}}}
    dist_cp.save(state_dict=state, storage_writer=dist_cp.FileSystemWriter(str(out)), no_dist=True)
    return out


def _rewrite(folder: Path, **change: object) -> None:
    """Give every storage entry of ``.metadata`` the changed fields (``relative_path``, ``offset``, ...)."""
    metadata = pickle.loads((folder / ".metadata").read_bytes())  # the test's own file: trusted here
    metadata.storage_data = {k: dataclasses.replace(v, **change) for k, v in metadata.storage_data.items()}
    (folder / ".metadata").write_bytes(pickle.dumps(metadata))


def test_a_complete_folder_is_complete_for_both(folder: Path) -> None:
    assert sharded_gap(folder) is None and sharded_folder_problem(folder) is None and sharded_problem(folder) is None


def test_a_shard_in_a_subfolder_is_outside(folder: Path) -> None:
    """The guard took ``sub/__0_0.distcp`` (relative, no ``..``) as a shard; FileSystemWriter never writes one."""
    (folder / "sub").mkdir()
    os.rename(folder / "__0_0.distcp", folder / "sub" / "__0_0.distcp")  # complete, where .metadata now points
    _rewrite(folder, relative_path="sub/__0_0.distcp")
    assert sharded_problem(folder) == ".metadata names a shard outside the folder: 'sub/__0_0.distcp'"
    assert sharded_folder_problem(folder) == "has a .metadata that names a shard outside the folder: 'sub/__0_0.distcp'"


@pytest.mark.parametrize("name", [".", "", "/dev/zero", "../x"])
def test_a_shard_that_is_no_plain_file_name_is_outside(folder: Path, name: str) -> None:
    """``.`` and ``""`` are the folder itself, whose size the guard compared with the shard's length."""
    _rewrite(folder, relative_path=name, offset=0, length=1)
    assert sharded_gap(folder).kind == "outside"  # type: ignore[union-attr]
    assert sharded_problem(folder) == f".metadata names a shard outside the folder: {name!r}"


@pytest.mark.parametrize("offset", ["x", None, 1.5j], ids=["text", "none", "complex"])
def test_an_entry_that_is_no_number_is_unreadable_metadata_not_an_exception(folder: Path, offset: object) -> None:
    """The guard read ``int(info.offset)`` outside its ``try``: a ValueError or TypeError ended the run."""
    _rewrite(folder, offset=offset)
    assert sharded_gap(folder).kind == "bad-metadata"  # type: ignore[union-attr]
    assert sharded_problem(folder).startswith(".metadata does not unpickle (")  # type: ignore[union-attr]
    assert sharded_folder_problem(folder).startswith(  # type: ignore[union-attr]
        "has a .metadata that does not read as torch.distributed.checkpoint metadata: "
    )


def test_a_shard_that_cannot_be_stat_ed_is_missing_not_an_exception(folder: Path) -> None:
    """The guard caught FileNotFoundError only: a symlink loop (ELOOP) ended the run."""
    shard = folder / "__0_0.distcp"
    shard.unlink()
    shard.symlink_to(shard.name)  # a link to itself
    with pytest.raises(OSError):
        shard.stat()
    assert sharded_problem(folder) == "shard __0_0.distcp is missing"
    assert sharded_folder_problem(folder) == (
        "lacks __0_0.distcp (rank 0's shard), which its .metadata names: the checkpoint is incomplete"
    )


@pytest.mark.parametrize(
    "data", [b"", b"\x80\x04K\x01.", b"\x80\x04h\x05.", b"(" * 100_000], ids=["empty", "int", "memo", "deep"]
)
def test_metadata_that_is_no_metadata_is_answered(folder: Path, data: bytes) -> None:
    (folder / ".metadata").write_bytes(data)
    assert sharded_gap(folder).kind == "bad-metadata"  # type: ignore[union-attr]
    assert "does not unpickle" in str(sharded_problem(folder))


def test_no_metadata_is_worded_for_each(folder: Path) -> None:
    (folder / ".metadata").rename(folder / ".metadata.tmp")
    assert sharded_problem(folder) == (
        "no .metadata (.metadata.tmp exists: the coordinator was writing it): not every rank had finished its shard"
    )
    assert sharded_folder_problem(folder).startswith("has no .metadata (it holds __0_0.distcp): ")  # type: ignore[union-attr]
