"""Fuzzing ``validate`` and ``plot`` (issue 34): generated train YAMLs and override lines, mostly near-valid.

Each example starts from one of the shipped ``yamls/*.yaml`` and applies a few mutations (drop a key, replace a value
by another type, an extreme number, unicode, a deep nesting, add an unknown key) and, sometimes, ``key=value``
override lines. The promise checked for each: ``validate`` (and ``plot`` for what validates) ends with status 0 or 2,
prints no Python traceback or exception name, and stays within the time and memory bounds below.

How far the inputs get is reported as hypothesis events (``pytest --hypothesis-show-statistics``): ``stage: not
parsed`` (YAML or override refused), ``stage: refused`` (parsed, a problem named), ``stage: valid``, ``stage: plotted``.

Profiles: the suite runs a short one (``SHORT`` examples, in-process). ``FOUNDRY_EXT_FUZZ=long`` runs
``FOUNDRY_EXT_FUZZ_EXAMPLES`` examples (default 100,000) until ``FOUNDRY_EXT_FUZZ_SECONDS`` (default 3,600) have
passed, and writes the stage counts to ``FOUNDRY_EXT_FUZZ_REPORT`` (a JSON file) when set; docs/cli.md gives the
command and the figures of the longest run so far.
"""

from __future__ import annotations

import json
import math
import os
import re
import resource
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.support.cli import run_cli
from tests.support.launcher import REPO

YAMLS = sorted((REPO / "yamls").glob("*.yaml"))
LONG = os.environ.get("FOUNDRY_EXT_FUZZ") == "long"
SHORT = 25
SECONDS_PER_INPUT = 10.0  # CPU seconds of validate or plot of one input
# wall seconds: the long profile runs at nice 19 on a machine shared with other work, where a 2 s input can wait
# a minute for a core; a hang or a sleep still fails
WALL_SECONDS_PER_INPUT = 300.0
RSS_BOUND_MB = 2_000  # the process's peak resident memory, whatever the inputs
PYTHON_TEXT = re.compile(
    r"Traceback|\b(Type|Value|Key|Attribute|Index|ZeroDivision|Overflow|Recursion|Memory|Runtime|Assertion|"
    r"Unicode(De|En)code|NotImplemented|OS|Lookup|Name)Error\b"
)
STAGES: Counter[str] = Counter()
_START = time.monotonic()
_DEADLINE = _START + float(os.environ.get("FOUNDRY_EXT_FUZZ_SECONDS", "3600"))


def _base(path: Path) -> dict[str, Any]:
    text = path.read_text()
    return yaml.safe_load(text)


BASES = {p.name: _base(p) for p in YAMLS}

EXTREME = st.sampled_from(
    [0, -1, 1, 2, 1e308, -1e308, math.inf, -math.inf, math.nan, 10**40, 2**63, 1e-320, 0.5, True, False, None]
)
TEXT = st.one_of(
    st.sampled_from(["", " ", "abc", "1dur", "0ba", "-5ba", "2.5ba", "1e9ba", "10tok", "1ep", "0.5dur", "${x}",
                     "${oc.env:HOME}", "ba", "100", "nan", "inf", "é", "☃", "\u202e", "\x00", "10\u00a0ba", "1_000ba",
                     "StepLR", "cosine", "warmup_stable_decay", "latest-rank0.pt", "../x", "~", "{rank}"]),
    st.text(max_size=12),
)  # fmt: skip
DURATION = st.builds(
    lambda v, u: f"{v}{u}",
    st.one_of(st.integers(-5, 10**12), st.floats(allow_nan=True, allow_infinity=True)),
    st.sampled_from(["ba", "ep", "tok", "sp", "dur", "sec", "iter", ""]),
)
LEAF = st.one_of(EXTREME, TEXT, DURATION, st.integers(-(10**20), 10**20), st.floats())
VALUE = st.recursive(
    LEAF, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)), max_leaves=6
)


