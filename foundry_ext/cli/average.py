"""``foundry-ext average CKPT... --out OUT``: the weighted average of a run's checkpoints, as a checkpoint.

Only the standard library is imported here: ``--help`` and a bad option are answered before torch is imported. The
work is :mod:`foundry_ext.average`'s; see docs/average.md.
"""

from __future__ import annotations

import argparse

from foundry_ext.cli import UsageError

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``CKPT...`` and the options."""
    parser.add_argument(
        "checkpoints",
        nargs="+",
        metavar="CKPT",
        help="checkpoints of one run: .pt files, sharded checkpoint folders, or one save folder (see --last)",
    )
    parser.add_argument(
        "--out",
        required=True,
        metavar="OUT",
        help="the averaged checkpoint to write: a new .pt file (from .pt files) or a new folder (from sharded ones)",
    )
    parser.add_argument(
        "--weights",
        default="uniform",
        metavar="W",
        help="uniform (default), exp:BETA (the newest 1, each older BETA times the next) or W1,W2,... oldest first",
    )
    parser.add_argument("--last", metavar="K", help="of a save folder: the newest K checkpoints")
    parser.add_argument("--every", metavar="N", help="of a save folder: every N-th checkpoint, counted from the newest")
    parser.add_argument("--batches", metavar="A:B", help="of a save folder: the checkpoints of batches A to B")


def run(args: argparse.Namespace) -> int:
    """Check everything, write the average, print what it holds and how to evaluate it."""
    from foundry_ext.average.options import AverageError, parse_selection, parse_weights

    try:
        weights = parse_weights(args.weights)
        selection = parse_selection(args.last, args.every, args.batches)
        from foundry_ext.average.write import average  # imports torch only once a checkpoint is read

        result = average(args.checkpoints, selection, weights, args.out)
    except AverageError as e:
        raise UsageError(str(e)) from None
    newest = result.headers[-1]
    kind = "sharded folder" if result.sharded else "file"
    print(f"averaged {len(result.headers)} checkpoints of {newest.run_name or 'the run'} into {result.out} ({kind}):")
    for header, w in zip(result.headers, result.weights, strict=True):
        print(f"  batch {header.batch:>8}  weight {w:.6g}  {header.item.shown}")
    if result.sharded:
        largest = result.stats.get("largest_chunk_bytes", 0)
        print(
            f"  {result.stats.get('chunks', 0)} model chunks averaged one at a time (the largest {largest} bytes), "
            f"{result.stats.get('copied', 0)} other records copied"
        )
    print(
        f"  the model weights are the average; optimizer state, time (batch {newest.batch}), schedulers and RNG are "
        f"those of {newest.item.shown}"
    )
    print("evaluate it on the run's eval set (the first eval, at batch 0, is the average's):")
    print(
        f"  composer train.py CONFIG.yaml load_path={result.out} load_weights_only=true eval_first=true "
        "max_duration=1ba scheduler.t_warmup=0ba save_folder=null"
    )
    return 0
