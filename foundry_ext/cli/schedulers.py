"""``foundry-ext schedulers [NAME ...]``: every ``scheduler.name`` a train YAML can use here, and its keys.

The listing comes from the typed config models (this package's schedulers and llm-foundry's built-ins) and from
entry-point metadata (other installed plugins): no torch, Composer or llm-foundry import. With names, each key is
shown with its type, default, range and description.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the optional ``NAME`` filters."""
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="show these schedulers' (or this package's callbacks') keys in full (default: list the schedulers)",
    )


def run(args: argparse.Namespace) -> int:
    """Print one block per scheduler name."""
    from foundry_ext.catalog.registry import CALLBACK_MODELS, SCHEDULE_MODELS, foreign_scheduler_names
    from foundry_ext.cli import UsageError
    from foundry_ext.config.errors import not_a_scheduler

    foreign = foreign_scheduler_names()
    names = sorted(set(SCHEDULE_MODELS) | set(foreign))
    callbacks = sorted(set(CALLBACK_MODELS) - set(names))  # reduce_lr_on_plateau is both: its scheduler has the keys
    for name in args.names:
        if name not in names and name not in callbacks:
            raise UsageError(not_a_scheduler(name, names, callbacks=callbacks))
    chosen = args.names or names
    n = len([c for c in chosen if c not in callbacks])
    what = [f"{n} scheduler{'s' if n != 1 else ''} (scheduler.name in a train YAML)"] if n else []
    if len(chosen) > n:
        what.append(f"{len(chosen) - n} callback{'s' if len(chosen) - n != 1 else ''} (callbacks.NAME)")
    print(f"{' and '.join(what)}:")
    for name in chosen:
        print()
        if name in callbacks:
            _callback(name, CALLBACK_MODELS[name])
            continue
        if name in foreign:
            print(f"{name}\n  registered by: {foreign[name]} (entry point); its keys are that package's")
            continue
        model = SCHEDULE_MODELS[name]
        origin = "foundry-ext (entry point)" if model.provider == "foundry-ext" else "llm-foundry (built in)"
        print(name)
        print(f"  what:          {model.summary}")
        print(f"  registered by: {origin}; runs {model.adapter.replace(':', '.')}")
        if args.names:
            _keys_table(model)
        else:
            print(f"  keys:          {_keys_line(model)}")
    return 0


def _callback(name: str, model: Any) -> None:
    """A callback of this package: the first line of its keys' docstring, then each key as for a scheduler."""
    print(name)
    summary = (model.__doc__ or "").strip().splitlines()[0] if model.__doc__ else ""
    print(f"  what:          {summary}")
    print("  registered by: foundry-ext (entry point, llmfoundry_callbacks); callbacks.NAME in a train YAML")
    _keys_table(model)


def _keys_line(model: Any) -> str:
    from foundry_ext.schedules.base import describe_keys

    if model.has_formula and model.kind == "torch":
        from foundry_ext.schedules.torch import TORCH_MODELS

        return f"type ({', '.join(sorted(TORCH_MODELS))}) + that torch class's arguments"
    parts = []
    for row in describe_keys(model):
        parts.append(row["key"] if row["required"] else f"{row['key']}={row['default']!r}")
    return ", ".join(parts) or "(none)"


def _keys_table(model: Any) -> None:
    from foundry_ext.config.durations import EXAMPLES
    from foundry_ext.schedules.base import describe_keys

    models = [model]
    if getattr(model, "has_formula", False) and model.kind == "torch":  # a callback's keys have no formula
        from foundry_ext.schedules.torch import TORCH_MODELS

        print("  type:          the torch class; each takes the keys listed under it")
        models = list(TORCH_MODELS.values())
    for m in models:
        if m is not model:
            print(f"  {m.__name__}:")
        for row in describe_keys(m):
            if row["key"] == "type":
                continue
            default = "required" if row["required"] else f"default {row['default']!r}"
            allowed = row["allowed"].replace(f", e.g. {EXAMPLES}", "")
            what = "; ".join(x for x in (default, allowed) if x)
            print(f"    {row['key']:<16} {what}" + (f": {row['description']}" if row["description"] else ""))
