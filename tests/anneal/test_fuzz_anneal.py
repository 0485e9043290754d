"""Fuzzing ``foundry-ext anneal``'s options (issue 34) against a real checkpoint, mostly near-valid.

The checkpoint is tests/anneal/conftest.py's stable run (a tiny Composer run, 8 batches of a 1000-batch budget, its
session fixture: this file adds no training). Generated: ``--decay`` strings (numbers in every unit, fractions,
exponents, signs, spaces, unicode digits, garbage), ``--shape``, ``--floor``, ``key=value`` overrides (the branch's
``run_name`` / ``save_folder`` and keys of the stable YAML), ``--out`` paths (a new file, a missing folder, a folder,
the YAML itself, odd names), the checkpoint as a folder or its file, options as ``--opt VALUE`` or ``--opt=VALUE``.
The promise (tests/catalog/fuzzing.py): exit 0 or 2, on 2 one line naming the option, file or key, no traceback,
within the bounds; what ``anneal`` writes, ``validate`` accepts (or refuses in one line). Stages: ``refused``,
``written``, ``written, validated``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.anneal.conftest import Runs
from tests.catalog.fuzzing import check_promise, long_timeout, profile, report, stage, time_is_up

FUZZER = "anneal"
NUMBER = st.one_of(
    st.integers(-5, 2000).map(str),
    st.sampled_from(["0", "0.5", "0.2", "1e2", "1e400", "nan", "inf", "-0", "8.0", "1_0", "١٠", "", " 8", "0x10",
                     "9" * 30, "2.5", ".1", "1.", "7"]),
)  # fmt: skip
UNIT = st.sampled_from(["ba", "ba", "sp", "tok", "dur", "ep", "", "BA", " ba", "batches", "%", "s"])
DECAY = st.one_of(st.builds(lambda n, u: f"{n}{u}", NUMBER, UNIT), st.text(max_size=8))
SHAPE = st.one_of(
    st.sampled_from(["linear", "sqrt", "cosine", "square", "Linear", "1-sqrt", "", "exp"]), st.text(max_size=6)
)
FLOOR = st.one_of(
    st.sampled_from(["0", "0.1", "0.5", "1", "1.5", "-0.1", "nan", "inf", "1e-9", "", "abc", "0,1", "1e400"]),
    st.floats(-1, 2).map(repr),
)
OVERRIDE = st.builds(
    lambda k, v: f"{k}={v}",
    st.sampled_from(["run_name", "save_folder", "max_duration", "optimizer.lr", "global_train_batch_size",
                     "scheduler.t_warmup", "model.d_model", "save_num_checkpoints_to_keep", "x.y", "", "seed"]),
    st.one_of(NUMBER, DECAY, st.sampled_from(["stable", "{run_name}", "/nonexistent/x", "0.001", "2000ba", "16"])),
)  # fmt: skip
OUT = st.sampled_from(["branch.yaml", "branch.yaml", "branch.yaml", "branch.yaml", "missing/branch.yaml", ".",
                       "CONFIG", "é ☃.yaml", "b" * 300 + ".yaml", "-x.yaml", "out.yml"])  # fmt: skip


@st.composite
def anneal_args(draw: st.DrawFn) -> dict:
    near = draw(st.integers(0, 3))  # how many of the four options are drawn from the hostile pools (mostly few)
    hostile = set(draw(st.permutations(["decay", "shape", "floor", "overrides"]))[:near])
    return {
        "decay": draw(DECAY if "decay" in hostile else st.sampled_from(["8ba", "0.5dur", "32sp", "64ba", "1ba"])),
        "shape": draw(SHAPE if "shape" in hostile else st.sampled_from([None, "linear", "sqrt", "cosine", "square"])),
        "floor": draw(FLOOR if "floor" in hostile else st.sampled_from([None, "0", "0.1", "0.5"])),
        "overrides": draw(st.lists(OVERRIDE, min_size=1, max_size=2)) if "overrides" in hostile else [],
        "out": draw(OUT),
        "checkpoint": draw(st.sampled_from(["folder", "file", "file", "file", "missing"])),
        "equals": draw(st.booleans()),
    }


def _args(a: dict, runs: Runs, tmp: Path) -> tuple[list[str], Path]:
    checkpoint = {
        "folder": runs.stable,
        "file": runs.stable / "ep0-ba8-rank0.pt",
        "missing": runs.stable / "ep0-ba80-rank0.pt",
    }[a["checkpoint"]]
    out = runs.config if a["out"] == "CONFIG" else tmp / a["out"]
    argv = ["anneal", str(checkpoint), str(runs.config), *a["overrides"]]
    for option, value in (("--decay", a["decay"]), ("--shape", a["shape"]), ("--floor", a["floor"]), ("--out", out)):
        if value is not None:
            argv += [f"{option}={value}"] if a["equals"] else [option, str(value)]
    return argv, out


@pytest.mark.slow  # the session's stable run (tests/anneal/conftest.py) is trained once for every anneal test
@long_timeout
@profile(12)
@given(a=anneal_args())
def test_anneal_options_keep_the_promise(a: dict, runs: Runs, tmp_path_factory: pytest.TempPathFactory) -> None:
    time_is_up(FUZZER, 1)
    tmp = tmp_path_factory.mktemp("fuzz")
    argv, out = _args(a, runs, tmp)
    before = runs.config.read_bytes()
    names = ("--decay", "--shape", "--floor", "--out", "CHECKPOINT", "CONFIG", "save_folder", "run_name",
             *(o.partition("=")[0].strip() for o in a["overrides"]), "argument", "unrecognized")  # fmt: skip
    rc, _ = check_promise(argv, names=names)
    assert runs.config.read_bytes() == before  # the stable run's YAML is never written
    if rc == 2:
        assert not os.path.lexists(out) or out == runs.config or os.path.isdir(out)
        stage(FUZZER, "refused")
        return
    stage(FUZZER, "written")
    rc, _ = check_promise(["validate", str(out)], one_line=False)
    if rc == 0:
        stage(FUZZER, "written, validated")


def test_zz_report_the_stages() -> None:
    """The long profile's counts (a JSON file); in the suite, that inputs get both refused and written."""
    report((FUZZER,), {FUZZER: [("refused",), ("written",)]})


# What the fuzzer found (each a regular test, fixed).
FOUND = {
    # the value was printed raw: a carriage return sent the cursor back and the line's start was overwritten
    # (fixed for every command where the error line is printed: foundry_ext.text.one_line)
    "decay-carriage-return": ({"decay": "\r"}, "error: --decay \\r: '\\r' is not a duration"),
    "shape-line-separator": ({"shape": "a\u2028b"}, "error: --shape a\\u2028b: not a decay shape"),
    # a valid branch whose --out name is over the file system's 255 bytes: OSError traceback from write_branch
    "out-name-too-long": ({"out": "b" * 300 + ".yaml"}, "--out {out}: cannot write: File name too long"),
}


@pytest.mark.parametrize("case", list(FOUND))
def test_what_the_fuzzer_found(case: str, runs: Runs, tmp_path: Path) -> None:
    given, expected = FOUND[case]
    a = {"decay": "8ba", "shape": None, "floor": None, "overrides": [], "out": "branch.yaml", "checkpoint": "file",
         "equals": False, **given}  # fmt: skip
    argv, out = _args(a, runs, tmp_path)
    rc, line = check_promise(argv, names=("--decay", "--shape", "--out"))
    assert rc == 2 and expected.format(out=out) in line, line
    assert not os.path.lexists(out) and not list(tmp_path.glob("*.tmp"))
