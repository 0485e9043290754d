"""``foundry-ext validate`` checks the whole train config (issue 46), and its tables are the installed stack's.

A newcomer's mistakes that `validate` used to call `OK`: each is now one line naming the field and the nearest valid
key or value, exit 2. Warnings are treated as ``law`` treats them: printed, exit 0, exit 2 with ``--strict``.
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from foundry_ext.catalog.fsdp import FSDP1_KEYS, FSDP1_VALUES
from foundry_ext.catalog.train_config import MPT_MODEL_KEYS, TRAIN_KEYS
from foundry_ext.cli import main
from tests.support.launcher import REPO

WSD = str(REPO / "yamls" / "tiny-wsd.yaml")

CASES = [
    pytest.param(
        ["max_duraton=100ba"],
        "max_duraton: unknown key (did you mean 'max_duration'?): llm-foundry's train.py stops on it",
        id="top-level-typo",
    ),
    pytest.param(
        ["model.d_modle=768"],
        "model.d_modle: unknown key (did you mean 'd_model'?): MPTConfig keeps it without using it",
        id="mpt-model-typo",
    ),
    pytest.param(
        ["fsdp_config.sharding_strategy=FULL_SHRAD"],
        "fsdp_config.sharding_strategy: 'FULL_SHRAD' is not allowed (did you mean 'FULL_SHARD'?); expected one of "
        "FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, _HYBRID_SHARD_ZERO2",
        id="fsdp-value-typo",
    ),
    pytest.param(
        ["fsdp_config.sharding_stratgy=FULL_SHARD"],
        "fsdp_config.sharding_stratgy: unknown key (did you mean 'sharding_strategy'?)",
        id="fsdp-key-typo",
    ),
    pytest.param(
        ["autoresume=true", "run_name=", "save_folder=/tmp/x"],
        "run_name: missing, but autoresume: true needs it",
        id="autoresume-without-run-name",
    ),
    pytest.param(
        ["autoresume=true", "save_folder=null"], "save_folder: missing, but autoresume: true", id="no-save-folder"
    ),
    pytest.param(["tokenizer=null"], "tokenizer: missing; llm-foundry's train.py requires it", id="missing-tokenizer"),
]


@pytest.mark.parametrize(("overrides", "line"), CASES)
def test_a_newcomers_mistake_is_one_line_and_exit_2(
    overrides: list[str], line: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("FSDP_VERSION", "RUN_NAME", "COMPOSER_RUN_NAME"):
        monkeypatch.delenv(name, raising=False)
    rc = main(["validate", WSD, *overrides])
    out, err = capsys.readouterr()
    assert rc == 2, out + err
    errors = [x for x in err.splitlines() if x.startswith(f"{WSD}: ")]
    assert len(errors) == 1 and errors[0].startswith(f"{WSD}: {line}"), err
    assert out.splitlines()[-1] == f"FAILED: 1 problem in {WSD}"


def test_run_name_from_the_environment_is_enough(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUN_NAME", "from-env")  # what llm-foundry falls back to for a blank run_name
    assert main(["validate", WSD, "autoresume=true", "run_name=", "save_folder=/tmp/x"]) == 0, capsys.readouterr()


def test_fsdp_values_are_read_upper_cased_as_composer_does(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", WSD, "fsdp_config.sharding_strategy=shard_grad_op"]) == 0, capsys.readouterr()


def test_a_unitless_max_duration_is_a_warning_exit_0_and_2_with_strict(capsys: pytest.CaptureFixture[str]) -> None:
    line = (
        f"{WSD}: warning: max_duration: 10000 has no unit: Composer reads it as 10000ep (10000 epochs); write "
        "10000ep to say so, or 10000ba for batches"
    )
    assert main(["validate", WSD, "max_duration=10000"]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == [line]  # one line: no separate note for the override
    last = out.splitlines()[-1]
    assert last.startswith("OK: warmup_stable_decay") and last.endswith("; 1 warning (--strict: exit 2)"), last
    assert main(["validate", WSD, "max_duration=10000", "--strict"]) == 2
    out, err = capsys.readouterr()
    assert err.splitlines() == [line]
    assert out.splitlines()[-1] == f"FAILED: 1 problem in {WSD} (--strict: 1 warning among them)"


def test_a_warmup_longer_than_the_run_is_the_same_severity(capsys: pytest.CaptureFixture[str]) -> None:
    inverse_sqrt = str(REPO / "yamls" / "tiny-inverse-sqrt.yaml")  # t_warmup=20ba
    assert main(["validate", inverse_sqrt, "max_duration=10ba"]) == 0
    out, err = capsys.readouterr()
    assert "warning: scheduler.t_warmup: the warmup (20ba = 20 batches) is longer than the run" in err
    last = out.splitlines()[-1]
    assert last.startswith("OK: inverse_sqrt") and last.endswith("; 1 warning (--strict: exit 2)"), last
    assert main(["validate", inverse_sqrt, "max_duration=10ba", "--strict"]) == 2


def test_ok_says_what_was_checked(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", WSD]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2] == (
        f"checked: the top-level keys against llm-foundry's TrainConfig ({len(TRAIN_KEYS)} keys); model keys "
        "(mpt_causal_lm: MPTConfig); the scheduler block and the LR over the run; callbacks' keys"
    )
    assert out[-1].startswith("OK: warmup_stable_decay")


# The tables against the installed llm-foundry, Composer and transformers: importing them takes seconds
@pytest.mark.slow
def test_the_tables_are_the_installed_stacks() -> None:
    import transformers
    from composer.distributed.mosaic_parallelism import BACKWARD_PREFETCH_MAP, SHARDING_MAP
    from composer.utils.parallelism import FSDPConfig
    from llmfoundry.models.mpt.configuration_mpt import MPTConfig
    from llmfoundry.models.mpt.modeling_mpt import ComposerMPTCausalLM
    from llmfoundry.utils.config_utils import TRAIN_CONFIG_KEYS

    assert set(TRAIN_CONFIG_KEYS) == TRAIN_KEYS
    assert {f.name for f in dataclasses.fields(FSDPConfig) if not f.name.startswith("_")} == FSDP1_KEYS
    assert set(FSDP1_VALUES["sharding_strategy"]) == set(SHARDING_MAP)
    assert set(FSDP1_VALUES["backward_prefetch"]) == set(BACKWARD_PREFETCH_MAP)
    mpt = {p for p in inspect.signature(MPTConfig.__init__).parameters if p not in ("self", "kwargs")}
    composer = {p for p in inspect.signature(ComposerMPTCausalLM.__init__).parameters if p not in ("self", "kwargs")}
    generic = set(transformers.PretrainedConfig().to_dict())
    assert mpt | (composer - {"tokenizer"}) | generic | {"name", "master_weights_dtype"} == MPT_MODEL_KEYS
