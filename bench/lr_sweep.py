"""A constant-LR sweep whose runs share everything but the LR: one model build, one data order, one loop.

Ground truth for ``bench/bench_lr_find.py``. Each LR trains its own copy of one initial model (llm-foundry's
``build_composer_model`` of the config's ``model`` block, seeded with ``seed``), with the optimizer
llm-foundry's ``build_optimizer`` makes from the config's ``optimizer`` block at that LR, Composer's
``apply_gradient_clipping`` when the config's ``algorithms`` set it, and the model's own loss, on the same batches
in the same order: the train split shuffled with ``seed``, ``global_train_batch_size`` rows per batch, each row cut
to ``max_seq_len`` tokens, labels = inputs (what llm-foundry's ``text`` loader gives for unpadded rows). Only the
Composer ``Trainer`` around it is left out: building one per run costs seconds, and its events cost more than the
tiny models' arithmetic. ``tests/lr_find/test_lr_find_corpora.py`` checks that this loop reproduces a real
``Trainer`` run batch for batch (same initial weights, same batches).

The score of a run is the eval cross-entropy over the whole val split after the last batch (Composer's
``LanguageCrossEntropy``: the summed token cross-entropy over the number of predicted tokens); ``nan`` once the
train loss is not finite.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch


@dataclass
class SweepRun:
    lr: float
    model: Any
    optimizer: Any
    losses: list[float] = field(default_factory=list)
    diverged: bool = False


def read_split(data: str | Path, split: str, seq_len: int) -> np.ndarray:
    """The rows of an MDS split written by ``write_demo_data``, cut to ``seq_len`` tokens: ``[rows, seq_len]``."""
    from streaming import LocalDataset

    dataset = LocalDataset(local=str(Path(data) / split))
    rows = [np.asarray(dataset[i]["tokens"][:seq_len], dtype=np.int64) for i in range(len(dataset))]
    return np.stack(rows)


def build_model(cfg: Mapping[str, Any], seed: int) -> Any:
    """The config's model, initialised after ``seed_all(seed)`` on CPU."""
    from composer.utils import reproducibility
    from llmfoundry.utils.builders import build_composer_model, build_tokenizer

    tokenizer = build_tokenizer(cfg["tokenizer"]["name"], dict(cfg["tokenizer"].get("kwargs") or {}))
    model_cfg = dict(cfg["model"])
    name = model_cfg.pop("name")
    reproducibility.seed_all(seed)
    return build_composer_model(name=name, cfg=model_cfg, tokenizer=tokenizer)


def _batch(rows: np.ndarray) -> dict[str, torch.Tensor]:
    ids = torch.from_numpy(rows)
    return {"input_ids": ids, "labels": ids.clone()}  # the keys (and values) of llm-foundry's text collator here


def train_step(run: SweepRun, batch: Mapping[str, torch.Tensor], clipping: Mapping[str, Any] | None) -> float:
    """One optimizer step of ``run`` on ``batch``, as Composer's Trainer takes it with one microbatch."""
    from composer.algorithms.gradient_clipping.gradient_clipping import apply_gradient_clipping

    run.model.train()
    run.optimizer.zero_grad(set_to_none=True)
    loss = run.model.loss(run.model(batch), batch)
    loss.backward()
    if clipping:
        apply_gradient_clipping(
            run.model, clipping["clipping_type"], float(clipping["clipping_threshold"]), fsdp_enabled=False
        )
    run.optimizer.step()
    return float(loss.item())


@torch.no_grad()
def eval_ce(model: Any, rows: np.ndarray, batch_size: int = 64) -> float:
    """Composer's ``LanguageCrossEntropy`` over ``rows``: summed next-token cross-entropy / predicted tokens."""
    from llmfoundry.models.mpt.modeling_mpt import get_targets

    model.eval()
    total, count = 0.0, 0
    for start in range(0, len(rows), batch_size):
        batch = _batch(rows[start : start + batch_size])
        logits = model(batch).logits
        targets = get_targets(batch["labels"])
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-100, reduction="sum"
        )
        total += float(loss)
        count += int((targets != -100).sum())
    return total / count


def order(n_rows: int, batch_size: int, batches: int, seed: int) -> list[np.ndarray]:
    """Row indices of each batch: epochs of a permutation seeded with ``seed`` (a new one per epoch)."""
    rng = np.random.default_rng(seed)
    out: list[np.ndarray] = []
    perm = rng.permutation(n_rows)
    pos = 0
    while len(out) < batches:
        if pos + batch_size > n_rows:
            perm, pos = rng.permutation(n_rows), 0
        out.append(perm[pos : pos + batch_size])
        pos += batch_size
    return out


