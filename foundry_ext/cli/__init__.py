"""The ``foundry-ext`` command: one subcommand per module, imported only when used.

Start-up matters: importing torch takes seconds and Composer more. ``foundry-ext --help``, ``--version``,
``schedulers`` and ``schema`` import neither (``tests/cli/test_cli_startup.py``); each subcommand module imports at its
top only the standard library, and in ``run()`` what it uses.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from foundry_ext.outputs import make_output_folder, output_problem
from foundry_ext.text import one_line

if TYPE_CHECKING:
    from foundry_ext.config.errors import ConfigError

__all__ = ["UsageError", "main"]

# subcommand -> (module, one-line help). Each module defines ``add_arguments(parser)`` and ``run(args) -> int``.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "plot": ("foundry_ext.cli.plot", "draw the LR of every batch of a train YAML to a PNG and the terminal"),
    "validate": ("foundry_ext.cli.validate", "check the schedule and callbacks of a train YAML: every problem at once"),
    "schedulers": ("foundry_ext.cli.schedulers", "list every scheduler name a train YAML can use, with its keys"),
    "schema": ("foundry_ext.cli.schema", "print a JSON Schema of train YAMLs for editors (scheduler blocks typed)"),
    "inspect": ("foundry_ext.cli.inspect", "show the time, LRs, schedulers and plateau state of a checkpoint"),
    "lr-find": ("foundry_ext.cli.lr_find", "LR range test with the model and data of a train YAML; suggests an LR"),
    "law": ("foundry_ext.cli.law", "fit a loss law on past runs, predict a train YAML's loss curve, rank a grid"),
    "anneal": ("foundry_ext.cli.anneal", "write the train YAML of a cooldown branched from a stable run's checkpoint"),
    "average": ("foundry_ext.cli.average", "average the model weights of a run's checkpoints into one checkpoint"),
    "demo-data": ("foundry_ext.cli.demo_data", "write the offline demo tokenizer and MDS dataset to a folder"),
}


def add_config_arguments(parser: argparse.ArgumentParser, example: str = "") -> None:
    """The positional arguments of every command that reads a train YAML: the file, then train.py-style overrides."""
    parser.add_argument("config", metavar="CONFIG.yaml", help="an llm-foundry train YAML")
    e = f" (e.g. {example})" if example else ""
    help_text = f"overrides, as for train.py{e}; anywhere among the options"
    # default=[]: without it argparse lists a nargs="*" positional as required in its error message
    parser.add_argument("overrides", nargs="*", default=[], metavar="key=value", help=help_text)


# Composer reads an integer for these as epochs (Trainer: Time.from_input(value, TimeUnit.EPOCH))
_EPOCH_WHEN_UNITLESS = ("max_duration", "eval_interval", "save_interval")


def unit_notes(overrides: Sequence[str]) -> list[str]:
    """One note per ``key=value`` override whose duration has no unit, naming the unit Composer gives it."""
    notes = []
    for override in overrides:
        key, _, value = override.partition("=")
        if key.strip() in _EPOCH_WHEN_UNITLESS and value.strip().isdigit():
            v = value.strip()
            notes.append(
                f"note: {key.strip()}={v} has no unit: Composer reads it as {v}ep (epochs); write {v}ba for batches"
            )
    return notes


def check_output_paths(*options: tuple[str, str | None]) -> None:
    """Refuse an output file whose folder does not exist, or that is a folder, before any work.

    The rule and its line: :func:`foundry_ext.outputs.output_problem`.
    """
    for option, path in options:
        problem = output_problem(option, path)
        if problem is not None:
            raise UsageError(problem)


def read_metrics(path: str, monitor: str | None = None) -> list[tuple[int, float]]:
    """``--metrics``: rows ``batch,value`` of a CSV, or the ``monitor`` metric of an MLflow run (:mod:`..runlog`)."""
    from foundry_ext.runlog import RunLogError, read_series

    try:
        return read_series(path, monitor)
    except RunLogError as e:
        raise UsageError(f"--metrics {e}") from None


class UsageError(Exception):
    """Bad input to a subcommand: printed as one line (escaped by :func:`foundry_ext.text.one_line`), exit status 2."""

    @classmethod
    def of_config(cls, error: ConfigError) -> UsageError:
        """A config's problems on the one error line every command prints: ``<yaml.field>: <problem>`` joined by ``; ``.

        Each problem says what is allowed (:class:`~foundry_ext.config.errors.Problem`). One line, as every refusal
        is; ``validate`` alone lists the problems a line each, as its report.
        """
        return cls("; ".join(str(p) for p in error.problems))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    def of(dist: str) -> str:
        try:
            return version(dist)
        except PackageNotFoundError:
            return "not installed"

    return (
        f"foundry-ext {of('foundry-ext')} (llm-foundry {of('llm-foundry')}, composer {of('mosaicml')}, "
        f"torch {of('torch')}, python {sys.version.split()[0]})"
    )


class _Version(argparse.Action):
    """``--version``: one line, unwrapped (argparse's own action wraps it at the terminal width)."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: object, values: object, option: str | None = None
    ) -> None:
        print(_version())
        parser.exit()


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    """``parser``'s subcommands (the top level's ``plot``, ..., ``law``'s ``fit``), or None."""
    for action in parser._actions:  # argparse keeps them there and nowhere public
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Parse ``argv`` with options and positionals intermixed: ``plot cfg.yaml --out x.png max_duration=100ba``.

    argparse cannot intermix through subparsers, so the command words (``law fit``) are walked here and the last
    command's parser parses the rest, starting from what the command words set.
    """
    namespace, rest, leaf = argparse.Namespace(), argv, parser
    while rest and (action := _subparsers(leaf)) is not None and rest[0] in action.choices:
        setattr(namespace, action.dest, rest[0])
        leaf = action.choices[rest[0]]
        for key, value in leaf._defaults.items():
            setattr(namespace, key, value)
        rest = rest[1:]
    if leaf is parser or _subparsers(leaf) is not None:
        return parser.parse_args(argv)  # no command word, or one that needs another: argparse's own message
    namespace = leaf.parse_intermixed_args(rest, namespace)
    for action in leaf._actions:
        # `--weights --` beside a nargs="+" positional: argparse drops the '--' and sets the option to [] without a
        # word (issue 46: found by fuzzing `average`); refused as argparse refuses a missing value
        single = isinstance(action, argparse._StoreAction) and action.nargs is None  # not append, not nargs="+"
        if action.option_strings and single and isinstance(getattr(namespace, action.dest, None), list):
            leaf.error(f"argument {'/'.join(action.option_strings)}: expected one argument")
    return namespace


#: The options that name a file a command writes (``plot --out``, ``--csv``; ``lr-find --json``; ``law fit --out``).
OUTPUT_OPTIONS = ("out", "csv", "json")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``foundry-ext`` console script."""
    parser = argparse.ArgumentParser(
        prog="foundry-ext", description="LR schedules for llm-foundry: see them, check them."
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the versions of foundry-ext and its stack")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module_name, command=name)
        # argument definitions live next to the code that uses them; the modules import only the standard library
        importlib.import_module(module_name).add_arguments(p)
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parse(parser, argv)
    # validate warns of a unitless duration itself (the YAML's own value too), counted with its other warnings
    for note in unit_notes(getattr(args, "overrides", None) or []) if args.command != "validate" else []:
        print(note, file=sys.stderr)
    for name in OUTPUT_OPTIONS:  # out/ and folders under it are made; any other missing folder is refused
        make_output_folder(getattr(args, name, None))
    module = importlib.import_module(args._module)
    try:
        return int(module.run(args) or 0)
    except UsageError as e:
        print(f"foundry-ext {args.command}: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"foundry-ext {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `foundry-ext schedulers | head`: the reader left; not an error of ours
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
