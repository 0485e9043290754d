"""Fuzzing ``foundry-ext average`` (issue 46, part 5): hostile options and hostile checkpoints, mostly near-valid.

The checkpoints are written once per module, in the two layouts Composer writes, by test_average_bad_input.py's
builder (``torch.save`` files, ``torch.distributed.checkpoint`` folders in one process; nothing is trained): a run's
``.pt`` files and ``latest`` link, a sharded run's folders, and checkpoints of another shape, dtype, key set, with NaN
or infinite weights, or a model value that is not a tensor. Each example adds hostile copies: a ``.pt`` file or a
sharded folder's ``.metadata`` or ``.distcp`` truncated, garbled, emptied, replaced by text, removed or made a
folder; symlink loops; then draws ``CKPT...`` among all of these and ``--weights``, ``--last``, ``--every``,
``--batches``, ``--out`` (new, existing, an input, inside the save folder, a folder, a dangling link, a missing
folder, odd names).

The promise (tests/catalog/fuzzing.py): exit 0 or 2, on 2 one line naming ``CKPT``, an option or argparse's
complaint, no traceback, within the bounds; and nothing written where it must not be: on a refusal no ``--out`` and
no partial file or folder, and the inputs (every file and link of the module's checkpoints and of the example's
hostile copies) are byte for byte unchanged whatever the outcome. What is written holds finite weights. Stages:
``refused``, ``averaged``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed.checkpoint as dcp
from hypothesis import given
from hypothesis import strategies as st

from tests.average.test_average_bad_input import _state
from tests.catalog.fuzzing import check_promise, long_timeout, profile, report, stage, time_is_up

FUZZER = "average"
PROGRESS = ("checking [", "[")  # average's progress lines on stderr: one per checkpoint checked, then averaged
BATCHES = (4, 8, 12)


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``run/`` (.pt files), ``sharded/`` (folders) and ``other/`` (checkpoints that must not average with them)."""
    root = tmp_path_factory.mktemp("average-fuzz")
    run, other, sharded = root / "run", root / "other", root / "sharded"
    run.mkdir()
    other.mkdir()
    for i, batch in enumerate(BATCHES):
        torch.save(_state("r1", batch, i), run / f"ep0-ba{batch}-rank0.pt")
        dcp.save(_state("r1", batch, 10 + i), checkpoint_id=sharded / f"ep0-ba{batch}", no_dist=True)
    os.symlink("ep0-ba12-rank0.pt", run / "latest-rank0.pt")
    os.symlink("ep0-ba12", sharded / "latest-sharded-rank0")
    odd = {
        "shape": {"net.weight": torch.zeros(5, 4)},
        "dtype": {"net.bias": torch.zeros(3, dtype=torch.float64)},
        "extra": {"extra": torch.zeros(2)},
        "nan": {"net.weight": torch.full((3, 4), float("nan"))},
        "inf": {"net.bias": torch.tensor([1.0, float("inf"), 0.0])},
        "ints": {"net.bias": torch.arange(3)},
        "text": {"net.weight": "not a tensor"},  # type: ignore[dict-item]
        "list": {"net.weight": [1.0, 2.0]},  # type: ignore[dict-item]
    }
    for name, model in odd.items():
        torch.save(_state("r1", 16, 20, **model), other / f"{name}.pt")
    torch.save(_state("r2", 16, 21), other / "other-run.pt")
    torch.save({"state": {"model": {}}}, other / "no-timestamp.pt")
    dcp.save(_state("r1", 16, 30, **odd["shape"]), checkpoint_id=other / "ep0-ba16", no_dist=True)
    dcp.save(_state("r1", 20, 31, **odd["nan"]), checkpoint_id=other / "ep0-ba20", no_dist=True)
    return root