def sweep(cfg: Mapping[str, Any], lrs: Sequence[float], batches: int, seed: int) -> dict[float, float]:
    """Train a copy of one initial model per LR for ``batches`` batches; each LR's final eval cross-entropy.

    Args:
        cfg: a resolved train config (plain dicts): ``model``, ``tokenizer``, ``optimizer``, ``algorithms``,
            ``global_train_batch_size``, ``max_seq_len`` and ``variables.data_local`` are read.
        lrs: the constant LRs.
        batches: batches per run.
        seed: model initialisation and data order.
    """
    from llmfoundry.utils.builders import build_optimizer

    data = cfg["variables"]["data_local"]
    seq_len = int(cfg["max_seq_len"])
    train_rows = read_split(data, "train", seq_len)
    val_rows = read_split(data, "val", seq_len)
    batch_size = int(cfg["global_train_batch_size"])
    clipping = (cfg.get("algorithms") or {}).get("gradient_clipping")
    base = build_model(cfg, seed)
    runs = []
    for lr in lrs:
        model = copy.deepcopy(base)
        opt_cfg = dict(cfg["optimizer"])
        name = opt_cfg.pop("name")
        opt_cfg["lr"] = lr
        runs.append(SweepRun(lr, model, build_optimizer(model, name, opt_cfg)))
    for idx in order(len(train_rows), batch_size, batches, seed):
        batch = _batch(train_rows[idx])
        for run in runs:
            if run.diverged:
                continue
            loss = train_step(run, batch, clipping)
            run.losses.append(loss)
            run.diverged = not math.isfinite(loss)
    return {run.lr: math.nan if run.diverged else eval_ce(run.model, val_rows) for run in runs}


def range_test(
    cfg: Mapping[str, Any],
    seed: int,
    lr_min: float | None = None,
    lr_max: float | None = None,
    batches: int = 100,
    data: Sequence[Mapping[str, torch.Tensor]] | None = None,
) -> dict[str, Any]:
    """The range test of ``foundry-ext lr-find`` in this loop: the ramp, the recording and the divergence stop.

    Batch ``b`` trains at :func:`foundry_ext.lr_find.ramp_lr` (the LR the tool's ramp gives it under Composer's
    timing), and the run stops as :class:`~foundry_ext.lr_find.LRFindRecorder` stops it (the smoothed loss, at the
    tool's default beta, not finite or above 4x its minimum so far). The initial model and the data order come from
    ``seed``, as ``variables.global_seed`` sets both for the tool; the order is this loop's, not the ``text``
    loader's (``tests/lr_find/test_lr_find_corpora.py`` checks that on the loader's batches this gives the tool's
    curve bit for bit). ``data``: the batches to train on instead (that check's).
    """
    from llmfoundry.utils.builders import build_optimizer

    from foundry_ext.lr_find.ramp import ramp_for_batches, ramp_lr
    from foundry_ext.lr_find.rules import DEFAULT_BETA, DEFAULT_LR_MAX, DEFAULT_LR_MIN, DIVERGENCE_FACTOR

    lr_min = DEFAULT_LR_MIN if lr_min is None else lr_min  # the tool's ramp unless told otherwise
    lr_max = DEFAULT_LR_MAX if lr_max is None else lr_max

    start = time.perf_counter()
    if data is None:
        rows = read_split(cfg["variables"]["data_local"], "train", int(cfg["max_seq_len"]))
        data = [_batch(rows[idx]) for idx in order(len(rows), int(cfg["global_train_batch_size"]), batches, seed)]
    model = build_model(cfg, seed)
    opt_cfg = dict(cfg["optimizer"])
    name = opt_cfg.pop("name")
    opt_cfg["lr"] = lr_max
    run = SweepRun(lr_max, model, build_optimizer(model, name, opt_cfg))
    ramp = ramp_for_batches(lr_min, lr_max, batches)
    clipping = (cfg.get("algorithms") or {}).get("gradient_clipping")
    lrs: list[float] = []
    avg, low, stopped = 0.0, math.inf, False
    for b, batch in enumerate(data[:batches]):
        lr = ramp_lr(lr_max, ramp.alpha_i, ramp.t_max, b)
        for group in run.optimizer.param_groups:
            group["lr"] = lr
        lrs.append(lr)
        loss = train_step(run, batch, clipping)
        run.losses.append(loss)
        avg = DEFAULT_BETA * avg + (1.0 - DEFAULT_BETA) * loss
        smoothed = avg / (1.0 - DEFAULT_BETA ** (b + 1))
        low = min(low, smoothed)
        if not math.isfinite(smoothed) or smoothed > DIVERGENCE_FACTOR * low:
            stopped = True
            break
    return {
        "lrs": lrs,
        "losses": run.losses,
        "batches_run": len(lrs),
        "stopped_early": stopped,
        "seconds": time.perf_counter() - start,
    }
