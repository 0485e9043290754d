"""Train configs for tests: a small valid one (the base that the config-check tests change one field of), and the one
writer of a train YAML from a dict."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

__all__ = ["changed", "tiny_train_config", "write_train_yaml"]


def tiny_train_config(*, max_duration: str = "40ba", t_warmup: str = "10ba", **extra: Any) -> dict[str, Any]:
    """A valid train YAML as a dict (MPT, decoupled AdamW, WSD, ``lr_monitor``); ``extra`` sets or, as None, drops keys.

    The datasets' ``local`` folder and the tokenizer do not exist: the checks under test never read them.
    """
    cfg: dict[str, Any] = {
        "max_duration": max_duration,
        "global_train_batch_size": 4,
        "max_seq_len": 64,
        "model": {"name": "mpt_causal_lm", "d_model": 16, "n_heads": 2, "n_layers": 1, "max_seq_len": 64},
        "tokenizer": {"name": "x"},  # llm-foundry requires the key (foundry-ext validate checks it); never loaded
        "train_loader": {"name": "text", "dataset": {"local": "x", "split": "train", "max_seq_len": 64}},
        "optimizer": {"name": "decoupled_adamw", "lr": 1.0e-3},
        "eval_loader": {"name": "text", "dataset": {"local": "x", "split": "val", "max_seq_len": 64}},
        "scheduler": {"name": "warmup_stable_decay", "t_warmup": t_warmup},
        "callbacks": {"lr_monitor": {}},
    }
    return changed(cfg, extra)


def changed(cfg: dict[str, Any], changes: dict[str, Any] | None = None) -> dict[str, Any]:
    """A deep copy of ``cfg`` with each top-level key of ``changes`` set, or dropped where its value is None."""
    out = copy.deepcopy(cfg)
    for key, value in (changes or {}).items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = copy.deepcopy(value)
    return out


def write_train_yaml(path: Path, cfg: dict[str, Any], changes: dict[str, Any] | None = None) -> Path:
    """Write :func:`changed` ``(cfg, changes)`` to ``path`` as YAML, its keys in their order; return ``path``."""
    path.write_text(yaml.safe_dump(changed(cfg, changes), sort_keys=False))
    return path
