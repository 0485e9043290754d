"""A line when a slow test starts and one when it ends, with its duration: which long test is running (issue 46).

The full suite runs ~25 minutes on two workers (longer on a loaded machine), and pytest-xdist shows nothing of what a
worker is doing until a test ends, so a test that takes ten minutes looked like a hung suite. Each process that runs
tests (an xdist worker, or the only process) writes the lines for its own tests marked ``slow`` (~160 of ~3,500):

    slow test starts [gw1 00:41:07]: tests/resume/test_chain.py::test_kill_and_resume_chain
    slow test ends   [gw1 00:45:36]: tests/resume/test_chain.py::test_kill_and_resume_chain: passed in 269.1 s

A worker writes to its stderr, which xdist leaves on the terminal (its channel is the worker's stdin and stdout);
``pytest_runtest_logstart`` and ``logfinish`` run between the phases' output capture, so nothing is swallowed. The
xdist controller collects no tests and writes nothing. Imported by ``tests/conftest.py``, which registers the hooks.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import pytest

_state: dict[str, Any] = {"config": None, "slow": set(), "started": {}, "outcome": {}}


def pytest_collection_finish(session: pytest.Session) -> None:
    """Remember this process's slow tests (after ``-m`` deselection) and the config, to write through."""
    _state["config"] = session.config
    _state["slow"] = {item.nodeid for item in session.items if item.get_closest_marker("slow")}


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    del location  # unused
    if nodeid in _state["slow"]:
        _state["started"][nodeid] = time.monotonic()
        _write(f"slow test starts [{_where()}]: {nodeid}")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.nodeid not in _state["slow"]:
        return
    if report.when == "call" or report.skipped:
        _state["outcome"].setdefault(report.nodeid, report.outcome)
    elif report.failed:  # an error in setup or teardown
        _state["outcome"][report.nodeid] = f"error in {report.when}"


def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]) -> None:
    del location  # unused
    started = _state["started"].pop(nodeid, None)
    if started is not None:
        outcome = _state["outcome"].pop(nodeid, "passed")
        _write(f"slow test ends   [{_where()}]: {nodeid}: {outcome} in {time.monotonic() - started:.1f} s")


def _where() -> str:
    config = _state["config"]
    worker = getattr(config, "workerinput", {}).get("workerid", "main")
    return f"{worker} {time.strftime('%H:%M:%S')}"


def _write(line: str) -> None:
    config = _state["config"]
    reporter = config.pluginmanager.get_plugin("terminalreporter") if config is not None else None
    if reporter is not None and not hasattr(config, "workerinput"):
        if reporter._tw.width_of_current_line:  # after progress dots: a line of its own
            reporter.write("\n")
        reporter.write_line(line)
    else:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
