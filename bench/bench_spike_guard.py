"""Spike guard: injected bad batches with and without the guard, against a clean run; OLMo-core's rule replayed.

A tiny causal transformer (1 layer, d_model 32, 4 heads; 26k parameters) trained in a real Composer ``Trainer`` on the
demo corpus (512-token BPE, 64-token windows, batches of 16, DecoupledAdamW at 3e-3, 20 batches of warmup), for
``--batches`` batches and ``--seeds`` seeds. Three runs per seed on the same data order:

* ``clean``: no bad batches, with the guard (its false skips are counted; the guard changes nothing when it skips
  nothing, so its eval loss is the clean run's);
* ``bad``: bursts of ``--burst`` batches of uniform random tokens at ``--at`` (fractions of the run), no guard;
* ``guarded``: the same bad batches, with ``spike_guard`` (defaults: threshold 6, window 128, min_history 64, the
  loss test alone).

Printed: each run's final eval loss (256 validation windows), the guard's skips, the seed noise (the clean runs'
standard deviation), the damage, the time per batch with and without the guard, and the skip decisions of this
package's rule and of OLMo-core's ``SkipStepOptimizer`` rule (loss only) replayed on the ``bad`` runs' loss sequences.

``--study``: clean and bad runs without the guard, their loss and gradient-norm series, and the rules of ``RULES``
(the loss test alone or with the gradient-norm test, thresholds 4 to 8) replayed on them: each rule's false skips on
the clean series, its catches of each burst's first bad batch, the largest clean z-scores. ``--overhead ROUNDS``:
clean runs without the guard, with it, and with it and ``grad_norm: true``, in turn, ``ROUNDS`` times: the median time
per batch of each run, the medians over the rounds, the median ratio to the run without the guard, the load average.

    .venv/bin/python bench/bench_spike_guard.py --seeds 8 --json bench/data/spike-guard-600ba.json  # recorded run
    .venv/bin/python bench/bench_spike_guard.py --study --seeds 8 --json bench/data/spike-guard-study-600ba.json
    .venv/bin/python bench/bench_spike_guard.py --study --seeds 4 --seed0 8 --batches 1500 \\
        --json bench/data/spike-guard-study-1500ba.json
    .venv/bin/python bench/bench_spike_guard.py --overhead 7 --batches 150 --json bench/data/spike-guard-overhead.json
    .venv/bin/python bench/bench_spike_guard.py --batches 160 --seeds 1 --at 0.95   # the suite's smoke copy
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
    """Each batch's training loss, gradient norm (read before the guard, listed after it, drops a skip's), time."""

    def __init__(self) -> None:
        self.losses: list[float] = []
        self.grad_norms: list[float] = []
        self.seconds: list[float] = []
        self._t = 0.0

    def after_train_batch(self, state: State, logger: Logger) -> None:
        del logger
        grads = [p.grad.detach().float().pow(2).sum() for p in state.model.parameters() if p.grad is not None]
        self.grad_norms.append(math.sqrt(float(torch.stack(grads).sum())) if grads else math.nan)

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


def run(
    seed: int,
    batches: int,
    bad: list[int],
    guard: bool,
    train: torch.Tensor,
    val: torch.Tensor,
    **guard_keys: Any,
) -> dict:
    torch.manual_seed(seed)
    model = TinyLM()
    g = torch.Generator().manual_seed(seed)
    order = train[torch.randperm(len(train), generator=g)]
    loader = DataLoader(Windows(order), batch_size=BATCH, shuffle=False)
    log = LossLog()
    spike = SpikeGuard(**{"max_skips": 1000, **guard_keys}) if guard else None
    callbacks: list[Callback] = [log, InjectBadBatches(bad, vocab_size=VOCAB, seed=seed)]
    if spike is not None:
        callbacks.append(spike)  # after the log: it reads the gradient norm before a skip drops the gradients
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
        "grad_norms": log.grad_norms,
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


RULES: dict[str, dict[str, Any]] = {  # replayed by --study: name -> SpikeRule threshold, and the gradient-norm test
    f"{test}, threshold {t}": {"threshold": t, "grad_norm": test == "loss and grad norm"}
    for test in ("loss only", "loss and grad norm")
    for t in (4, 5, 6, 7, 8)
}


def replay_rule(
    losses: list[float], grads: list[float], threshold: float, grad_norm: bool
) -> list[tuple[int, str, float, float]]:
    """The guard's rule (window 128, min_history 64) on recorded series: (batch, reason, loss z, grad z) per skip."""
    rule = SpikeRule(threshold=threshold, window=128, min_history=64)
    out = []
    for i, (x, g) in enumerate(zip(losses, grads, strict=True)):
        d = rule.step(x, g if grad_norm else None, i)
        if d.skip:
            out.append((i, d.reason, d.z, d.grad_z))
    return out