def _tree(folder: Path, skip: Path | None = None) -> dict[str, str]:
    """Every file's hash and every link's target under ``folder`` (``skip`` and what is under it left out)."""
    found = {}
    for p in sorted(folder.rglob("*")):
        if skip is not None and (p == skip or skip in p.parents):
            continue
        if p.is_symlink():
            found[str(p)] = "-> " + os.readlink(p)
        elif p.is_file():
            found[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            found[str(p)] = "dir"
    return found


PT_EDITS = ("truncate", "truncate", "flip", "zero", "append", "empty", "text", "folder")
SHARD_EDITS = ("no metadata", "no distcp", "truncate metadata", "truncate distcp", "flip metadata", "flip distcp",
               "empty distcp", "metadata folder", "metadata loop", "extra distcp")  # fmt: skip


def _garble(path: Path, edit: str, where: float, byte: int) -> None:
    """Apply ``edit`` to the file ``path`` (a copy) at the fraction ``where`` of its length."""
    data = path.read_bytes()
    at = min(int(len(data) * where), max(len(data) - 1, 0))
    if edit.startswith("truncate"):
        path.write_bytes(data[:at])
    elif edit.startswith("flip"):
        path.write_bytes(data[:at] + bytes([data[at] ^ (byte or 1)]) + data[at + 1 :])
    elif edit == "zero":
        path.write_bytes(data[:at] + bytes(min(64, len(data) - at)) + data[at + 64 :])
    elif edit == "append":
        path.write_bytes(data + bytes([byte]) * 100)
    elif edit.startswith("empty"):
        path.write_bytes(b"")
    elif edit == "text":
        path.write_text("not a checkpoint \u2603\n")
    elif edit == "folder":
        path.unlink()
        path.mkdir()


def _hostile(root: Path, work: Path, h: dict[str, Any]) -> dict[str, Path]:
    """The example's hostile copies, by the names :func:`average_args` draws."""
    made: dict[str, Path] = {}
    pt = work / f"ep0-ba{h['batch']}-rank0.pt"
    shutil.copy(root / "run" / f"ep0-ba{h['source']}-rank0.pt", pt)
    _garble(pt, h["pt_edit"], h["where"], h["byte"])
    made["garbled.pt"] = pt
    folder = work / f"ep0-ba{h['batch']}"
    shutil.copytree(root / "sharded" / f"ep0-ba{h['source']}", folder)
    edit = h["shard_edit"]
    target = folder / (".metadata" if "metadata" in edit else "__0_0.distcp")
    if edit in ("no metadata", "no distcp"):
        target.unlink()
    elif edit == "metadata folder":
        target.unlink()
        target.mkdir()
    elif edit == "metadata loop":
        target.unlink()
        os.symlink(".metadata", target)
    elif edit == "extra distcp":
        (folder / "__1_0.distcp").write_bytes(b"\x80\x04garbage")
    else:
        _garble(target, edit, h["where"], h["byte"])
    made["garbled-sharded"] = folder
    os.symlink("loop-b.pt", work / "loop-a.pt")
    os.symlink("loop-a.pt", work / "loop-b.pt")
    made["loop.pt"] = work / "loop-a.pt"
    os.symlink(".", work / "self")
    made["self-loop"] = work / "self"
    os.symlink(root / "run" / "ep0-ba12-rank0.pt", work / "link-to-input.pt")
    made["link.pt"] = work / "link-to-input.pt"
    return made


CKPT = st.sampled_from(
    ["run/ep0-ba4-rank0.pt", "run/ep0-ba8-rank0.pt", "run/ep0-ba12-rank0.pt", "run/latest-rank0.pt",
     "sharded/ep0-ba4", "sharded/ep0-ba8", "sharded/ep0-ba12", "sharded/latest-sharded-rank0", "run", "sharded",
     "garbled.pt", "garbled.pt", "garbled-sharded", "garbled-sharded", "loop.pt", "self-loop", "link.pt",
     "other/shape.pt", "other/dtype.pt", "other/extra.pt", "other/nan.pt", "other/inf.pt", "other/ints.pt",
     "other/text.pt", "other/list.pt", "other/other-run.pt", "other/no-timestamp.pt", "other/ep0-ba16",
     "other/ep0-ba20", "other", "missing.pt", "", "-", "run/", "sharded/ep0-ba12/.metadata"]
)  # fmt: skip
NEAR = st.sampled_from(
    [["run"], ["sharded"], ["run/ep0-ba4-rank0.pt", "run/ep0-ba8-rank0.pt"], ["sharded/ep0-ba8", "sharded/ep0-ba12"],
     ["run/ep0-ba8-rank0.pt", "garbled.pt"], ["sharded/ep0-ba8", "garbled-sharded"],
     ["run/ep0-ba4-rank0.pt", "run/ep0-ba8-rank0.pt", "garbled.pt"]]
)  # fmt: skip


def _joined(values: list[float]) -> str:
    return ",".join(map(repr, values))


WEIGHTS = st.one_of(
    st.sampled_from(["uniform", "exp:0.5", "exp:1", "exp:0", "exp:2", "exp:-1", "exp:nan", "exp:", "1,1", "1,2,3",
                     "1,1,1,1", "0,0", "1,-1", "-1,-2", "nan,1", "inf,1", "1e308,1e308", "1e-320,1e-320", "1,,1",
                     ",", "", " ", "1_0,1", "١,١", "0x1,1", "True,1", "☃", "1;1", "uniform,1", "EXP:0.5"]),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=4).map(_joined),
    st.text(max_size=8),
)  # fmt: skip
COUNT = st.one_of(
    st.none(),
    st.none(),
    st.sampled_from(["2", "3", "1", "0", "-1", "2.5", "", "x", "9" * 30, "١"]),
    st.text(max_size=3),
)
RANGE = st.one_of(
    st.none(), st.none(),
    st.sampled_from(["4:12", "8:", ":8", "12:4", ":", "4", "a:b", "-1:5", "4:12:16", "", "0:99999999999999999999"]),
    st.text(max_size=5),
)  # fmt: skip
OUT = st.sampled_from(
    ["NEW", "NEW", "NEW", "NEW", "NEW", "EXISTS", "INPUT", "run/avg.pt", "sharded/avg", "run", "missing/avg.pt",
     "DANGLING", "LINK-TO-INPUT", "", "a\nb.pt", "b" * 300 + ".pt", "-x.pt", "é ☃.pt", ".average-partial"]
)  # fmt: skip


