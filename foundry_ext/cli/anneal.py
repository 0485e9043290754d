"""``foundry-ext anneal CHECKPOINT CONFIG.yaml [key=value ...] --decay LEN --out BRANCH.yaml``: branch a cooldown.

Only the standard library is imported here: ``--help`` and a bad option are answered before torch or Composer is
imported. The work is :mod:`foundry_ext.anneal`'s; see docs/anneal.md.
"""

from __future__ import annotations

import argparse

from foundry_ext.cli import UsageError

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``CHECKPOINT CONFIG.yaml [key=value ...]`` and the options."""
    parser.add_argument(
        "checkpoint",
        metavar="CHECKPOINT",
        help="a checkpoint of the stable run: a .pt file, a save folder (its latest), or a sharded checkpoint folder",
    )
    parser.add_argument("config", metavar="CONFIG.yaml", help="the stable run's train YAML")
    parser.add_argument(
        "overrides",
        nargs="*",
        default=[],
        metavar="key=value",
        help="overrides, as for train.py (save_folder=... names the branch's folder, run_name=... its name)",
    )
    parser.add_argument(
        "--decay",
        required=True,
        metavar="LEN",
        help="decay length: 2000ba, 4096000tok, 512sp, or 0.2dur (that fraction of the whole branched run)",
    )
    parser.add_argument(
        "--shape", default="linear", metavar="SHAPE", help="linear (default), sqrt (1-sqrt), cosine or square"
    )
    parser.add_argument("--floor", default="0", metavar="ALPHA", help="final LR as a fraction of the peak (default 0)")
    parser.add_argument("--out", required=True, metavar="BRANCH.yaml", help="the branch's train YAML to write")


def run(args: argparse.Namespace) -> int:
    """Plan the branch (every check before anything is written), write its YAML, print how to run it."""
    from foundry_ext._command import composer_command, shown_path
    from foundry_ext.anneal.branch import plan_branch
    from foundry_ext.anneal.options import AnnealError
    from foundry_ext.anneal.write import write_branch
    from foundry_ext.config.errors import ConfigError

    try:
        branch = plan_branch(args.checkpoint, args.config, args.overrides, args.decay, args.shape, args.floor, args.out)
    except AnnealError as e:
        raise UsageError(str(e)) from None
    except ConfigError as e:  # CONFIG's problems, said as every command says them
        raise UsageError.of_config(e) from None
    try:
        kept = write_branch(branch, args.out)
    except AnnealError as e:
        raise UsageError(str(e)) from None
    s, end = branch.source.batch, branch.end
    print(
        f"branch of {branch.source.run_name or 'the stable run'} from batch {s} ({branch.source.path}): "
        f"{branch.shape} decay over {branch.length} batches to {branch.floor:g} x the peak LR"
    )
    print(f"  LR at batch {s} (first): {branch.first_lr:.6g}; at batch {end - 1} (last): {branch.last_lr:.6g}")
    print(f"  run_name {branch.run_name}, checkpoints in {branch.folder}")
    print(f"  {kept}")
    for note in branch.notes:
        print(f"  {note}")
    print(f"wrote {args.out}; run it, and after a kill relaunch it, with:")
    print(f"  {composer_command('train.py', shown_path(args.out))}")  # pastes: the composer beside us, quoted
    return 0
