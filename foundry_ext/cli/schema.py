"""``foundry-ext schema [--out FILE]``: the JSON Schema of train YAMLs, for editors (:mod:`foundry_ext.catalog.schema`).

Point an editor at it with a first line in the YAML, ``# yaml-language-server: $schema=./train-yaml.schema.json``,
or in VS Code's ``yaml.schemas`` setting; docs/cli.md shows both.
"""

from __future__ import annotations

import argparse

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``--out``."""
    parser.add_argument("--out", metavar="FILE.json", help="write the schema to this file (default: print it)")


def run(args: argparse.Namespace) -> int:
    """Print or write the schema."""
    import json

    from foundry_ext.catalog.schema import train_yaml_schema
    from foundry_ext.cli import UsageError, check_output_paths

    check_output_paths(("--out", args.out))
    text = json.dumps(train_yaml_schema(), indent=2, sort_keys=False) + "\n"
    if not args.out:
        print(text, end="")
        return 0
    try:
        with open(args.out, "w") as f:
            f.write(text)
    except OSError as e:
        raise UsageError(f"--out {args.out}: cannot write: {' '.join(str(e).split())}") from None
    print(f"wrote {args.out}: JSON Schema of train YAMLs ({len(text) // 1024} KiB); first line of a YAML to use it:")
    print(f"# yaml-language-server: $schema={args.out}")
    return 0
