"""Lazy package exports (PEP 562): a name is imported from its module the first time it is used.

``import foundry_ext`` must not import Composer or torch (seconds each): the CLI's start-up depends on it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, str], fallback: tuple[str, str] | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``, whose public ``name`` lives in module ``exports[name]``.

    ``fallback = (suffix, module)``: any other name ending in ``suffix`` is looked up in ``module`` (the generated
    scheduler classes, which need no line here).
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None and fallback is not None and name.endswith(fallback[0]) and not name.startswith("_"):
            module = fallback[1]
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        try:
            value = getattr(importlib.import_module(module), name)
        except AttributeError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        setattr(sys.modules[package], name, value)  # later lookups are plain attribute reads
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__
