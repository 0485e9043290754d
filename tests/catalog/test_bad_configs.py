"""The bad-config corpus (:mod:`tests.catalog.corpus`, one table) through each surface that must stop it, and the
valid configs through ``validate``.

* ``foundry-ext validate --strict``: exit 2, a line ``<file>: <field>: ...`` (``warning: <field>: ...`` for a
  warning) holding the row's fragment, and no Python error text; every row of one rank;
* llm-foundry's own ``train_from_yaml`` (the real training entry point, in this process): our pre-flight config
  transform refuses each error row with a ``ConfigError`` naming the same field, before llm-foundry builds the
  tokenizer, the model or the data;
* the same transform logs each warning row's line (the run then trains as configured);
* FSDP2 on two ranks (``FSDP_VERSION=2``): ``validate --world-size 2`` and ``train_from_yaml`` with ``WORLD_SIZE=2``;
* valid configs (Composer's, torch's and llm-foundry's own test constructions, every minimal scheduler block, every
  example YAML) give exit 0.
"""

from __future__ import annotations

import copy
import logging
import re
import traceback
from pathlib import Path

import pytest

from foundry_ext.cli import main
from foundry_ext.config.errors import ConfigError
from tests.catalog.corpus import (
    BAD,
    FAMILY_BAD,
    FAMILY_GOOD,
    GOOD,
    HAND_BAD,
    MINIMAL,
    S,
    hand_config,
)
from tests.support.configs import write_train_yaml
from tests.support.launcher import REPO

# Python's own words in a line meant for a user (the three corpora's checks, joined)
PYTHON_TEXT = re.compile(
    r"Traceback|\b(Type|Value|Key|Attribute|Index|ZeroDivision|Overflow|Recursion|Memory|Runtime|Assertion)Error\b"
    r"|ZeroDivisionError|OverflowError|TypeError|ValueError|\blist\[|expected\s+or\b"
)
PREFIX = {"error": "", "warning": "warning: ", "problem": "(warning: )?"}  # before the field, by the row's kind


def test_the_corpus_is_large_and_covers_every_family() -> None:
    assert len(HAND_BAD) >= 100
    blocks = [changes.get("scheduler", {}) for changes, _, _ in HAND_BAD.values()]
    names = {b.get("name") for b in blocks if isinstance(b, dict)}
    assert {"warmup_stable_decay", "step", "torch_lr_scheduler", "reduce_lr_on_plateau", "cosine_with_warmup"} <= names
    assert len(FAMILY_BAD) >= 150 and len(FAMILY_GOOD) >= 30, (len(FAMILY_BAD), len(FAMILY_GOOD))
    named = {changes["scheduler"]["name"] for changes, _ in FAMILY_BAD.values() if "scheduler" in changes}
    assert named == set(MINIMAL)
    assert sum(field.startswith("callbacks") for _, field in FAMILY_BAD.values()) >= 20
    assert sum(field.startswith("optimizer") for _, field in FAMILY_BAD.values()) >= 8


