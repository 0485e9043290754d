"""Every example YAML is a valid llm-foundry train config whose scheduler and callbacks build (the GPU ones too)."""

from __future__ import annotations

from pathlib import Path

import pytest
from llmfoundry.utils.config_utils import TRAIN_CONFIG_KEYS, TrainConfig, make_dataclass_and_log_config
from omegaconf import OmegaConf as om

from foundry_ext.cli import main

YAMLS = sorted((Path(__file__).resolve().parent.parent / "yamls").glob("*.yaml"))
FAMILIES = {"warmup_stable_decay", "multistep_with_warmup", "torch_lr_scheduler", "reduce_lr_on_plateau"}


def test_one_realistic_multi_gpu_example_per_scheduler_family() -> None:
    gpu = [om.load(p) for p in YAMLS if p.name.startswith(("mpt-125m", "resume-"))]
    assert {cfg.scheduler.name for cfg in gpu} >= FAMILIES
    for cfg in gpu:
        assert cfg.precision == "amp_bf16" and cfg.fsdp_config.sharding_strategy == "FULL_SHARD"
        assert cfg.model.d_model == 768 and cfg.model.n_layers == 12  # MPT-125M


@pytest.mark.parametrize("path", YAMLS, ids=lambda p: p.name)
def test_example_is_a_valid_train_config(path: Path, capsys: pytest.CaptureFixture) -> None:
    _, cfg = make_dataclass_and_log_config(om.load(path), TrainConfig, TRAIN_CONFIG_KEYS, transforms="all")
    assert cfg.scheduler["name"]
    assert main(["validate", str(path)]) == 0, capsys.readouterr()
    assert capsys.readouterr().out.startswith("OK: ")
