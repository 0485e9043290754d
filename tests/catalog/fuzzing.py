"""What the fuzzers of run logs, LAW.json files and ``anneal`` options share (tests/catalog/test_fuzz_*.py).

The promise checked for every generated input: the command (``main`` of the CLI, in this process) ends with status 0
or 2, prints no Python traceback or exception name, on status 2 prints one line, and stays within the time and
memory bounds below. How far each input gets is counted by stage (a hypothesis event too:
``--hypothesis-show-statistics``) and, in the long profile, written to ``FOUNDRY_EXT_FUZZ_REPORT`` (a JSON file).

Profiles: the suite runs a few examples of each fuzzer (derandomized). ``FOUNDRY_EXT_FUZZ=long`` runs up to
``FOUNDRY_EXT_FUZZ_EXAMPLES`` examples per fuzzer (default 100,000) until its share of ``FOUNDRY_EXT_FUZZ_SECONDS``
(default 3,600, split evenly between the fuzzers of one file) has passed.
"""

from __future__ import annotations

import json
import os
import re
import resource
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings

from tests.support.cli import run_cli

LONG = os.environ.get("FOUNDRY_EXT_FUZZ") == "long"
SECONDS = float(os.environ.get("FOUNDRY_EXT_FUZZ_SECONDS", "3600"))
SECONDS_PER_INPUT = 10.0  # CPU seconds of one command on one input (the bound)
# wall seconds: the long profile runs at nice 19 on a machine shared with other work, where a 2 s input can wait
# a minute for a core; a hang or a sleep still fails
WALL_SECONDS_PER_INPUT = 300.0
RSS_BOUND_MB = 2_000  # the test process's peak resident memory, whatever the inputs
PYTHON_TEXT = re.compile(
    r"Traceback|\b(Type|Value|Key|Attribute|Index|ZeroDivision|Overflow|Recursion|Memory|Runtime|Assertion|"
    r"Unicode(De|En)code|NotImplemented|OS|Lookup|Name|Permission|FileNotFound|IsADirectory|JSONDecode)Error\b"
)
STAGES: dict[str, Counter[str]] = defaultdict(Counter)
_STARTED: dict[str, float] = {}
_FIRST = time.monotonic()

#: the long profile may run for hours: pytest's 15-minute per-test timeout (pyproject) is lifted for it
long_timeout = pytest.mark.timeout(int(SECONDS) + 900) if LONG else pytest.mark.timeout(900)


def profile(short: int) -> Any:
    """hypothesis settings: ``short`` derandomized examples in the suite, many in the long profile."""
    if LONG:
        examples = int(os.environ.get("FOUNDRY_EXT_FUZZ_EXAMPLES", "100000"))
        return settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    return settings(
        max_examples=short, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), database=None
    )


def time_is_up(fuzzer: str, share: int) -> None:
    """Long profile: skip the rest of ``fuzzer``'s examples once its ``1/share`` of the seconds has passed."""
    if not LONG:
        return
    start = _STARTED.setdefault(fuzzer, time.monotonic())
    if time.monotonic() - start > SECONDS / share:
        pytest.skip(f"long profile: {sum(STAGES[fuzzer].values())} inputs to {fuzzer}")


def stage(fuzzer: str, name: str) -> None:
    """Count one input of ``fuzzer`` reaching stage ``name``."""
    event(f"{fuzzer}: {name}")
    STAGES[fuzzer][name] += 1


def check_promise(
    args: list[str],
    env: dict[str, str] | None = None,
    names: tuple[str, ...] = (),
    one_line: bool = True,
    progress: tuple[str, ...] = (),
) -> tuple[int, str]:
    """Run ``args``; assert the promise; return the status and the error line (``""`` on status 0).

    ``names``: on status 2, the line must hold one of them (the file, key or option the input got wrong).
    ``one_line``: on status 2, stderr is one error line (besides warnings, notes and argparse's usage); ``validate``
    lists every problem instead. ``progress``: the starts of the progress lines the command prints to stderr as it
    works (``average``'s ``checking [1/3] ...``), which may come before the error line.
    """
    start, cpu = time.monotonic(), time.process_time()
    rc, out, err = run_cli(*args, env=env)
    seconds, wall = time.process_time() - cpu, time.monotonic() - start
    assert wall < WALL_SECONDS_PER_INPUT, f"{wall:.1f} s (wall) for {args}"
    text = out + err
    assert rc in (0, 2), f"status {rc} for {args}:\n{text[-3000:]}"
    assert not PYTHON_TEXT.search(text), f"Python error text for {args}:\n{text[-3000:]}"
    assert seconds < SECONDS_PER_INPUT, f"{seconds:.1f} CPU s for {args}"
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert rss_mb < RSS_BOUND_MB, f"peak RSS {rss_mb:.0f} MB after {args}"
    if rc == 0 or not one_line:
        return rc, ""
    lines = [line for line in err.splitlines() if line.startswith("foundry-ext")]
    allowed = ("foundry-ext", "warning: ", "note: ", "usage: ", " ", *progress)  # argparse's usage lines are indented
    others = [line for line in err.splitlines() if not line.startswith(allowed)]
    assert len(lines) == 1 and not others, f"not one error line for {args}:\n{err[-3000:]}"
    if names:
        assert any(n in lines[0] for n in names), f"the error names none of {names}: {lines[0]}"
    return 2, lines[0]


def report(fuzzers: tuple[str, ...], least: dict[str, list[tuple[str, ...]]]) -> None:
    """Write the counts (long profile, ``FOUNDRY_EXT_FUZZ_REPORT``); in the suite, assert that inputs get far.

    ``least``: for each fuzzer, groups of stages: the short profile must reach at least one stage of each group
    (a generator whose inputs all fail at the first check tests nothing; one whose inputs all pass, little).
    """
    path = os.environ.get("FOUNDRY_EXT_FUZZ_REPORT")
    if path:
        # every fuzzer run in this process: several files run together write one report, each file's call the counts
        # so far
        doc = {f: {**STAGES[f], "inputs": sum(STAGES[f].values())} for f in sorted({*fuzzers, *STAGES})}
        load = os.getloadavg()
        doc["_run"] = {"seconds": round(time.monotonic() - _FIRST), "loadavg_at_end": [round(x, 2) for x in load]}
        Path(path).write_text(json.dumps(doc, indent=1))
    if LONG:
        return
    for fuzzer in fuzzers:
        counts = STAGES[fuzzer]
        if not counts:  # that fuzzer was deselected
            continue
        for group in least.get(fuzzer, []):
            assert any(counts[name] > 0 for name in group), (fuzzer, group, dict(counts))
