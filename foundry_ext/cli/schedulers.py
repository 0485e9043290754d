"""``foundry-ext schedulers``: every scheduler name llm-foundry can build here, who provides it, and its parameters."""

from __future__ import annotations

import argparse
import inspect
from typing import Any

__all__ = ["add_arguments", "describe", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the optional ``NAME`` filters."""
    parser.add_argument("names", nargs="*", metavar="NAME", help="only these scheduler names (default: all)")


def describe(cls: Any) -> str:
    """The constructor parameters of a scheduler class as ``a, b=1, c='x'``."""
    if getattr(cls, "__name__", "") == "TorchLRScheduler":
        return "type + torch kwargs (type: a torch.optim.lr_scheduler class name; then that class's arguments)"
    target = cls.__init__ if isinstance(cls, type) else cls
    for cell in getattr(target, "__closure__", None) or ():  # llm-foundry's @experimental_class wraps __init__
        if inspect.isfunction(cell.cell_contents) and cell.cell_contents.__name__ == "__init__":
            target = cell.cell_contents
    try:
        params = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return "(signature unavailable)"
    shown = []
    for p in params:
        if p.name == "self":
            continue
        if p.kind is p.VAR_KEYWORD:
            shown.append(f"**{p.name}")
        elif p.kind is p.VAR_POSITIONAL:
            shown.append(f"*{p.name}")
        elif p.default is p.empty:
            shown.append(p.name)
        else:
            shown.append(f"{p.name}={p.default!r}")
    return ", ".join(shown) or "(no parameters)"


def _providers() -> tuple[dict[str, str], dict[str, list[str]]]:
    """Scheduler names registered through entry points -> distribution; top-level package -> distributions."""
    from importlib.metadata import entry_points, packages_distributions

    by_entry_point = {}
    for ep in entry_points(group="llmfoundry_schedulers"):
        by_entry_point[ep.name] = ep.dist.name if ep.dist is not None else "?"
    return by_entry_point, packages_distributions()


def run(args: argparse.Namespace) -> int:
    """Print one block per registered scheduler."""
    from llmfoundry import registry

    from foundry_ext.cli import UsageError
    from foundry_ext.cli._config_loading import scheduler_spec

    registered = registry.schedulers.get_all()
    for name in args.names:
        if name not in registered:
            scheduler_spec({"scheduler": {"name": name}})  # raises the UsageError with close names
    by_entry_point, packages = _providers()
    names = sorted(args.names or registered)
    if not names:
        raise UsageError("no schedulers are registered (is llm-foundry installed?)")
    print(f"{len(names)} schedulers (scheduler.name in a train YAML):")
    for name in names:
        cls = registered[name]
        module = getattr(cls, "__module__", "") or ""
        dists = packages.get(module.split(".")[0], ["?"])
        cls_dist = "/".join(sorted(set(dists)))
        if name in by_entry_point:
            origin = f"{by_entry_point[name]} (entry point)"
        else:
            origin = "llm-foundry (built in)"
        qualname = f"{module}.{getattr(cls, '__qualname__', repr(cls))}"
        print(f"\n{name}")
        print(f"  registered by: {origin}; class {qualname} from {cls_dist}")
        print(f"  parameters:    {describe(cls)}")
    return 0
