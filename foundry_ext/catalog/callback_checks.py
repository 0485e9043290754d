"""The pre-flight check of a train YAML's ``callbacks`` block, and of the saving keys ``checkpoint_guard`` needs."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from typing import Any

from foundry_ext.catalog.callbacks import FIELD as GUARD_FIELD
from foundry_ext.catalog.callbacks import UNCHECKED_SUFFIXES
from foundry_ext.catalog.findings import Findings
from foundry_ext.catalog.registry import CALLBACK_MODELS, FOUNDRY_CALLBACKS, foreign_callback_names
from foundry_ext.config.base import build
from foundry_ext.config.errors import ConfigError, Problem, did_you_mean, unknown_keys

__all__ = ["check_callbacks", "check_checkpoint_guard"]


def check_callbacks(block: Any, scheduler_name: Any, found: Findings) -> None:
    """The ``callbacks`` block: this package's callbacks' keys, llm-foundry's built-ins' key names, unknown names."""
    if block is None:
        return
    if not isinstance(block, Mapping):
        found.errors.append(
            Problem("callbacks", f"expected a mapping of callback name -> settings, got {type(block).__name__}")
        )
        return
    foreign = foreign_callback_names()
    registry = sys.modules.get("llmfoundry.registry")
    registered = (
        set(registry.callbacks.get_all()) | set(registry.callbacks_with_config.get_all()) if registry else set()
    )
    known = sorted(set(CALLBACK_MODELS) | set(FOUNDRY_CALLBACKS) | set(foreign) | registered)
    for name, kwargs in block.items():
        path = f"callbacks.{name}"
        if kwargs is not None and not isinstance(kwargs, Mapping):
            found.errors.append(Problem(path, f"expected a mapping of settings (or {{}}), got {kwargs!r}"))
            continue
        kwargs = dict(kwargs or {})
        if name in CALLBACK_MODELS:
            try:
                build(CALLBACK_MODELS[name], kwargs, path)
            except ConfigError as e:
                found.errors += e.problems
            if name == "reduce_lr_on_plateau" and scheduler_name != "reduce_lr_on_plateau":
                found.errors.append(
                    Problem(
                        path,
                        f"is listed but scheduler.name is {scheduler_name!r}: the callback only serves "
                        "scheduler.name: reduce_lr_on_plateau (which attaches it by itself); remove it or switch the "
                        "scheduler",
                    )
                )
        elif name in FOUNDRY_CALLBACKS and name not in foreign:
            keys = FOUNDRY_CALLBACKS[name]
            if keys is None:
                continue  # takes **kwargs
            required, optional = keys
            allowed = [*required, *optional]
            shown = f"allowed keys: {', '.join(allowed)}" if allowed else "takes no keys"
            found.errors += unknown_keys(kwargs, allowed, path, f"; {shown}")
            for key in required:
                if key not in kwargs:
                    found.errors.append(Problem(f"{path}.{key}", f"is required by llm-foundry's {name} callback"))
        elif name not in known:
            found.errors.append(Problem(path, f"{name!r} is not a registered callback{did_you_mean(str(name), known)}"))


def _name_pattern(name: str) -> re.Pattern[str]:
    """A checkpoint file name template (``ep{epoch}-ba{batch}-rank{rank}.pt``) as a regex of the names it makes."""
    parts = re.split(r"\{[^{}]*\}", name)
    return re.compile(".+".join(re.escape(part) for part in parts))


def check_checkpoint_guard(cfg: Mapping[str, Any], found: Findings) -> None:
    """What ``callbacks.checkpoint_guard`` needs of the run's saving keys, before the model is built.

    The callback itself refuses a compressed ``save_filename`` and a quarantine folder named like a checkpoint only at
    ``BEFORE_LOAD`` (after the model is built) or when a partial checkpoint must be moved; both are known from the
    YAML.
    """
    callbacks = cfg.get("callbacks")
    if not isinstance(callbacks, Mapping) or "checkpoint_guard" not in callbacks:
        return
    guard = callbacks["checkpoint_guard"] or {}
    if not isinstance(guard, Mapping):
        return  # reported by check_callbacks
    if not cfg.get("save_folder"):
        found.warnings.append(
            Problem(
                GUARD_FIELD,
                "the run has no save_folder: it saves no checkpoints and the guard has nothing to guard; set "
                "save_folder, or remove the callback",
            )
        )
        return
    filename = str(cfg.get("save_filename") or "ep{epoch}-ba{batch}-rank{rank}.pt")
    if filename.endswith(UNCHECKED_SUFFIXES):
        found.errors.append(
            Problem(
                "save_filename",
                f"{filename!r} is compressed or a tar archive; {GUARD_FIELD} checks uncompressed torch files (.pt) "
                "and sharded folders only: save uncompressed (e.g. ep{epoch}-ba{batch}-rank{rank}.pt), or remove "
                "the callback",
            )
        )
    quarantine = guard.get("quarantine_folder", "quarantine")
    if not isinstance(quarantine, str) or not quarantine:
        return  # reported by the callback's own keys
    first = quarantine.split("/", 1)[0]
    latest = str(cfg.get("save_latest_filename") or "latest-rank{rank}.pt")
    templates = [t.rpartition("/")[2] for t in (filename, latest)]
    if first.endswith((".pt", *UNCHECKED_SUFFIXES)) or any(_name_pattern(t).fullmatch(first) for t in templates):
        found.errors.append(
            Problem(
                f"{GUARD_FIELD}.quarantine_folder",
                f"{quarantine!r} is named like a checkpoint file ({', '.join(templates)}); the guard would take it "
                "for one: choose another name, e.g. quarantine",
            )
        )
