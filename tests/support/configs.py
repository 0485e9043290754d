"""A small valid train config, the base that the config-check tests change one field of."""

from __future__ import annotations

from typing import Any


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
    for key, value in extra.items():
        if value is None:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    return cfg
