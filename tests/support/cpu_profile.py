"""CPU seconds per test, the suite's own and its launched processes': where the suite's time goes (issue 42).

The suite's wall time on two cores is bounded below by its CPU time over two, and most of that CPU is spent in the
processes a test launches (``composer -n 2 train.py``: the launcher's and each rank's imports), which pytest's
``--durations`` cannot tell from waiting. Opt in with ``-p tests.support.cpu_profile`` and a file to append to:

    FOUNDRY_EXT_CPU_PROFILE=/tmp/cpu.jsonl bash scripts/test.sh -p tests.support.cpu_profile

Each test (setup, call and teardown; a module fixture's work is counted in the first test that uses it) appends one
JSON line: ``{"test", "worker", "start", "wall", "self", "children"}``: the pytest-xdist worker (``gw0``; ``main``
without xdist), the start as seconds since the epoch (to lay the workers' tests on one timeline), the rest seconds.
``children`` is ``RUSAGE_CHILDREN``: the processes this worker waited for, and their own waited-for children (the
launcher waits for its ranks), killed ones included.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Generator

import pytest


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    del nextitem  # unused
    path = os.environ.get("FOUNDRY_EXT_CPU_PROFILE")
    start = time.time()
    wall, own, children = time.monotonic(), _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    yield
    if path:
        row = {
            "test": item.nodeid,
            # the config's, not the environment's PYTEST_XDIST_WORKER: a pytest run a test starts inherits that
            "worker": getattr(item.config, "workerinput", {}).get("workerid", "main"),
            "start": round(start, 2),
            "wall": round(time.monotonic() - wall, 2),
            "self": round(_cpu(resource.RUSAGE_SELF) - own, 2),
            "children": round(_cpu(resource.RUSAGE_CHILDREN) - children, 2),
        }
        with open(path, "a") as out:
            out.write(json.dumps(row) + "\n")