@pytest.mark.parametrize("case", [c for c, bad in BAD.items() if bad.ranks == 1])
def test_validate_names_the_field(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = BAD[case]
    config = write_train_yaml(tmp_path / "cfg.yaml", bad.config)
    rc = main(["validate", str(config), "--strict"])  # a warning names its field too
    out, err = capsys.readouterr()
    assert rc == 2, out + err
    lines = [line.removeprefix(f"{config}: ") for line in err.splitlines()]
    pattern = rf"{PREFIX[bad.kind]}{re.escape(bad.field)}(: |$)"  # a line that is only the field: nothing to add
    named = [line for line in lines if re.match(pattern, line)]
    assert named, f"no line names {bad.field}:\n{err}"
    assert any(bad.fragment in line for line in named), f"{bad.fragment!r} not in:\n{err}"
    assert not PYTHON_TEXT.search(err), err


@pytest.mark.parametrize("case", [c for c, bad in BAD.items() if bad.kind == "error" and bad.ranks == 1])
def test_llm_foundry_training_refuses_it_before_building_anything(case: str, tmp_path: Path) -> None:
    """llm-foundry's own ``train_from_yaml``: our config transform raises before tokenizer, model or data exist."""
    from llmfoundry.command_utils import train_from_yaml

    bad = BAD[case]
    config = write_train_yaml(tmp_path / "cfg.yaml", bad.config)
    with pytest.raises(ConfigError) as raised:
        train_from_yaml(str(config), [])
    frames = [frame.f_code.co_name for frame, _ in traceback.walk_tb(raised.value.__traceback__)]
    assert "preflight_transform" in frames  # not the scheduler's own build: nothing was built before it
    assert "build_tokenizer" not in frames and "build_composer_model" not in frames
    lines = str(raised.value).splitlines()
    assert any(line.startswith(f"{bad.field}: ") and bad.fragment in line for line in lines), str(raised.value)


@pytest.mark.parametrize("case", [c for c, bad in BAD.items() if bad.kind == "warning"])
def test_training_warns_before_batch_0(case: str, caplog: pytest.LogCaptureFixture) -> None:
    """The pre-flight transform llm-foundry runs first logs the warning line (the run then trains as configured)."""
    from foundry_ext.catalog.preflight import preflight_transform
    from foundry_ext.config import notices

    bad = BAD[case]
    cfg = copy.deepcopy(bad.config)
    notices._seen.clear()
    with caplog.at_level(logging.WARNING, logger="foundry_ext"):
        assert preflight_transform(cfg) is cfg
    messages = [r.getMessage() for r in caplog.records]
    assert any(f"warning: {bad.field}: " in m and bad.fragment in m for m in messages), messages


@pytest.mark.parametrize("case", [c for c, bad in BAD.items() if bad.ranks == 2])
def test_fsdp2_on_two_ranks_names_the_field(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``foundry-ext validate --world-size 2`` under FSDP_VERSION=2, then llm-foundry's train_from_yaml on 2 ranks."""
    from llmfoundry.command_utils import train_from_yaml

    bad = BAD[case]
    config = write_train_yaml(tmp_path / "cfg.yaml", bad.config)
    monkeypatch.setenv("FSDP_VERSION", "2")
    assert main(["validate", str(config), "--world-size", "2"]) == 2
    err = capsys.readouterr().err
    named = [line.removeprefix(f"{config}: ") for line in err.splitlines()]
    assert any(line.startswith(f"{bad.field}: ") and bad.fragment in line for line in named), err
    assert main(["validate", str(config), "--world-size", "2"]) == 2  # twice: nothing was moved or changed
    capsys.readouterr()
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ConfigError) as raised:
        train_from_yaml(str(config), [])
    frames = [frame.f_code.co_name for frame, _ in traceback.walk_tb(raised.value.__traceback__)]
    assert "preflight_transform" in frames and "build_composer_model" not in frames
    assert any(line.startswith(f"{bad.field}: ") and bad.fragment in line for line in str(raised.value).splitlines())


@pytest.mark.parametrize("case", list(GOOD))
def test_valid_configs_pass(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["validate", str(write_train_yaml(tmp_path / "cfg.yaml", GOOD[case]))])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert out.splitlines()[-1].startswith("OK: ")


@pytest.mark.parametrize("path", sorted((REPO / "yamls").glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_yaml_passes(
    path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)  # the tiny examples read ./demo-data's index for the batches per epoch
    assert main(["validate", str(path)]) == 0, capsys.readouterr().err


def test_epochs_without_a_known_dataset_size_are_a_note_not_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_train_yaml(
        tmp_path / "cfg.yaml", hand_config({"max_duration": "2ep", **S(name="exponential", gamma=0.99)})
    )
    text = config.read_text().replace(str(REPO / "demo-data"), str(tmp_path / "nowhere"))
    config.write_text(text)
    assert main(["validate", str(config)]) == 0
    out = capsys.readouterr().out
    assert "note: scheduler: durations in 'ep'" in out and "--batches-per-epoch" in out
    assert main(["validate", str(config), "--batches-per-epoch", "10"]) == 0


def test_all_problems_of_a_file_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    changes = {
        **S(name="warmup_stable_decay", decay_tpye="sqrt", alpha_f=1.5, t_warmup="2.5ba"),
        "callbacks": {"lr_monitr": {}, "reduce_lr_on_plateau": {}},
    }
    config = write_train_yaml(tmp_path / "cfg.yaml", hand_config(changes))
    assert main(["validate", str(config)]) == 2
    out, err = capsys.readouterr()
    fields = sorted(line.split(": ")[1] for line in err.splitlines())
    assert fields == [
        "callbacks.lr_monitr",
        "callbacks.reduce_lr_on_plateau",
        "scheduler.alpha_f",
        "scheduler.decay_tpye",
        "scheduler.t_warmup",
    ]
    assert "FAILED: 5 problems" in out


def test_a_bad_key_does_not_hide_a_problem_of_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """alpha_f and a typo are invalid; the valid durations still overlap in a 30-batch run: three lines."""
    changes = {
        "max_duration": "30ba",
        **S(name="warmup_stable_decay", t_warmup="20ba", t_decay="0.5dur", alpha_f=1.5, decay_tpye="sqrt"),
    }
    config = write_train_yaml(tmp_path / "cfg.yaml", hand_config(changes))
    assert main(["validate", str(config)]) == 2
    err = capsys.readouterr().err
    assert sorted(line.split(": ")[1] for line in err.splitlines()) == [
        "scheduler.alpha_f",
        "scheduler.decay_tpye",
        "scheduler.t_decay",
    ]
    assert "(= 20 + 15 > 30 ba)" in err
