"""Every example YAML is a valid llm-foundry train config whose scheduler and callbacks build (the GPU ones too)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from llmfoundry.utils.config_utils import TRAIN_CONFIG_KEYS, TrainConfig, make_dataclass_and_log_config
from omegaconf import OmegaConf as om

from foundry_ext.cli import main
from tests.support.launcher import REPO

YAMLS = sorted((REPO / "yamls").glob("*.yaml"))
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
    assert capsys.readouterr().out.splitlines()[-1].startswith("OK: ")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_tiny_plateau_trains_as_shipped(run_composer: Any) -> None:
    """yamls/tiny-plateau.yaml (the recommended plateau settings) through the real launcher, its first 3 evaluations.

    375 of its 5,000 batches: evaluations at 125, 250 and 375 batches, each logging the plateau state. With
    patience 2 a cut needs 3 evaluations without improvement after the best, so none can come before batch 500.
    """
    run = run_composer("yamls/tiny-plateau.yaml", "max_duration=375ba", "save_folder=null")
    console = run.stderr
    for t in (125, 250, 375):
        block = console.split(f"[batch={t}/375]:")[1].split("[batch=")[0]
        assert "Eval metrics/eval/LanguageCrossEntropy:" in block and "Eval lr_plateau/scale: 1.0000" in block, t
    assert "cut LR scale" not in console