def _paths(cfg: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(cfg, dict):
        for k, v in cfg.items():
            found += _paths(v, (*prefix, k))
    elif isinstance(cfg, list):
        for i, v in enumerate(cfg):
            found += _paths(v, (*prefix, i))
    return found


def _nest(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"k": value}
    return value


@st.composite
def mutated_configs(draw: st.DrawFn) -> tuple[str, dict[str, Any] | str, list[str]]:
    name = draw(st.sampled_from(sorted(BASES)))
    cfg = json.loads(json.dumps(BASES[name]))
    for _ in range(draw(st.integers(0, 3))):
        paths = _paths(cfg)
        path = draw(st.sampled_from(paths))
        *head, last = path
        parent = cfg
        for part in head:
            parent = parent[part]
        kind = draw(st.sampled_from(["drop", "replace", "replace", "replace", "extra", "deep"]))
        if kind == "drop":
            del parent[last]
        elif kind == "replace":
            parent[last] = draw(VALUE)
        elif kind == "extra" and isinstance(parent, dict):
            parent[draw(TEXT) or "x"] = draw(VALUE)
        elif kind == "deep":
            parent[last] = _nest(draw(st.sampled_from([5, 50, 120, 400])))
    overrides = draw(
        st.lists(
            st.builds(
                lambda k, v: f"{k}={v}",
                st.sampled_from(["max_duration", "scheduler.name", "scheduler.t_warmup", "scheduler.alpha_f",
                                 "optimizer.lr", "global_train_batch_size", "callbacks.lr_monitor", "x.y.z", "",
                                 "scheduler", "save_folder", "scheduler.t_max"]),
                st.one_of(TEXT, DURATION, st.integers(-3, 10**12).map(str)),
            ),
            max_size=2,
        )
    )  # fmt: skip
    return name, cfg, overrides


def _dump(cfg: Any) -> str:
    try:
        return yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True)
    except RecursionError:  # 400 levels: written by hand, as a user would
        return "x: " + "{k: " * 400 + "1" + "}" * 400 + "\n"


def _run(args: list[str]) -> tuple[int, str, float, float]:
    start, cpu = time.monotonic(), time.process_time()
    rc, out, err = run_cli(*args)
    return rc, out + err, time.process_time() - cpu, time.monotonic() - start


def _check_promise(args: list[str]) -> tuple[int, str]:
    rc, text, seconds, wall = _run(args)
    assert wall < WALL_SECONDS_PER_INPUT, f"{wall:.1f} s (wall) for {args}"
    assert rc in (0, 2), f"status {rc} for {args}:\n{text[-3000:]}"
    assert not PYTHON_TEXT.search(text), f"Python error text for {args}:\n{text[-3000:]}"
    assert seconds < SECONDS_PER_INPUT, f"{seconds:.1f} CPU s for {args}"
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert rss_mb < RSS_BOUND_MB, f"peak RSS {rss_mb:.0f} MB after {args}"
    return rc, text


def _stage(stage: str) -> None:
    event(f"stage: {stage}")
    STAGES[stage] += 1


def _fuzz_once(example: tuple[str, Any, list[str]], tmp_path: Path) -> None:
    _name, cfg, overrides = example
    config = tmp_path / "fuzz.yaml"
    config.write_text(_dump(cfg), encoding="utf-8")
    os.chdir(REPO)  # the tiny examples read ./demo-data's index
    rc, text = _check_promise(["validate", str(config), *overrides])
    if "invalid YAML" in text or "override" in text.split("\n", 1)[0]:
        _stage("not parsed")
        return
    if rc == 2:
        _stage("refused")
        return
    _stage("valid")
    rc, text = _check_promise(["plot", str(config), *overrides, "--out", str(tmp_path / "lr.png"), "--points", "50"])
    _stage("plotted" if rc == 0 else "plot refused")


