"""``foundry-ext demo-data [DIR]``: write the offline demo tokenizer and MDS data (:mod:`foundry_ext.demo_data`).

``DIR`` defaults to ``demo-data``, the folder the example YAMLs read (``variables.data_local: ./demo-data``).
"""

from __future__ import annotations

import argparse
import os
import time

from foundry_ext.cli import UsageError

__all__ = ["DEFAULT_DIR", "add_arguments", "run"]

DEFAULT_DIR = "demo-data"  # the yamls' variables.data_local, relative to where they are run (the repository's root)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``DIR`` and ``--seed``."""
    from foundry_ext.demo_data import DEFAULT_SEED  # cheap: the heavy imports happen inside write_demo_data

    parser.add_argument(
        "dir",
        metavar="DIR",
        nargs="?",
        default=DEFAULT_DIR,
        help=f"folder to write: missing, empty, or a previous demo-data output (default: {DEFAULT_DIR}, the folder "
        "the example YAMLs read)",
    )
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"seed of the generated corpus (default: {DEFAULT_SEED})"
    )


def run(args: argparse.Namespace) -> int:
    """Write (or reuse) the demo data and say where it is."""
    from foundry_ext.demo_data import DemoDataError, write_demo_data

    start = time.perf_counter()
    shown = os.path.normpath(args.dir)  # the folder as given, without a trailing slash
    try:
        data = write_demo_data(args.dir, seed=args.seed)
    except DemoDataError as e:
        raise UsageError(str(e)) from None
    if data.created:
        counts = data.marker["sequences"]
        print(
            f"wrote demo data to the folder {shown}/ ({data.path}) in {time.perf_counter() - start:.1f}s: "
            f"tokenizer (vocab {data.marker['vocab_size']}), {counts['train']} train and {counts['val']} val "
            f"sequences of {data.marker['max_seq_len']} tokens (seed {args.seed})"
        )
    else:
        print(f"demo data is already in the folder {shown}/ ({data.path}, seed {data.marker['seed']}); reusing it")
    if shown != DEFAULT_DIR:
        print(f"the example YAMLs read ./{DEFAULT_DIR}: train on this folder with variables.data_local={shown}")
    return 0
