"""Shared fixtures: the offline demo data, and real training runs through the ``composer`` launcher."""

from __future__ import annotations

import contextlib
import functools
import json
import re
import resource
from pathlib import Path
from typing import Any

import pytest

from foundry_ext.demo_data import DEFAULT_SEED, FORMAT_VERSION, read_marker, write_demo_data
from tests.support.launcher import REPO, RunComposer, TrainRun, run_train
from tests.support.slow_progress import (  # noqa: F401  (hooks: a line when a slow test starts and ends, issue 46)
    pytest_collection_finish,
    pytest_runtest_logfinish,
    pytest_runtest_logreport,
    pytest_runtest_logstart,
)


def pytest_configure(config: pytest.Config) -> None:
    """Let this process open as many files as the machine allows (the soft limit up to the hard one).

    The session trains about twenty times in this process (benchmark smoke runs, lr-find, Trainer tests). Before
    ``foundry_ext.streaming_cleanup`` closed them, every run kept its StreamingDatasets' ``/dev/shm`` files open
    until the process exited (streaming registers their cleanup with ``atexit``): ~400 descriptors by the middle of
    the suite, and with a 256 limit every later test that opened a file or started a process failed with
    ``OSError: [Errno 24] Too many open files``. The suite now passes under a hard limit of 256; the higher limit is
    a margin for a test that trains without ``streaming_cleanup``.
    """
    del config  # unused
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = 65536 if hard == resource.RLIM_INFINITY else hard  # Linux refuses an unlimited number of files
    if soft != resource.RLIM_INFINITY and soft < target:
        with contextlib.suppress(ValueError, OSError):  # a smaller limit stays, and test.sh reports it on failure
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


