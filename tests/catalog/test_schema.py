"""``foundry-ext schema``: a JSON Schema (draft-07) that accepts every example YAML and catches a typo'd block."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from omegaconf import OmegaConf

from foundry_ext.catalog.registry import SCHEDULE_MODELS
from foundry_ext.catalog.schema import train_yaml_schema
from foundry_ext.cli import main
from tests.support.launcher import REPO


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft7Validator:
    schema = train_yaml_schema()
    jsonschema.Draft7Validator.check_schema(schema)  # the schema itself is valid draft-07
    return jsonschema.Draft7Validator(schema)


def load(path: Path) -> dict[str, Any]:
    """The YAML as an editor sees it: the file's own values, ``${...}`` interpolations resolved."""
    return OmegaConf.to_container(OmegaConf.load(path), resolve=True)  # type: ignore[return-value]


def errors(validator: jsonschema.Draft7Validator, doc: dict[str, Any]) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


@pytest.mark.parametrize("path", sorted((REPO / "yamls").glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_yaml_is_valid(path: Path, validator: jsonschema.Draft7Validator) -> None:
    assert errors(validator, load(path)) == []


@pytest.mark.parametrize(
    ("block", "where"),
    [
        pytest.param({"name": "warmup_stable_decay", "decay_tpye": "sqrt"}, "scheduler", id="key-typo"),
        pytest.param({"name": "warmup_stable_decay", "alpha_f": 1.5}, "scheduler.alpha_f", id="range"),
        pytest.param({"name": "warmup_stable_decay", "decay_type": "sqr"}, "scheduler.decay_type", id="choice"),
        pytest.param({"name": "warmup_stable_decay", "t_warmup": "10 bananas"}, "scheduler.t_warmup", id="duration"),
        pytest.param({"name": "warmup_stabel_decay"}, "scheduler.name", id="name-typo"),
        pytest.param(
            {"name": "torch_lr_scheduler", "type": "StepLR", "step_size": 0}, "scheduler.step_size", id="torch"
        ),
        pytest.param(
            {
                "name": "torch_lr_scheduler",
                "type": "SequentialLR",
                "milestones": [5],
                "schedulers": [{"type": "LinearLR"}, {"type": "CosineAnnealingLR", "T_mx": 5}],
            },
            "scheduler.schedulers.1",
            id="torch-nested",
        ),
        pytest.param({"name": "reduce_lr_on_plateau", "patiance": 2}, "scheduler", id="plateau-typo"),
        pytest.param(
            {"name": "reduce_lr_on_plateau", "base": {"name": "warmup_stable_decay", "t_dcay": "1ba"}},
            "scheduler.base",
            id="plateau-base",
        ),
    ],
)
def test_a_bad_block_fails(block: dict[str, Any], where: str, validator: jsonschema.Draft7Validator) -> None:
    doc = {**load(REPO / "yamls" / "tiny-wsd.yaml"), "scheduler": block}
    found = errors(validator, doc)
    assert any(line.startswith(where) for line in found), found


def test_callbacks_are_typed_but_open(validator: jsonschema.Draft7Validator) -> None:
    doc = load(REPO / "yamls" / "tiny-wsd.yaml")
    assert errors(validator, {**doc, "callbacks": {"lr_monitor": {}, "some_plugin_callback": {"x": 1}}}) == []
    assert errors(validator, {**doc, "callbacks": {"lr_monitor": {"foo": 1}}})
    assert errors(validator, {**doc, "callbacks": {"reduce_lr_on_plateau": {"factor": 0.5}}})


def test_every_name_and_its_keys_are_in_the_schema() -> None:
    schema = train_yaml_schema()
    assert set(SCHEDULE_MODELS) <= set(schema["definitions"]["scheduler"]["properties"]["name"]["enum"])
    wsd = schema["definitions"]["scheduler.warmup_stable_decay"]["properties"]
    assert wsd["alpha_f"] == {
        "default": 0.0, "description": "final multiplier: the LR floor as a fraction of the LR",
        "maximum": 1.0, "minimum": 0.0, "title": "Alpha F", "type": "number",
    }  # fmt: skip
    assert wsd["decay_type"]["enum"] == ["linear", "sqrt", "cosine", "square"]


def test_cli_writes_the_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "train.schema.json"
    assert main(["schema", "--out", str(out)]) == 0
    assert json.loads(out.read_text()) == train_yaml_schema()
    assert f"# yaml-language-server: $schema={out}" in capsys.readouterr().out
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out)["$schema"] == "http://json-schema.org/draft-07/schema#"
