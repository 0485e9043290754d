"""The ``foundry-ext`` command: one subcommand per module, imported only when used (torch is slow to import)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["main"]

# subcommand -> (module, one-line help). Each module defines ``add_arguments(parser)`` and ``run(args) -> int``.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo-data": ("foundry_ext.cli.demo_data", "write the offline demo tokenizer and MDS dataset to a folder"),
    "schedulers": ("foundry_ext.cli.schedulers", "list every scheduler llm-foundry can build here, with parameters"),
    "validate": ("foundry_ext.cli.validate", "build the scheduler and callbacks of a train YAML without a model"),
    "plot": ("foundry_ext.cli.plot", "draw the LR schedule of a train YAML to a PNG and the terminal"),
    "inspect": ("foundry_ext.cli.inspect", "show the time, LRs, schedulers and plateau state of a checkpoint"),
    "lr-find": ("foundry_ext.cli.lr_find", "LR range test with the model and data of a train YAML; suggests an LR"),
}


class UsageError(Exception):
    """Bad input to a subcommand: printed as one line, exit status 2."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``foundry-ext`` console script."""
    parser = argparse.ArgumentParser(prog="foundry-ext", description="LR schedulers for llm-foundry: tools.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module_name)
        # argument definitions live next to the code that uses them; importing is cheap until run() is called
        importlib.import_module(module_name).add_arguments(p)
    args = parser.parse_args(argv)
    module = importlib.import_module(args._module)
    try:
        return int(module.run(args) or 0)
    except UsageError as e:
        print(f"foundry-ext {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"foundry-ext {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
