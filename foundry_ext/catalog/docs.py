"""The key tables of ``docs/*.md``, generated from the config models so that they cannot drift.

A table lives between ``<!-- keys: NAME -->`` and ``<!-- /keys -->`` (NAME a ``scheduler.name``, ``torch:Class``
for a torch class's arguments, ``callback:NAME``, or ``NAME.key`` for the keys of a nested block, e.g.
``stages.override_decay``). ``tests/docs/test_docs.py`` fails when a table differs from what
the model says; ``python -m foundry_ext.catalog.docs docs/*.md`` rewrites them.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from foundry_ext.catalog.registry import CALLBACK_MODELS, SCHEDULE_MODELS
from foundry_ext.config.durations import EXAMPLES
from foundry_ext.config.problems import _item, _model_in
from foundry_ext.schedules.base import describe_keys
from foundry_ext.schedules.torch import TORCH_MODELS

__all__ = ["BLOCK", "keys_table", "render", "stale_tables"]

BLOCK = re.compile(r"(<!-- keys: (?P<name>[\w:.]+) -->\n)(?P<body>.*?)(<!-- /keys -->)", re.DOTALL)


def _model(name: str) -> type:
    if name.startswith("torch:"):
        return TORCH_MODELS[name.removeprefix("torch:")]
    if name.startswith("callback:"):
        callback, _, key = name.removeprefix("callback:").partition(".")
        if key:  # a nested block of a callback, e.g. callback:spike_guard.rollback
            return _model_in(_item(CALLBACK_MODELS[callback].model_fields[key].annotation))
        return CALLBACK_MODELS[callback]
    if "." in name:  # a nested block: the model of a field (a list of blocks or an optional block)
        owner, key = name.split(".", 1)
        return _model_in(_item(SCHEDULE_MODELS[owner].model_fields[key].annotation))
    return SCHEDULE_MODELS[name]


def keys_table(name: str) -> str:
    """The markdown table of a model's keys: key, default, allowed, meaning."""
    rows = ["| key | default | allowed | meaning |", "|---|---|---|---|"]
    for row in describe_keys(_model(name)):
        if row["key"] == "type" and name.startswith("torch:"):
            continue
        default = "required" if row["required"] else f"`{_show(row['default'])}`"
        allowed = row["allowed"].replace(f", e.g. {EXAMPLES}", "").replace("|", "\\|")
        rows.append(f"| `{row['key']}` | {default} | {allowed} | {row['description']} |")
    if len(rows) == 2:
        rows.append("| (none) | | | |")
    return "\n".join(rows) + "\n"


def _show(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def render(text: str) -> str:
    """``text`` with every key table regenerated."""
    return BLOCK.sub(lambda m: m.group(1) + keys_table(m.group("name")) + m.group(4), text)


def stale_tables(text: str) -> list[str]:
    """The names whose table in ``text`` differs from the model."""
    return [m.group("name") for m in BLOCK.finditer(text) if m.group("body") != keys_table(m.group("name"))]


if __name__ == "__main__":  # python -m foundry_ext.catalog.docs docs/schedulers.md ...
    for arg in sys.argv[1:]:
        path = Path(arg)
        path.write_text(render(path.read_text()))
        print(f"regenerated the key tables of {path}")
