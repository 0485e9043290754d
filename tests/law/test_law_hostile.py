"""Hostile and unusual LAW.json files, grids and options of ``law``: one line naming the key or option, exit 2.

The corpus of issue 34's "law's inputs" for LAW.json, grids and options (run logs are the run-log reader's).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from foundry_ext.cli import main
from tests.law.paper import CURVES, TRAIN
from tests.support.launcher import REPO

TINY_WSD = str(REPO / "yamls/tiny-wsd.yaml")
TINY_PLATEAU = str(REPO / "yamls/tiny-plateau.yaml")


@pytest.fixture(scope="module")
def law(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("law") / "law.json"
    assert main(["law", "fit", *(str(CURVES / f"{n}.csv") for n in TRAIN), "--out", str(path)]) == 0
    return path


def edited(edit: Callable[[dict], object]) -> Callable[[Path, Path], Path]:
    def make(law: Path, tmp: Path) -> Path:
        doc = json.loads(law.read_text())
        edit(doc)
        out = tmp / "edited.json"
        out.write_text(json.dumps(doc))
        return out

    return make


def raw(data: bytes | Callable[[Path], bytes]) -> Callable[[Path, Path], Path]:
    def make(law: Path, tmp: Path) -> Path:
        out = tmp / "raw.json"
        out.write_bytes(data(law) if callable(data) else data)
        return out

    return make


def _set(path: str, value: object) -> Callable[[dict], None]:
    def edit(doc: dict) -> None:
        *parents, last = path.split(".")
        node = doc
        for p in parents:
            node = node[int(p)] if p.isdigit() else node[p]
        node[last] = value

    return edit


LAW_FILES = {  # name -> (make the file, the message's part)
    "param-400-digit-int": (edited(_set("params.L0", 10**400)), "params.L0 10000000000000000000000000000000000"),
    "param-list": (edited(_set("params.A", [1, 2])), "params.A [1, 2] is not a finite number"),
    "param-string": (edited(_set("params.gamma", "0.5")), "params.gamma '0.5' is not a finite number"),
    "param-bool": (edited(_set("params.beta", True)), "params.beta True is not a finite number"),
    "param-out-of-range": (edited(_set("params.alpha", 7)), "params.alpha 7 is out of range; expected 0.01 <= alpha"),
    "param-unknown": (edited(_set("params.D", 1.0)), "params.D is not a parameter of the multipower law"),
    "params-list": (edited(_set("params", [1, 2, 3])), "params must be an object with L0, A, alpha"),
    "nested-200000": (raw(b'{"a":' * 200_000 + b"1" + b"}" * 200_000), "JSON nested too deep"),
    "utf-16": (raw(lambda law: law.read_text().encode("utf-16")), "UTF-16 text; a LAW.json is UTF-8"),
    "latin-1": (raw(b'{"foundry_ext_law": 1, "form": "multipow\xe9r"}'), "not UTF-8 text (byte 40)"),
    "empty": (raw(b""), "not JSON (Expecting value at line 1)"),
    "not-an-object": (raw(b"[1, 2]"), "not a LAW.json of `foundry-ext law fit` (no 'foundry_ext_law' version)"),
    "int-over-4300-digits": (  # issue 46: Python's "Exceeds the limit (4300 digits) ..." was shown raw
        raw(b'{"foundry_ext_law": ' + b"9" * 5000 + b"}"),
        "not usable JSON (a number of more than 4,300 digits; a LAW.json holds numbers of a few digits)",
    ),
    "too-large": (raw(b" " * (17 * 2**20) + b"{}"), "larger than 16 MiB; a LAW.json is a few kB"),
    "version-true": (edited(_set("foundry_ext_law", True)), "foundry_ext_law True is another version"),
    "version-huge": (edited(_set("foundry_ext_law", 10**50)), "foundry_ext_law 1000000000000000000000000000000000"),
    "form-list": (edited(_set("form", ["multipower"])), "form ['multipower'] is unknown; expected one of multipower"),
    "verdict-unknown": (edited(_set("reliability.verdict", "great")), "reliability.verdict 'great' is not one of good"),
    "train-error-string": (edited(_set("reliability.train_mean_rel", "small")), "reliability.train_mean_rel 'small'"),
    "runs-negative": (edited(_set("reliability.runs", -3)), "reliability.runs -3 must be an integer in 0..10000"),
    "checks-not-a-list": (edited(_set("reliability.checks", {})), "reliability.checks must be a list"),
    "subfit-out-of-range": (
        edited(_set("reliability.checks.0.params.beta", 99)),
        "reliability.checks[0].params.beta 99 is out of range; expected 0.3 <= beta <= 5",
    ),
    "domain-one-value": (edited(_set("domain.peak_lr", [1])), "domain.peak_lr must be [lowest, highest]"),
    "domain-reversed": (edited(_set("domain.batches", [5, 1])), "domain.batches must be [lowest, highest]"),
}


@pytest.mark.parametrize("case", LAW_FILES)
def test_hostile_law_json_is_one_line(case: str, law: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make, message = LAW_FILES[case]
    path = make(law, tmp_path)
    started = time.perf_counter()
    rc = main(["law", "predict", str(path), TINY_WSD])
    _, err = capsys.readouterr()
    assert rc == 2, err
    assert err.startswith(f"foundry-ext law: error: {path}: ") and err.count("\n") == 1, err
    assert message in err, err
    assert time.perf_counter() - started < 10


def test_a_folder_and_a_missing_file_as_law_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["law", "predict", str(tmp_path), TINY_WSD]) == 2
    assert "is a folder; expected a LAW.json file" in capsys.readouterr().err
    assert main(["law", "predict", str(tmp_path / "none.json"), TINY_WSD]) == 2
    assert "none.json: cannot read: No such file or directory" in capsys.readouterr().err


def test_unusual_but_valid_law_json_is_accepted(law: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + law.read_bytes().replace(b"\n", b"\r\n"))  # a BOM, Windows line ends
    assert main(["law", "predict", str(bom), TINY_WSD]) == 0
    doc = json.loads(law.read_text())
    doc["params"]["L0"] = int(doc["params"]["L0"])  # an integer where a float was
    doc["note"] = "an extra key"
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps(doc))
    assert main(["law", "predict", str(extra), TINY_WSD]) == 0
    assert "error" not in capsys.readouterr().err


def test_a_hand_edited_verdict_is_read_as_its_evidence(
    law: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(law.read_text())
    doc["reliability"]["train_mean_rel"] = 0.02  # the evidence of a poor fit, the verdict left 'good'
    bad = tmp_path / "edited.json"
    bad.write_text(json.dumps(doc))
    assert main(["law", "predict", str(bad), TINY_WSD]) == 0
    err = capsys.readouterr().err
    assert err.splitlines()[0] == (
        f"warning: {bad}: reliability.verdict 'good' does not follow from its recorded evidence ('poor' by this "
        "foundry-ext's thresholds): treated as 'poor'"
    )


OPTIONS = {  # name -> (argv after `law`, with {law} and {tmp}; the message's part)
    "fit-out-missing-folder": (["fit", *(str(CURVES / f"{n}.csv") for n in TRAIN), "--out", "{tmp}/no/law.json"],
                               "--out {tmp}/no/law.json: the folder {tmp}/no does not exist"),
    "fit-out-a-folder": (["fit", *(str(CURVES / f"{n}.csv") for n in TRAIN), "--out", "{tmp}"],
                         "--out {tmp}: is a folder; expected a file name"),
    "predict-csv-missing-folder": (["predict", "{law}", TINY_WSD, "--csv", "{tmp}/no/p.csv"],
                                   "--csv {tmp}/no/p.csv: the folder {tmp}/no does not exist"),
    "predict-out-a-folder": (["predict", "{law}", TINY_WSD, "--out", "{tmp}"], "--out {tmp}: is a folder"),
    "predict-missing-trace": (["predict", "{law}", "--trace", "{tmp}/none.csv"],
                              "--trace {tmp}/none.csv: no such file (expected a step,lr[,loss] CSV)"),
    "predict-points-1": (["predict", "{law}", TINY_WSD, "--points", "1"], "--points 1: must be >= 2"),
    "predict-lr-0": (["predict", "{law}", TINY_WSD, "optimizer.lr=0"], "the LR is 0 at every batch"),
    "predict-1e9-batches": (["predict", "{law}", TINY_WSD, "max_duration=1000000000ba"],
                            "max_duration: 1,000,000,000 batches; law predict and tune take at most 10,000,000"),
    "predict-misspelt-scheduler": (["predict", "{law}", TINY_WSD, "scheduler.name=warmup_stable_decy"],
                                   "scheduler.name: 'warmup_stable_decy' is not a registered scheduler (did you mean "
                                   "'warmup_stable_decay'?)"),
    "grid-empty-value": (["tune", "{law}", TINY_WSD, "--grid", "scheduler.t_decay=0.1dur,,0.2dur"],
                         "an empty value; expected KEY=V1,V2,... with no empty item"),
    "grid-no-equals": (["tune", "{law}", TINY_WSD, "--grid", "scheduler.t_decay"], "expected KEY=V1,V2,..."),
    "grid-one-candidate": (["tune", "{law}", TINY_WSD, "--grid", "scheduler.t_decay=0.1dur"],
                           "--grid: 1 combination, nothing to rank"),
    "grid-100x100": (["tune", "{law}", TINY_WSD, "--grid", "scheduler.t_decay=" + ",".join(f"{i}ba" for i in
                      range(100)), "--grid", "scheduler.alpha_f=" + ",".join(f"{i / 100}" for i in range(100))],
                     "--grid: 10000 combinations; at most 500"),
    "tune-grid-and-branches": (["tune", "{law}", TINY_WSD, "--grid", "scheduler.t_decay=0.1dur,0.2dur",
                                "--branch-from", "100"], "give --grid KEY=V1,V2,... or --branch-from"),
    "tune-nothing": (["tune", "{law}", TINY_WSD], "give --grid KEY=V1,V2,... or --branch-from"),
    "branch-from-text": (["tune", "{law}", TINY_WSD, "--branch-from", "abc", "--end", "200"],
                         "--branch-from 'abc': expected batch counts"),
    "branch-after-end": (["tune", "{law}", TINY_WSD, "--branch-from", "100,220", "--end", "200"],
                         "--branch-from 220: must be before --end 200"),
    "branch-after-run": (["tune", "{law}", TINY_WSD, "--branch-from", "100,300", "--decay", "50ba"],
                         "--branch-from 300: after the YAML's run ends (250 batches)"),
    "branch-end-and-decay": (["tune", "{law}", TINY_WSD, "--branch-from", "100", "--end", "200", "--decay", "5ba"],
                             "--branch-from needs --end B"),
    "branch-shape": (["tune", "{law}", TINY_WSD, "--branch-from", "100,150", "--end", "200", "--shape", "cubic"],
                     "--shape 'cubic': expected one of linear, sqrt, cosine, square"),
    "branch-floor": (["tune", "{law}", TINY_WSD, "--branch-from", "100,150", "--end", "200", "--floor", "1.5"],
                     "--floor 1.5: must be in [0, 1)"),
    "branch-decay-dur": (["tune", "{law}", TINY_WSD, "--branch-from", "100", "--decay", "1.5dur,0.2dur"],
                         "--decay '1.5dur': expected batches (500ba) or a fraction of the branched run (0.2dur)"),
    "branch-one": (["tune", "{law}", TINY_WSD, "--branch-from", "100", "--end", "200"],
                   "1 branch, nothing to rank"),
    # issue 46: the factors were ranked on a prediction without cuts, where every factor gives the same curve
    "tune-plateau-factor": (["tune", "{law}", TINY_PLATEAU, "--grid", "scheduler.factor=0.3,0.5"],
                            "--grid scheduler.factor: reduce_lr_on_plateau's cuts come from the eval losses, which "
                            "law tune does not have: every value predicts the same curve"),
    "tune-plateau-patience": (["tune", "{law}", TINY_PLATEAU, "--grid", "max_duration=2000ba,3000ba", "--grid",
                               "scheduler.patience=1,2"], "--grid scheduler.patience: reduce_lr_on_plateau's cuts"),
    "predict-plateau-strict": (["predict", "{law}", TINY_PLATEAU, "--strict"],
                               "--strict: scheduler reduce_lr_on_plateau: predicted without its cuts"),
    "predict-lr-1e308": (["predict", "{law}", TINY_WSD, "optimizer.lr=1e308", "--strict"],
                         "--strict: peak LR 1e+308 is outside the fitted runs'"),
}  # fmt: skip


@pytest.mark.parametrize("case", OPTIONS)
def test_bad_option_is_one_line(case: str, law: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv, message = OPTIONS[case]
    fill = {"{law}": str(law), "{tmp}": str(tmp_path)}

    def sub(text: str) -> str:
        for k, v in fill.items():
            text = text.replace(k, v)
        return text

    started = time.perf_counter()
    rc = main(["law", *map(sub, argv)])
    _, err = capsys.readouterr()
    assert rc == 2, err
    assert err.startswith("foundry-ext law: error: ") and err.count("\n") == 1, err
    assert sub(message) in err, err
    assert time.perf_counter() - started < 10


def test_a_misspelt_scheduler_is_answered_without_composer(law: Path) -> None:
    code = (
        "import sys; from foundry_ext.cli import main; "
        f"rc = main(['law', 'predict', {str(law)!r}, {TINY_WSD!r}, 'scheduler.name=cosine_with_warmpu']); "
        "print(rc, 'composer' in sys.modules, 'torch' in sys.modules)"
    )
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    seconds = time.perf_counter() - started
    assert done.stdout.split() == ["2", "False", "False"], done.stderr
    assert "(did you mean 'cosine_with_warmup'?)" in done.stderr and done.stderr.count("\n") == 1
    assert seconds < 10


@pytest.mark.parametrize("command", ["predict", "tune"])
def test_an_overflow_is_the_error_line_without_numpys_warnings(
    command: str, law: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 46: an LR of 1e308 overflowed numpy's sums, which printed RuntimeWarning lines before the error."""
    grid = ["--grid", "scheduler.t_decay=0.1dur,0.2dur"] if command == "tune" else []
    rc = main(["law", command, str(law), TINY_WSD, "optimizer.lr=1e308", *grid])
    _, err = capsys.readouterr()
    assert rc == 2, err
    lines = err.splitlines()
    assert lines[-1].startswith("foundry-ext law: error: "), err
    assert "is inf" in lines[-1] or "is nan" in lines[-1], err
    assert all(line.startswith("warning: ") for line in lines[:-1]), err  # no RuntimeWarning, no numpy source line


def test_a_plateau_prediction_says_it_has_no_cuts(law: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 46: a reduce_lr_on_plateau schedule was predicted without its cuts and without a word."""
    assert main(["law", "predict", str(law), TINY_PLATEAU]) == 0
    err = capsys.readouterr().err
    assert (
        "warning: scheduler reduce_lr_on_plateau: predicted without its cuts (they come from the eval losses the run "
        "will log): the LR as if the loss never plateaued; pass --metrics FILE.csv (batch,value of the monitored "
        "metric) to replay them\n"
    ) in err, err
    assert main(["law", "tune", str(law), TINY_PLATEAU, "--grid", "scheduler.t_warmup=10ba,20ba"]) == 0
    assert "warning: scheduler reduce_lr_on_plateau: predicted without its cuts" in capsys.readouterr().err