def study(args: argparse.Namespace, train: torch.Tensor, val: torch.Tensor, bad: list[int]) -> dict[str, Any]:
    """Clean and bad runs without the guard, their loss and gradient-norm series, every rule of RULES replayed."""
    series = []
    for seed in range(args.seed0, args.seed0 + args.seeds):
        clean = run(seed, args.batches, [], False, train, val)
        spoilt = run(seed, args.batches, bad, False, train, val)
        series.append({"seed": seed, "clean": clean, "bad": spoilt})
        print(f"seed {seed}: recorded ({args.batches} batches, clean and bad)", flush=True)
    return study_summary(series, args.batches, bad)


def _max_z(values: list[float]) -> float:
    """The largest z-score of a series under the default window, nothing skipped (every step enters the window)."""
    rule = SpikeRule()
    zs = []
    for x in values:
        zs.append(rule.decide(x).z)
        rule.losses.append(x)
    return max(z for z in zs if not math.isnan(z))


def study_summary(series: list[dict[str, Any]], batches: int, bad: list[int]) -> dict[str, Any]:
    """The false skips of each rule of RULES on the clean series, its catches of each burst's first bad batch."""
    firsts = [b for b in bad if b - 1 not in bad]
    table = {}
    for name, keys in RULES.items():
        false = [
            (r["seed"], *s) for r in series for s in replay_rule(r["clean"]["losses"], r["clean"]["grad_norms"], **keys)
        ]
        # each burst's first batch: the bad run is the clean run up to it, so its z is the guarded run's exactly
        caught = sum(
            b in {s[0] for s in replay_rule(r["bad"]["losses"][: b + 1], r["bad"]["grad_norms"][: b + 1], **keys)}
            for r in series
            for b in firsts
        )
        table[name] = {"false_skips": false, "caught_first_of_burst": caught, "bursts": len(firsts) * len(series)}
        print(
            f"{name}: false skips {len(false)} {false}; caught {caught}/{len(firsts) * len(series)} first bad batches"
        )
    clean_z = [
        {"seed": r["seed"], "loss": _max_z(r["clean"]["losses"]), "grad_norm": _max_z(r["clean"]["grad_norms"])}
        for r in series
    ]
    print("largest z-score on clean data, per seed (loss, grad norm):", [(z["loss"], z["grad_norm"]) for z in clean_z])
    return {
        "batches": batches,
        "seeds": [r["seed"] for r in series],
        "bad_batches": bad,
        "rules": table,
        "clean_max_z": clean_z,
    }


def overhead(args: argparse.Namespace, train: torch.Tensor, val: torch.Tensor) -> dict[str, Any]:
    """Runs without the guard, with it, and with it and grad_norm on, in turn, on clean data: per-batch medians."""
    load = [os.getloadavg()]
    kinds = {"plain": (False, {}), "guard": (True, {}), "guard_grad_norm": (True, {"grad_norm": True})}
    rounds = []
    for i in range(args.overhead):
        row = {}
        for kind, (guard, keys) in kinds.items():
            row[kind] = 1000 * run(0, args.batches, [], guard, train, val, **keys)["s_per_batch"]
        rounds.append(row)
        print(f"round {i + 1}: median ms per batch " + ", ".join(f"{k} {v:.3f}" for k, v in row.items()), flush=True)
    load.append(os.getloadavg())
    med = {k: statistics.median(r[k] for r in rounds) for k in kinds}
    ratio = {k: statistics.median(r[k] / r["plain"] for r in rounds) for k in kinds if k != "plain"}
    print(
        f"medians over {len(rounds)} rounds of {args.batches} batches: "
        + ", ".join(f"{k} {v:.3f} ms" for k, v in med.items())
        + "; median ratio to plain: "
        + ", ".join(f"{k} {v:.4f}" for k, v in ratio.items())
        + f"; load average (1, 5, 15 min) before {load[0]}, after {load[1]}"
    )
    return {"batches": args.batches, "rounds": rounds, "median_ms": med, "median_ratio": ratio, "loadavg": load}