# Markers that say why a test is heavy; each implies ``slow``, which the quick tier (``scripts/test.sh --quick``,
# ``-m 'not slow'``) deselects. Registered in pyproject.toml [tool.pytest.ini_options] markers.
HEAVY = ("launcher", "docs_training", "kills_mid_run")
# A docs block that trains, runs an LR range test or a benchmark: the ``docs_training`` marker, found from its text.
# Test functions measured over 2.5 s (tests/support/durations.py writes the file from a JUnit report): slow too.
MEASURED = json.loads((REPO / "tests" / "durations.json").read_text())
# (or reads what training wrote: under runs/, or docs/average.md's averages of those checkpoints, out/avg*)
DOCS_TRAINING = re.compile(
    r"\bcomposer\b|lr-find|lr_find\(|scripts/demo\.sh|bench/bench_\w+\.py|train_from_yaml|\bruns/|\bout/avg"
)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: the markers added here count
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark what is heavy from what a test uses, so that no heavy test depends on someone remembering a decorator.

    * a test using the ``run_composer`` fixture (directly or through its fixtures) runs the real launcher: ``launcher``;
    * a docs block (a Sybil item) whose text runs the launcher, an LR range test, the demo or a benchmark:
      ``docs_training``;
    * every test marked ``launcher`` or ``docs_training``, and every test function listed in
      ``tests/durations.json`` (measured over 2.5 s): ``slow``.
    """
    previous: pytest.Item | None = None
    for item in items:
        skipped = _skip_next(previous)  # a block under `skip: next` is never run: not heavy (and Sybil's skip state
        previous = item  # breaks if the directive runs without the block it skips)
        function = getattr(item, "originalname", None)
        if function is not None and f"{item.path.relative_to(REPO).as_posix()}::{function}" in MEASURED:
            item.add_marker(pytest.mark.slow)
        if "run_composer" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.launcher)
        example = getattr(item, "example", None)
        if example is not None and not skipped and DOCS_TRAINING.search(str(example.parsed)):
            item.add_marker(pytest.mark.docs_training)
        if any(item.get_closest_marker(name) for name in HEAVY) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: every worker collects, and orders, alike
        schedule_order(items)


def schedule_order(items: list[Any]) -> None:
    """Sort ``items`` (stable) by :func:`_order`, and within it the files that hold a ``slow`` test first.

    The quick files (seconds each) then come last and even out the two workers' ends: in collection order a heavy
    file (the release build, a docs page that trains) could be handed out last while the other worker sat idle.
    """
    heavy = {_scope(item.nodeid) for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: (_order(item.nodeid), _scope(item.nodeid) not in heavy))


# pytest-xdist (`bash scripts/test.sh`: two workers) hands out scopes, whole, in the workers' collection order (above).
# A scope is a test file, so a module's fixtures are built once and a docs page's blocks run in order on one worker
# (Sybil's blocks of a page share a namespace and a folder). The files with a test marked `kills_mid_run` (it SIGKILLs
# a launched run at a moment it waits for: mid-write, mid-batch) are handed out first, then the other files that start
# ranks of their own (tests/support/multirank.py or `composer -n 2`: the heaviest, the world-size changes among them),
# then the other files with a slow test, then the quick files: the longest work is handed out first
# (schedule_order). The kill files once formed one scope, run one after another on one worker so that two never
# shared the cores; they share them with the other worker's 2-rank runs all the same (each moment is a state of the
# folder or the log that the test waits for, under any load), and that one worker's 25 minutes became the suite's
# length while the other sat idle (this round's fresh-clone run, docs/contributing.md).
# (Not xdist's own `--dist loadgroup`: pytest-xdist 3.8 marks a group by rewriting a private attribute of the test
# that pytest 9 no longer reads.)
_KILLS = re.compile(r"pytest\.mark\.kills_mid_run")
_STARTS_RANKS = re.compile(r"tests\.support\.multirank|\"-n\", \"2\"")


@functools.cache
def _text(path: str) -> str:
    file = REPO / path
    return file.read_text() if file.suffix == ".py" and file.is_file() else ""


def _scope(nodeid: str) -> str:
    """The scope a test is scheduled with: its file (``tests/x/test_y.py``, ``docs/cli.md``)."""
    return nodeid.split("::", 1)[0]


def _order(nodeid: str) -> int:
    """0: a file with a ``kills_mid_run`` test, 1: another file that starts ranks, 2: the rest."""
    text = _text(_scope(nodeid))
    if _KILLS.search(text):
        return 0
    return 1 if _STARTS_RANKS.search(text) else 2


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``-n``/``--tx`` with a load mode (``load``, the default, or ``loadscope``/``loadfile``/``loadgroup``):
    the scopes above, in the workers' collection order (not re-sorted by size)."""
    if config.getoption("dist") not in ("load", "loadscope", "loadfile", "loadgroup"):
        return None  # each, worksteal: xdist's own
    from xdist.scheduler import LoadScopeScheduling

    class ByScope(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    config.option.loadscopereorder = False
    return ByScope(config, log)


def _skip_next(item: pytest.Item | None) -> bool:
    """Whether ``item`` is a Sybil ``<!-- skip: next ... -->`` directive."""
    example = getattr(item, "example", None)
    parsed = getattr(example, "parsed", None)
    return isinstance(parsed, tuple) and len(parsed) == 2 and parsed[0] == "next"


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo data folder (tokenizer/, train/, val/): the repository's ./demo-data when it is current, else fresh.

    Never modifies ./demo-data: a missing, stale or foreign one is left alone and the data is written to a
    temporary folder instead, once per session.
    """
    local = REPO / "demo-data"
    marker = read_marker(local)
    if marker is not None and marker.get("seed") == DEFAULT_SEED and marker.get("format") == FORMAT_VERSION:
        return local
    return write_demo_data(tmp_path_factory.mktemp("demo") / "demo-data").path


@pytest.fixture(scope="session")
def run_composer(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> RunComposer:
    """``run_composer(yaml, *overrides, cwd=None, timeout=300, check=True)``: a real launcher run on the demo data.

    Session-scoped, so module fixtures can share one run. ``variables.data_local`` points at :func:`demo_data`;
    ``cwd`` defaults to a fresh temporary folder, so relative ``./runs/...`` folders land there, not in the repo.
    """

    def run(
        yaml_path: str | Path, *overrides: str, cwd: Path | None = None, timeout: float = 300, check: bool = True
    ) -> TrainRun:
        return run_train(
            yaml_path,
            f"variables.data_local={demo_data}",
            *overrides,
            cwd=cwd or tmp_path_factory.mktemp("run"),
            timeout=timeout,
            check=check,
        )

    return run