@st.composite
def average_args(draw: st.DrawFn) -> dict[str, Any]:
    ckpts = draw(NEAR) if draw(st.integers(0, 2)) else draw(st.lists(CKPT, min_size=1, max_size=4))
    return {
        "ckpts": ckpts,
        "weights": draw(st.one_of(st.none(), st.none(), WEIGHTS)),
        "last": draw(COUNT),
        "every": draw(COUNT),
        "batches": draw(RANGE),
        "out": draw(OUT),
        "equals": draw(st.booleans()),
        "hostile": {
            "source": draw(st.sampled_from(BATCHES)),
            "batch": draw(st.sampled_from([16, 16, 4, 12])),
            "pt_edit": draw(st.sampled_from(PT_EDITS)),
            "shard_edit": draw(st.sampled_from(SHARD_EDITS)),
            "where": draw(st.floats(0, 1)),
            "byte": draw(st.integers(0, 255)),
        },
    }


def _argv(a: dict[str, Any], root: Path, work: Path, made: dict[str, Path]) -> tuple[list[str], Path | None]:
    def path(name: str) -> str:
        if name in made:
            return str(made[name])
        return str(root / name) if name and name != "-" else name

    new = work / "out" / ("avg" if any("sharded" in c for c in a["ckpts"]) else "avg.pt")
    (work / "out").mkdir()
    (work / "out" / "exists.pt").write_bytes(b"x")
    os.symlink(work / "out" / "nowhere", work / "out" / "dangling")
    os.symlink(root / "run" / "ep0-ba4-rank0.pt", work / "out" / "link-to-input.pt")
    out = {
        "NEW": new,
        "EXISTS": work / "out" / "exists.pt",
        "INPUT": root / "run" / "ep0-ba4-rank0.pt",
        "DANGLING": work / "out" / "dangling",
        "LINK-TO-INPUT": work / "out" / "link-to-input.pt",
        "": None,
    }.get(a["out"], work / "out" / a["out"] if "/" not in a["out"] else root / a["out"])
    argv = ["average", *(path(c) for c in a["ckpts"])]
    for option in ("weights", "last", "every", "batches"):
        if a[option] is not None:
            argv += [f"--{option}={a[option]}"] if a["equals"] else [f"--{option}", a[option]]
    if out is None:
        argv.append("--out=")
    else:
        argv += [f"--out={out}"] if a["equals"] else ["--out", str(out)]
    return argv, out