def report(main_run: dict[str, Any], studies: list[dict[str, Any]], timing: dict[str, Any] | None) -> list[str]:
    """The markdown rows of docs/benchmarks.md section 12, from the recorded JSON files (the suite compares them)."""
    bad = main_run["bad_batches"]
    lines = ["| seed | clean (guard on) | bad, no guard | bad, guard on | guard's skips (false skips on clean data) |"]
    for r in main_run["rows"]:
        skips = "the 9 bad batches" if r["guarded"]["skipped"] == bad else str(r["guarded"]["skipped"])
        lines.append(
            f"| {r['seed']} | {r['clean']['eval']:.4f} | {r['bad']['eval']:.4f} | {r['guarded']['eval']:.4f} | "
            f"{skips} ({len(r['clean']['skipped'])}) |"
        )
    lines.append(
        f"| mean | {main_run['eval_clean']:.4f} (seed sd {main_run['seed_noise']:.4f}) | {main_run['eval_bad']:.4f} "
        f"({main_run['eval_bad'] - main_run['eval_clean']:+.4f}) | {main_run['eval_guarded']:.4f} "
        f"({main_run['eval_guarded'] - main_run['eval_clean']:+.4f}) | {main_run['false_skips']} false skips |"
    )
    for name in RULES:
        cells = []
        for st in studies:
            row = st["rules"][name]
            steps = st["batches"] * len(st["seeds"])
            cells.append(f"{len(row['false_skips'])} in {steps:,} | {row['caught_first_of_burst']}/{row['bursts']}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for st in studies:
        lz = max(z["loss"] for z in st["clean_max_z"])
        gz = max(z["grad_norm"] for z in st["clean_max_z"])
        lines.append(f"| {st['batches']} x {len(st['seeds'])} | {lz:.2f} | {gz:.2f} |")
    if timing is not None:
        med, ratio = timing["median_ms"], timing["median_ratio"]
        lines.append(
            f"| {len(timing['rounds'])} x {timing['batches']} | {med['plain']:.2f} | {med['guard']:.2f} "
            f"({ratio['guard']:.3f}) | {med['guard_grad_norm']:.2f} ({ratio['guard_grad_norm']:.3f}) |"
        )
    return lines


def _compact(summary: dict[str, Any]) -> str:
    """JSON with each run's series at 6 significant digits, one run to a line."""

    def short(v: Any) -> Any:
        if isinstance(v, float):
            return float(f"{v:.6g}")
        if isinstance(v, list):
            return [short(x) for x in v]
        if isinstance(v, dict):
            return {k: short(x) for k, x in v.items()}
        return v

    rows = [json.dumps(short(r), separators=(",", ":")) for r in summary["rows"]]
    head = json.dumps({k: v for k, v in summary.items() if k != "rows"}, indent=1)[:-2]
    return head + ',\n "rows": [\n' + ",\n".join(rows) + "\n ]\n}\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", type=int, default=600)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--at", type=float, nargs="+", default=[0.25, 0.5, 0.75])
    p.add_argument("--burst", type=int, default=3)
    p.add_argument("--json", type=Path)
    p.add_argument("--study", action="store_true", help="record clean and bad runs without the guard; replay RULES")
    p.add_argument("--seed0", type=int, default=0, help="the first seed (--study)")
    p.add_argument("--overhead", type=int, metavar="ROUNDS", help="time clean runs without / with the guard, in turn")
    args = p.parse_args(argv)
    train, val = _windows("train"), _windows("val")
    bad = sorted({int(a * args.batches) + k for a in args.at for k in range(args.burst)})
    if args.study or args.overhead:
        result = study(args, train, val, bad) if args.study else overhead(args, train, val)
        if args.json:
            args.json.write_text(json.dumps(result, indent=1) + "\n")
        return result
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
        args.json.write_text(_compact(summary))
    return summary


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
