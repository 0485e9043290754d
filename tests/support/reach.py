"""Which modules of the package a pytest run reaches, measured: ``pytest -p tests.support.reach -m 'not slow'``.

A module counts as reached when a test calls one of its functions, methods or class bodies in the pytest process
(not its import: ``<module>`` code is left out). Written at the end of the session to ``$FOUNDRY_EXT_REACH``
(default ``reach.json``): ``{"modules": [every module], "reached": {"module": "first test id that reached it"}}``,
and the modules reached by none are printed; ``tests/quick_reach.json`` is that file for the quick tier. Modules
that only a subprocess runs (a ``foundry-ext`` command started by a test) are not seen here: ``tests/test_tiers.py``
names a test for those. Uses ``sys.setprofile`` (the standard library; about 2x slower).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support.launcher import REPO

PACKAGE = REPO / "foundry_ext"
_reached: dict[str, str] = {}
_current = [""]
_seen_codes: set[Any] = set()


def module_of(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _profile(frame: Any, event: str, arg: Any) -> None:
    del arg  # unused
    if event != "call":
        return
    code = frame.f_code
    if code in _seen_codes:
        return
    _seen_codes.add(code)
    if code.co_name == "<module>" or not _current[0] or not code.co_filename.startswith(str(PACKAGE)):
        return
    _reached.setdefault(module_of(Path(code.co_filename)), _current[0])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    _current[0] = item.nodeid
    _seen_codes.clear()  # first calls per test: the test ids stay the first reaching test
    sys.setprofile(_profile)
    threading.setprofile(_profile)
    try:
        yield
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        _current[0] = ""


def pytest_sessionfinish(session: pytest.Session) -> None:
    del session  # unused
    every = sorted(module_of(p) for p in PACKAGE.rglob("*.py"))
    out = Path(os.environ.get("FOUNDRY_EXT_REACH", "reach.json"))
    record = {"modules": every, "reached": {m: _reached[m] for m in every if m in _reached}}
    out.write_text(json.dumps(record, indent=1) + "\n")
    missed = [m for m in every if m not in _reached]
    print(f"\nreach: {len(every) - len(missed)} of {len(every)} modules reached in-process; written to {out}")
    for module in missed:
        print(f"reach: not reached in-process: {module}")
