"""Spike guard: injected bad batches with and without the guard, against a clean run; OLMo-core's rule replayed.

A tiny causal transformer (1 layer, d_model 32, 4 heads; 26k parameters) trained in a real Composer ``Trainer`` on the
demo corpus (512-token BPE, 64-token windows, batches of 16, DecoupledAdamW at 3e-3, 20 batches of warmup), for
``--batches`` batches and ``--seeds`` seeds. Three runs per seed on the same data order:

* ``clean``: no bad batches, with the guard (its false skips are counted; the guard changes nothing when it skips
  nothing, so its eval loss is the clean run's);
* ``bad``: bursts of ``--burst`` batches of uniform random tokens at ``--at`` (fractions of the run), no guard;
* ``guarded``: the same bad batches, with ``spike_guard`` (defaults: threshold 6, window 128, min_history 64).

Printed: each run's final eval loss (256 validation windows), the guard's skips, the seed noise (the clean runs'
standard deviation), the damage, the time per batch with and without the guard, and the skip decisions of this
package's rule and of OLMo-core's ``SkipStepOptimizer`` rule (loss only) replayed on the ``bad`` runs' loss sequences.

    .venv/bin/python bench/bench_spike_guard.py            # the recorded run (docs/benchmarks.md)
    .venv/bin/python bench/bench_spike_guard.py --batches 120 --seeds 1 --at 0.7   # the suite's smoke copy
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch
from composer import Trainer
from composer.core import Callback, State
from composer.loggers import Logger
from composer.models import ComposerModel
from composer.optim import DecoupledAdamW, LinearWithWarmupScheduler
from torch.utils.data import DataLoader, TensorDataset

from foundry_ext.trainer.spike_guard.callback import SpikeGuard
from foundry_ext.trainer.spike_guard.inject import InjectBadBatches
from foundry_ext.trainer.spike_guard.rule import SpikeRule, olmo_core_rule

ROOT = Path(__file__).resolve().parent.parent
VOCAB, SEQ, BATCH = 512, 64, 16


class TinyLM(ComposerModel):
    def __init__(self, d: int = 32) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, d)
        self.pos = torch.nn.Parameter(torch.zeros(SEQ, d))
        self.block = torch.nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.0, batch_first=True)
        self.head = torch.nn.Linear(d, VOCAB)
        self.register_buffer("mask", torch.nn.Transformer.generate_square_subsequent_mask(SEQ - 1), persistent=False)

    def forward(self, batch: Any) -> torch.Tensor:
        ids = batch["input_ids"][:, :-1]
        h = self.emb(ids) + self.pos[: ids.shape[1]]
        return self.head(self.block(h, src_mask=self.mask, is_causal=True))

    def loss(self, outputs: torch.Tensor, batch: Any) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(outputs.reshape(-1, VOCAB), batch["labels"][:, 1:].reshape(-1))


class Windows(TensorDataset):
    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:  # type: ignore[override]
        row = self.tensors[0][i]
        return {"input_ids": row, "labels": row}


def _windows(split: str) -> torch.Tensor:
    from streaming import LocalDataset

    ds = LocalDataset(local=str(ROOT / "demo-data" / split))
    rows = [torch.from_numpy(ds[i]["tokens"].astype("int64")) for i in range(len(ds))]
    return torch.stack(rows)[:, :SEQ]


class LossLog(Callback):
    def __init__(self) -> None:
        self.losses: list[float] = []
        self.seconds: list[float] = []
        self._t = 0.0

    def batch_start(self, state: State, logger: Logger) -> None:
        del state, logger
        self._t = time.perf_counter()

    def batch_end(self, state: State, logger: Logger) -> None:
        del logger
        self.seconds.append(time.perf_counter() - self._t)
        self.losses.append(float(state.total_loss_dict["loss/train/total"]))


def eval_loss(model: TinyLM, val: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        batch = {"input_ids": val, "labels": val}
        return float(model.loss(model(batch), batch))


def run(seed: int, batches: int, bad: list[int], guard: bool, train: torch.Tensor, val: torch.Tensor) -> dict:
    torch.manual_seed(seed)
    model = TinyLM()
    g = torch.Generator().manual_seed(seed)
    order = train[torch.randperm(len(train), generator=g)]
    loader = DataLoader(Windows(order), batch_size=BATCH, shuffle=False)
    log = LossLog()
    spike = SpikeGuard(max_skips=1000) if guard else None
    callbacks: list[Callback] = [log, InjectBadBatches(bad, vocab_size=VOCAB, seed=seed)]
    if spike is not None:
        callbacks.insert(0, spike)
    trainer = Trainer(
        model=model,
        train_dataloader=loader,
        max_duration=f"{batches}ba",
        optimizers=DecoupledAdamW(model.parameters(), lr=3e-3, weight_decay=0.0),
        schedulers=[LinearWithWarmupScheduler(t_warmup="20ba", alpha_f=0.1)],
        callbacks=callbacks,
        device="cpu",
        progress_bar=False,
        log_to_console=False,
        seed=seed,
    )
    trainer.fit()
    trainer.close()
    skipped = [b for b, s, _ in spike.decisions if s] if spike else []
    return {
        "eval": eval_loss(model, val),
        "skipped": skipped,
        "losses": log.losses,
        "s_per_batch": statistics.median(log.seconds[5:]),
    }


def replay(losses: list[float], bad: set[int]) -> dict[str, Any]:
    rule = SpikeRule(threshold=6, window=128, min_history=64)
    ours = [i for i, x in enumerate(losses) if rule.step(x, None, i).skip]
    olmo = [i for i, s in enumerate(olmo_core_rule(losses, threshold=6, window=128)) if s]
    return {
        "ours_caught": len(bad & set(ours)),
        "ours_false": len(set(ours) - bad),
        "olmo_caught": len(bad & set(olmo)),
        "olmo_false": len(set(olmo) - bad),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", type=int, default=600)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--at", type=float, nargs="+", default=[0.25, 0.5, 0.75])
    p.add_argument("--burst", type=int, default=3)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    train, val = _windows("train"), _windows("val")
    bad = sorted({int(a * args.batches) + k for a in args.at for k in range(args.burst)})
    print(f"bench_spike_guard: {args.batches} batches x {args.seeds} seeds, bad batches {bad}")
    rows = []
    for seed in range(args.seeds):
        clean = run(seed, args.batches, [], True, train, val)
        unguarded = run(seed, args.batches, bad, False, train, val)
        guarded = run(seed, args.batches, bad, True, train, val)
        replayed = replay(unguarded["losses"], set(bad))
        row = {"seed": seed, "clean": clean, "bad": unguarded, "guarded": guarded, "replay": replayed}
        rows.append(row)
        print(
            f"seed {seed}: eval loss clean {clean['eval']:.4f} (false skips {len(clean['skipped'])}), "
            f"bad {unguarded['eval']:.4f}, guarded {guarded['eval']:.4f} (skipped {guarded['skipped']}); "
            f"replayed on the bad run's losses: ours caught {replayed['ours_caught']}/{len(bad)} "
            f"(false {replayed['ours_false']}), OLMo-core caught {replayed['olmo_caught']}/{len(bad)} "
            f"(false {replayed['olmo_false']})",
            flush=True,
        )

    def mean(key: str) -> float:
        return statistics.fmean(r[key]["eval"] for r in rows)

    noise = statistics.stdev([r["clean"]["eval"] for r in rows]) if len(rows) > 1 else math.nan
    t_guard = statistics.fmean(r["clean"]["s_per_batch"] for r in rows)
    t_plain = statistics.fmean(r["bad"]["s_per_batch"] for r in rows)
    summary = {
        "batches": args.batches,
        "seeds": args.seeds,
        "bad_batches": bad,
        "eval_clean": mean("clean"),
        "eval_bad": mean("bad"),
        "eval_guarded": mean("guarded"),
        "seed_noise": noise,
        "false_skips": sum(len(r["clean"]["skipped"]) for r in rows),
        "guarded_skips_exact": all(r["guarded"]["skipped"] == bad for r in rows),
        "ms_per_batch_guard": 1000 * t_guard,
        "ms_per_batch_plain": 1000 * t_plain,
        "rows": [{k: v for k, v in r.items()} for r in rows],
    }
    print(
        f"mean eval loss: clean {summary['eval_clean']:.4f} (seed sd {noise:.4f}), bad {summary['eval_bad']:.4f} "
        f"(+{summary['eval_bad'] - summary['eval_clean']:.4f}), guarded {summary['eval_guarded']:.4f} "
        f"({summary['eval_guarded'] - summary['eval_clean']:+.4f}); "
        f"false skips on clean data {summary['false_skips']}; "
        f"guard skipped exactly the bad batches: {summary['guarded_skips_exact']}; median time per batch "
        f"{summary['ms_per_batch_plain']:.2f} ms without the guard, {summary['ms_per_batch_guard']:.2f} ms with it"
    )
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