def _settings() -> Any:
    if LONG:
        examples = int(os.environ.get("FOUNDRY_EXT_FUZZ_EXAMPLES", "100000"))
        return settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    return settings(max_examples=SHORT, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The first ``plot`` of each kind imports matplotlib, torch, Composer: once (~10 s on a loaded 2-core machine),
    not timed as an input's cost. The bounds are then those of one input in a warm process."""
    here = os.getcwd()
    os.chdir(REPO)
    try:
        out = tmp_path_factory.mktemp("warm") / "lr.png"
        for path in YAMLS:
            assert _run(["validate", str(path)])[0] == 0
            assert _run(["plot", str(path), "--out", str(out), "--points", "50"])[0] == 0
    finally:
        os.chdir(here)


@pytest.mark.slow
# the long profile runs for FOUNDRY_EXT_FUZZ_SECONDS: pytest's 15-minute per-test timeout (pyproject) is lifted
@pytest.mark.timeout(int(os.environ.get("FOUNDRY_EXT_FUZZ_SECONDS", "3600")) + 900 if LONG else 900)
@_settings()
@given(example=mutated_configs())
def test_validate_and_plot_keep_the_promise(
    example: tuple[str, Any, list[str]], tmp_path_factory: pytest.TempPathFactory, warm: None
) -> None:
    if LONG and time.monotonic() > _DEADLINE:  # the long profile's time is up: its counts are in STAGES
        pytest.skip(f"long profile: {sum(STAGES.values())} inputs in {os.environ.get('FOUNDRY_EXT_FUZZ_SECONDS')} s")
    here = os.getcwd()
    try:
        _fuzz_once(example, tmp_path_factory.mktemp("fuzz"))
    finally:
        os.chdir(here)


def test_zz_report_the_stages() -> None:
    """The long profile's counts (a JSON file); in the short profile, that the inputs get past the parser."""
    report = os.environ.get("FOUNDRY_EXT_FUZZ_REPORT")
    if report:
        figures = {**STAGES, "inputs": sum(v for k, v in STAGES.items() if k in ("not parsed", "refused", "valid"))}
        Path(report).write_text(json.dumps({**figures, "seconds": round(time.monotonic() - _START)}, indent=1))
    if STAGES and not LONG:
        assert STAGES["refused"] + STAGES["valid"] > STAGES["not parsed"], STAGES


# What the fuzzer found (each a regular test, fixed).
FOUND = {
    # run_clock joined an int split into the dataset's path: TypeError traceback from os.path.join
    "split-int": ("tiny-inverse-sqrt.yaml", ("train_loader", "dataset", "split"), -1),
    # OmegaConf's message named the Python exception: "TypeError raised while resolving interpolation"
    "variables-list": ("mpt-125m-multistep.yaml", ("variables",), []),
    # max_duration 2**64 batches validated, then plot crashed in matplotlib (TypeError: ufunc 'isfinite')
    "max_duration-2**64": ("mpt-125m-multistep.yaml", ("max_duration",), "1.8446744073709556e+19ba"),
    # the plateau's monitor check looked model.name up in a dict: TypeError (unhashable type: 'list') in validate
    "model.name-list": ("tiny-plateau.yaml", ("model", "name"), []),
    "model.name-mapping": ("tiny-plateau.yaml", ("model", "name"), {"a": 1}),
}


@pytest.mark.parametrize("case", list(FOUND))
def test_what_the_fuzzer_found(case: str, tmp_path: Path) -> None:
    name, path, value = FOUND[case]
    cfg = json.loads(json.dumps(BASES[name]))
    parent = cfg
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    config = tmp_path / "found.yaml"
    config.write_text(_dump(cfg))
    here = os.getcwd()
    os.chdir(REPO)
    try:
        rc, text = _check_promise(["validate", str(config)])
    finally:
        os.chdir(here)
    assert rc in (0, 2) and "Traceback" not in text, text
    if rc == 0:
        os.chdir(REPO)
        try:
            rc, text = _check_promise(["plot", str(config), "--out", str(tmp_path / "lr.png"), "--points", "50"])
        finally:
            os.chdir(here)
