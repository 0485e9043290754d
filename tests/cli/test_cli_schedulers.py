"""``foundry-ext schedulers``: every registered name, its provider and its parameters."""

from __future__ import annotations

import re

import pytest
from llmfoundry import registry

from foundry_ext.cli import main


def blocks(out: str) -> dict[str, str]:
    """Scheduler name -> its indented lines."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^(\S+)\n((?:  .*\n?)+)", out, re.MULTILINE)}


def test_lists_every_registered_scheduler(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schedulers"]) == 0
    listed = blocks(capsys.readouterr().out)
    assert set(listed) == set(registry.schedulers.get_all())
    assert "foundry-ext (entry point)" in listed["warmup_stable_decay"]
    assert "t_warmup='0ba', t_decay='0.2dur'" in listed["warmup_stable_decay"]
    assert "llm-foundry (built in)" in listed["cosine_with_warmup"]
    assert "runs composer.optim.scheduler.CosineAnnealingWithWarmupScheduler" in listed["cosine_with_warmup"]
    assert "t_warmup, t_max='1dur'" in listed["cosine_with_warmup"]
    assert "type (ChainedScheduler, ConstantLR," in listed["torch_lr_scheduler"]
    assert "monitor='metrics/eval/LanguageCrossEntropy'" in listed["reduce_lr_on_plateau"]
    assert "t_scale" in listed["inv_sqrt_with_warmup"]
    # every listed runner is the class llm-foundry's registry builds for that name
    for name, cls in registry.schedulers.get_all().items():
        assert f"runs {cls.__module__}.{cls.__qualname__}" in listed[name], name


def test_a_name_shows_every_key_with_its_range(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schedulers", "warmup_stable_decay"]) == 0
    out = capsys.readouterr().out
    assert "alpha_f          default 0.0; a number in [0, 1]: final multiplier" in out
    assert "decay_type       default 'linear'; linear, sqrt, cosine, square" in out


def test_filter_and_unknown_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schedulers", "step"]) == 0
    assert set(blocks(capsys.readouterr().out)) == {"step"}
    assert main(["schedulers", "warmup_stable"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "did you mean 'warmup_stable_decay'" in err


def test_a_callback_name_shows_its_keys(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 46: ``schedulers spike_guard`` said "not a registered scheduler"; no command listed a callback's keys."""
    from foundry_ext.catalog.callbacks import SpikeGuardConfig

    assert main(["schedulers", "spike_guard"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1 callback (callbacks.NAME):\n\nspike_guard\n")
    keys = [line.split()[0] for line in out.splitlines() if line.startswith("    ")]
    assert keys == list(SpikeGuardConfig.model_fields)  # every key, in the declared order
    assert "    window           default 128; an integer in [2, 100000]" in out
    assert main(["schedulers", "spike_gaurd"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "did you mean 'spike_guard'?" in err and "callbacks:" in err
