"""A JSON Schema (draft-07) of llm-foundry train YAMLs whose ``scheduler`` and ``callbacks`` blocks are typed.

Made from the config models, so it cannot drift from what ``validate`` and training accept: ``scheduler.name`` is one
of the names installed here, and each name's block has exactly that scheduler's keys, with their types, defaults,
ranges and descriptions (``torch_lr_scheduler`` per torch class, ``SequentialLR`` children included). Every other
top-level key of a train YAML is left open. Editors that speak JSON Schema (VS Code's YAML extension, any client of
yaml-language-server) then complete and check scheduler blocks as they are typed.
"""

from __future__ import annotations

import copy
from typing import Any

from foundry_ext.catalog.registry import CALLBACK_MODELS, FOUNDRY_CALLBACKS, SCHEDULE_MODELS, foreign_scheduler_names
from foundry_ext.schedules.torch import CHILD_TYPES, TORCH_MODELS

__all__ = ["SCHEMA_ID", "train_yaml_schema"]

SCHEMA_ID = "https://github.com/foundry-ext/foundry-ext/schemas/train-yaml.json"
_REF = "#/definitions/{model}"


def _model_schema(model: type, definitions: dict[str, Any]) -> dict[str, Any]:
    schema = model.model_json_schema(ref_template=_REF)
    definitions.update(schema.pop("$defs", {}))
    return schema


def _if_then(key: str, value: str, then: dict[str, Any]) -> dict[str, Any]:
    return {"if": {"properties": {key: {"const": value}}, "required": [key]}, "then": then}


def _scheduler_definitions(definitions: dict[str, Any]) -> dict[str, Any]:
    names = sorted(set(SCHEDULE_MODELS) | set(foreign_scheduler_names()))
    branches = []
    for name, model in SCHEDULE_MODELS.items():
        if name == "torch_lr_scheduler":
            then = _torch_block(definitions)
        else:
            then = _model_schema(model, definitions)
            then["properties"] = {"name": {"const": name}, **then.get("properties", {})}
            then.pop("title", None)
            if name == "reduce_lr_on_plateau":
                then["properties"]["base"] = {
                    "description": "another schedule multiplied in: a scheduler block {name: ..., ...}",
                    "anyOf": [{"$ref": "#/definitions/scheduler"}, {"type": "null"}],
                }
        then["description"] = f"{name}: {model.summary}"
        definitions[f"scheduler.{name}"] = then
        branches.append(_if_then("name", name, {"$ref": f"#/definitions/scheduler.{name}"}))
    return {
        "type": "object",
        "description": "the LR schedule: a scheduler name and its keys (`foundry-ext schedulers` lists them)",
        "required": ["name"],
        "properties": {"name": {"enum": names, "description": "the registered scheduler name"}},
        "allOf": branches,
    }


def _torch_block(definitions: dict[str, Any]) -> dict[str, Any]:
    """``torch_lr_scheduler``: ``type`` picks the torch class, whose arguments are the other keys."""
    branches = []
    for name, model in TORCH_MODELS.items():
        schema = _model_schema(model, definitions)
        schema["properties"] = {"name": {"const": "torch_lr_scheduler"}, **schema["properties"]}
        schema.pop("title", None)
        definitions[f"torch.{name}"] = schema
        branches.append(_if_then("type", name, {"$ref": f"#/definitions/torch.{name}"}))
    return {
        "type": "object",
        "required": ["name", "type"],
        "properties": {
            "name": {"const": "torch_lr_scheduler"},
            "type": {"enum": sorted(TORCH_MODELS), "description": "the torch.optim.lr_scheduler class"},
        },
        "allOf": branches,
    }


def _callback_definitions(definitions: dict[str, Any]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for name, model in CALLBACK_MODELS.items():
        schema = _model_schema(model, definitions)
        schema.pop("title", None)
        schema["type"] = ["object", "null"]
        properties[name] = schema
    for name, keys in FOUNDRY_CALLBACKS.items():
        if keys is None:
            properties[name] = {"type": ["object", "null"], "description": f"llm-foundry's {name} callback"}
            continue
        required, optional = keys
        properties[name] = {
            "type": ["object", "null"],
            "description": f"llm-foundry's {name} callback",
            "properties": {key: {} for key in (*required, *optional)},
            "required": list(required),
            "additionalProperties": False,
        }
    return {
        "type": "object",
        "description": "callback name -> its keys (other plugins' callbacks are not checked)",
        "properties": properties,
        "additionalProperties": True,
    }


def train_yaml_schema() -> dict[str, Any]:
    """The JSON Schema (draft-07) of a train YAML: ``scheduler`` and ``callbacks`` typed, everything else open."""
    definitions: dict[str, Any] = {}
    definitions["scheduler"] = _scheduler_definitions(definitions)
    callbacks = _callback_definitions(definitions)
    # the top-level key (moved under callbacks by its config transform): the callback's keys
    definitions["batch_size_schedule"] = callbacks["properties"]["batch_size_schedule"]
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$id": SCHEMA_ID,
        "title": "llm-foundry train YAML (scheduler and callbacks typed by foundry-ext)",
        "type": "object",
        "properties": {
            "scheduler": {"$ref": "#/definitions/scheduler"},
            "callbacks": callbacks,
            "batch_size_schedule": {"$ref": "#/definitions/batch_size_schedule"},
            "max_duration": {
                "description": "the run length: a Composer duration (100ba, 2ep, 2e9tok, 1000sp) or an int (epochs)",
                "anyOf": [{"type": "string"}, {"type": "integer", "minimum": 1}],
            },
        },
        "additionalProperties": True,
        "definitions": definitions,
    }
    return copy.deepcopy(schema)


def child_types() -> tuple[str, ...]:
    """The torch classes allowed inside SequentialLR / ChainedScheduler (for docs)."""
    return CHILD_TYPES
