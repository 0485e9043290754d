"""foundry_ext.catalog.fsdp against what it mirrors: Composer's FSDP2 keys, a real torch.distributed.checkpoint folder.

The bad configs themselves are rows of tests/catalog/corpus.py (through validate and llm-foundry's train_from_yaml in
tests/catalog/test_bad_configs.py); the launcher runs are in tests/resume/test_fsdp_resume.py. Here: the facts those
rows rely on, in one process.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dist_cp

from foundry_ext.catalog.fsdp import FSDP2_KEYS, check_fsdp
from foundry_ext.checkpoint.layout import local_kind

SHARDED = {"fsdp_config": {"state_dict_type": "sharded"}}


def test_fsdp2_keys_are_composers() -> None:
    """The keys Composer's ``FSDP2Config.from_compatible_attrs`` keeps: any other is dropped with a warning."""
    from composer.utils.parallelism import FSDP2Config

    assert set(FSDP2_KEYS) == FSDP2Config.settable_attrs()
    with pytest.warns(UserWarning, match="sharding_strategy: FULL_SHARD' is not a settable attribute"):
        FSDP2Config.from_compatible_attrs({"sharding_strategy": "FULL_SHARD", "mixed_precision": "FULL"})
    assert [
        str(p) for p in check_fsdp({"fsdp_config": {"mixed_precision": "FULL"}}, world_size=2, fsdp_version="2")
    ] == []
    # FSDP1 (FSDP_VERSION unset) takes them: nothing to say
    assert check_fsdp({"fsdp_config": {"sharding_strategy": "FULL_SHARD"}}, world_size=2, fsdp_version="1") == []


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A sharded checkpoint folder written by ``dist_cp.save`` with a ``FileSystemWriter`` (Composer's call), one
    process: ``__0_0.distcp`` and ``.metadata``."""
    out = tmp_path / "ep0-ba4"
    state = {"state": {"model": {"w": torch.arange(4096.0)}, "timestamp": {"batch": 4}}}
    dist_cp.save(state_dict=state, storage_writer=dist_cp.FileSystemWriter(str(out)), no_dist=True)
    return out


def _lines(cfg: dict, world_size: int = 2) -> list[str]:
    return [str(p) for p in check_fsdp(cfg, world_size=world_size, fsdp_version="2")]


def test_a_complete_folder_passes_and_a_damaged_one_is_named(folder: Path) -> None:
    assert _lines({**SHARDED, "load_path": str(folder)}) == []
    assert [local_kind(p) for p in (str(folder), str(folder / ".metadata"), "s3://b/ep0-ba4", "nowhere")] == [
        "folder",
        "file",
        None,
        None,
    ]
    shard = folder / "__0_0.distcp"
    size = shard.stat().st_size
    os.truncate(shard, size - 1)
    assert _lines({**SHARDED, "load_path": str(folder)}) == [
        f"load_path: '{folder}' has __0_0.distcp (rank 0's shard) cut short ({size - 1} of at least {size} bytes, by "
        "its .metadata): the checkpoint is incomplete"
    ]
    shard.unlink()
    assert _lines({**SHARDED, "load_path": str(folder)}) == [
        f"load_path: '{folder}' lacks __0_0.distcp (rank 0's shard), which its .metadata names: the checkpoint is "
        "incomplete"
    ]


def test_autoresume_checks_the_latest_it_would_load_not_load_path(folder: Path, tmp_path: Path) -> None:
    """Composer's autoresume wins over ``load_path`` once ``latest`` exists; ``{run_name}`` is filled as it fills it."""
    save_folder = tmp_path / "{run_name}" / "checkpoints"
    real = tmp_path / "r" / "checkpoints"
    real.mkdir(parents=True)
    cfg = {"fsdp_config": {"state_dict_type": "sharded"}, "run_name": "r", "save_folder": str(save_folder)}
    cfg |= {"autoresume": True, "load_path": str(folder)}
    assert _lines(cfg) == []  # no latest yet: the load_path, complete
    (real / "latest-sharded-rank0").symlink_to("ep0-ba8-rank0.pt")
    (real / "ep0-ba8-rank0.pt").write_bytes(b"PK")  # what a run of 1 rank writes under this name
    lines = _lines(cfg)
    assert len(lines) == 1 and lines[0].startswith(
        "autoresume: save_folder's latest-sharded-rank0 -> ep0-ba8-rank0.pt is a checkpoint file"
    )
    assert _lines(cfg, world_size=1) == []  # one rank loads files
    # checkpoint_guard repairs latest at BEFORE_LOAD, after this check: what latest will be is the guard's to decide
    assert _lines({**cfg, "callbacks": {"checkpoint_guard": {}}}) == []
