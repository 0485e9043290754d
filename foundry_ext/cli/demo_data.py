"""``foundry-ext demo-data DIR``: write the offline demo tokenizer and MDS data (:mod:`foundry_ext.demo_data`)."""

from __future__ import annotations

import argparse
import time

from foundry_ext.cli import UsageError

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``DIR`` and ``--seed``."""
    from foundry_ext.demo_data import DEFAULT_SEED  # cheap: the heavy imports happen inside write_demo_data

    parser.add_argument("dir", metavar="DIR", help="folder to write: missing, empty, or a previous demo-data output")
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"seed of the generated corpus (default: {DEFAULT_SEED})"
    )


def run(args: argparse.Namespace) -> int:
    """Write (or reuse) the demo data and say where it is."""
    from foundry_ext.demo_data import DemoDataError, write_demo_data

    start = time.perf_counter()
    try:
        data = write_demo_data(args.dir, seed=args.seed)
    except DemoDataError as e:
        raise UsageError(str(e)) from None
    if data.created:
        counts = data.marker["sequences"]
        print(
            f"wrote demo data to {data.path} in {time.perf_counter() - start:.1f}s: tokenizer "
            f"(vocab {data.marker['vocab_size']}), {counts['train']} train and {counts['val']} val sequences "
            f"of {data.marker['max_seq_len']} tokens (seed {args.seed})"
        )
    else:
        print(f"demo data is already there: {data.path} (seed {data.marker['seed']}); reusing it")
    return 0