@long_timeout  # quick tier: the short profile's 12 examples take ~1 s (small checkpoints, nothing trained)
@profile(12)
@given(a=average_args())
def test_average_keeps_the_promise(a: dict[str, Any], ckpts: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    time_is_up(FUZZER, 1)
    work = tmp_path_factory.mktemp("avg")
    (work / "in").mkdir()
    made = _hostile(ckpts, work / "in", a["hostile"])
    argv, out = _argv(a, ckpts, work, made)
    inputs_before, work_before = _tree(ckpts), _tree(work / "in")
    out_before = _tree(work / "out")
    names = ("CKPT", "--out", "--weights", "--last", "--every", "--batches", "argument", "unrecognized", "required")
    rc, _ = check_promise(argv, names=names, progress=PROGRESS)
    assert _tree(ckpts, skip=out if rc == 0 else None) == inputs_before, "an input checkpoint changed"
    assert _tree(work / "in") == work_before, "a hostile input changed"
    if rc == 2:
        assert _tree(work / "out") == out_before, "a refusal wrote or changed something in --out's folder"
        stage(FUZZER, "refused")
        return
    stage(FUZZER, "averaged")
    assert out is not None and out.exists() and str(out) not in out_before
    assert not [p for p in out.parent.iterdir() if p != out and "average-partial" in p.name]
    for name, tensor in _model(out).items():
        assert torch.isfinite(tensor).all(), f"the average's {name} is not finite, written without a word"
    if ckpts in out.parents:  # an average of one layout written beside the other's run (allowed): not kept for later
        shutil.rmtree(out) if out.is_dir() else out.unlink()


def _model(out: Path) -> dict[str, torch.Tensor]:
    if out.is_file():
        return torch.load(out, weights_only=True)["state"]["model"]
    template = _state("r1", 0, 0)["state"]["model"]
    got = {"state": {"model": {k: torch.empty_like(v) for k, v in template.items()}}}
    dcp.load(got, checkpoint_id=out, no_dist=True)
    return got["state"]["model"]


def test_zz_report_the_stages() -> None:
    """The long profile's counts (a JSON file); in the suite, that inputs get both refused and averaged."""
    report((FUZZER,), {FUZZER: [("refused",), ("averaged",)]})


# What the fuzzer found (each a regular test, fixed): case -> (CKPT..., options, a fragment of the one error line).
# Paths: the module's checkpoints, or the example's hostile copies (garbled.pt, garbled-sharded, loop.pt).
FOUND = {
    # pathlib's RuntimeError ('Symlink loop from ...') ended the command in a traceback
    "symlink-loop": (["run/ep0-ba4-rank0.pt", "loop.pt"], [], "loop-a.pt: a symbolic link loop"),
    # the safe reader named Python's exception: '... not valid torch.distributed.checkpoint metadata: IndexError: ...'
    "garbled-metadata": (["sharded/ep0-ba8", "garbled-sharded"], [], "a record cut short or out of range"),
    # an --out name that fits but whose hidden partial (.NAME.average-partial) does not: OSError traceback after the
    # checkpoints were read
    "out-name-too-long": (["run"], ["--out", "b" * 250 + ".pt"], "the name is 253 bytes; allowed: at most 238"),
    # math.fsum overflowed (OverflowError traceback) in weights_for
    "weights-overflow": (["run"], ["--weights", "1e308,1e308,1"], "sum to more than the largest float"),
    # a NaN (or infinite) model tensor was averaged into a NaN checkpoint, written without a word
    "nan-weights": (["run/ep0-ba4-rank0.pt", "other/nan.pt"], [], "other/nan.pt: model tensor 'net.weight' holds NaN"),
    "inf-weights": (["run/ep0-ba4-rank0.pt", "other/inf.pt"], [], "model tensor 'net.bias' holds NaN or infinite"),
    # '--' as an option's value beside the nargs="+" CKPT: argparse set the option to [] without a word, then
    # AttributeError / TypeError tracebacks (fixed for every command: foundry_ext.cli._parse)
    "weights-dashdash": (["run"], ["--weights", "--"], "argument --weights: expected one argument"),
    "every-dashdash": (["run"], ["--every", "--"], "argument --every: expected one argument"),
    "nan-weights-sharded": (["sharded/ep0-ba8", "other/ep0-ba20"], [], "tensor 'state.model.net.weight' holds NaN"),
}


@pytest.mark.parametrize("case", sorted(FOUND))
def test_what_the_fuzzer_found(case: str, ckpts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    given, options, expected = FOUND[case]
    hostile = {"source": 4, "batch": 16, "pt_edit": "truncate", "shard_edit": "flip metadata", "where": 0.0, "byte": 0}
    (tmp_path / "in").mkdir()
    made = _hostile(ckpts, tmp_path / "in", hostile)
    (tmp_path / "out").mkdir()
    monkeypatch.chdir(tmp_path / "out")  # a relative --out is written here
    argv = ["average", *(str(made.get(c, ckpts / c)) for c in given), *options]
    if "--out" not in options:
        argv += ["--out", "avg.pt" if "sharded" not in "".join(given) and "ba20" not in "".join(given) else "avg"]
    before = _tree(ckpts)
    rc, line = check_promise(argv, names=("CKPT", "--out", "--weights", "--every"), progress=PROGRESS)
    assert rc == 2 and expected in line, line
    assert _tree(ckpts) == before and list((tmp_path / "out").iterdir()) == []
