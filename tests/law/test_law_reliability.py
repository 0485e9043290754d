"""``law fit`` checks itself (leave-one-run-out, a verdict), predictions carry bands and extrapolation warnings."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from foundry_ext.cli import main
from foundry_ext.law.reliability import BAND, THRESHOLDS, judge
from tests.law.paper import CURVES, TEST, TRAIN
from tests.law.tiny import write_csvs
from tests.support.cli import run_cli
from tests.support.launcher import REPO

TINY_WSD = str(REPO / "yamls/tiny-wsd.yaml")
PAPER_RUN = ["max_duration=24000ba", "optimizer.lr=3e-4", "scheduler.t_warmup=2160ba"]


@pytest.fixture(scope="module")
def paper_law(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("law") / "law.json"
    assert main(["law", "fit", *(str(CURVES / f"{n}.csv") for n in TRAIN), "--out", str(path)]) == 0
    return path


@pytest.fixture(scope="module")
def tiny_law(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tiny")
    runs = write_csvs(folder, ("fit: constant", "fit: cosine", "fit: two-stage"))
    path = folder / "law.json"
    assert main(["law", "fit", *map(str, runs), "--out", str(path)]) == 0
    return path


def test_paper_fit_is_checked_leaving_each_run_out_and_good(
    paper_law: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, _ = run_cli("law", "fit", *(str(CURVES / f"{n}.csv") for n in TRAIN), "--out", str(paper_law))
    assert rc == 0
    assert "leave-one-run-out" in out
    lines = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("  ")}
    # refitted without it, the law predicts each training run within 0.35% on average (docs/law.md's table)
    for name in TRAIN:
        assert float(lines[name][-3].rstrip("%")) < 0.35, out
    assert out.splitlines()[-2].startswith("verdict: good (training error 0.06% <= 0.15%")
    doc = json.loads(paper_law.read_text())
    r = doc["reliability"]
    assert r["verdict"] == "good" and r["runs"] == 3 and r["decaying_runs"] == 2
    assert [c["name"] for c in r["checks"]] == list(TRAIN) and all("params" in c for c in r["checks"])
    assert doc["domain"]["peak_lr"] == [3e-4, 3e-4] and doc["domain"]["batches"] == [14145, 23937]


def test_tiny_runs_are_poor_and_every_prediction_says_so(
    tiny_law: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(tiny_law.read_text())
    assert doc["reliability"]["verdict"] == "poor"
    assert doc["reliability"]["train_mean_rel"] > THRESHOLDS["poor_train"]
    rc, out, err = run_cli("law", "predict", str(tiny_law), str(REPO / "yamls/tiny-plateau.yaml"),
                       "max_duration=1000ba")  # fmt: skip
    assert rc == 0
    assert err.startswith("warning: this law's verdict is poor: the law misses its own runs by")
    assert "(band " in out
    rc, out, err = run_cli("law", "tune", str(tiny_law), str(REPO / "yamls/tiny-plateau.yaml"),
                       "max_duration=1000ba", "--grid", "scheduler.t_warmup=10ba,20ba")  # fmt: skip
    assert rc == 0, err
    assert "warning: the law's verdict is poor" in err


def test_two_runs_are_rough_at_best_and_have_no_band(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    law = tmp_path / "two.json"
    rc, out, _ = run_cli("law", "fit", str(CURVES / "cosine_24000.csv"), str(CURVES / "constant_24000.csv"),
                     "--out", str(law))  # fmt: skip
    assert rc == 0
    assert "verdict: rough (fitted on 2 runs: nothing held out to check it; add a third run" in out
    rc, out, err = run_cli("law", "predict", str(law), TINY_WSD, *PAPER_RUN, "--csv", str(tmp_path / "p.csv"))
    assert rc == 0
    assert "no band: the law was fitted on 2 runs" in out
    assert err.count("\n") == 1 and "verdict is rough" in err
    rows = list(csv.DictReader(open(tmp_path / "p.csv")))
    assert rows[-1]["predicted_low"] == "" and rows[-1]["predicted_high"] == ""


def test_the_only_decaying_run_cannot_be_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = [str(CURVES / f"{n}.csv") for n in ("constant_24000", "constant_72000", "wsdcon_9")]
    rc, out, _ = run_cli("law", "fit", *runs, "--out", str(tmp_path / "l.json"))
    assert rc == 0
    assert "  wsdcon_9                     not checkable: every run's LR is constant after its warmup" in out
    assert "verdict: rough (one decaying run: leaving it out cannot refit" in out


def test_verdict_rules() -> None:
    assert judge(0.0005, 0.002, 2, 3, 0)[0] == "good"
    assert judge(0.002, 0.002, 2, 3, 0)[0] == "rough"  # training error between good and poor
    assert judge(0.0005, 0.009, 2, 3, 0)[0] == "rough"
    assert judge(0.0005, 0.011, 2, 3, 0)[0] == "poor"
    assert judge(0.005, None, 1, 2, 0)[0] == "poor"
    assert judge(0.0005, None, 2, 2, 0)[0] == "rough"
    assert judge(0.0005, 0.002, 2, 3, 1)[0] == "rough"


def test_predict_gives_a_band_and_a_csv_that_starts_finite(
    paper_law: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_csv = tmp_path / "pred.csv"
    rc, out, err = run_cli("law", "predict", str(paper_law), TINY_WSD, *PAPER_RUN, "--csv", str(out_csv),
                       "--out", str(tmp_path / "p.png"))  # fmt: skip
    assert rc == 0 and err == ""
    assert "predicted multipower loss after the last batch: 3.2705 (band 3.25" in out
    rows = list(csv.DictReader(open(out_csv)))
    assert list(rows[0]) == ["step", "lr", "predicted_loss", "predicted_low", "predicted_high", "measured_loss"]
    for r in rows:
        assert float(r["predicted_low"]) <= float(r["predicted_loss"]) <= float(r["predicted_high"])
    assert rows[0]["predicted_loss"] != "inf" and int(rows[0]["step"]) >= 2  # batches 0, 1 train at LR 0
    last = rows[-1]
    width = (float(last["predicted_high"]) - float(last["predicted_low"])) / 2 / float(last["predicted_loss"])
    assert 0.001 < width < 0.01  # on the fitted horizon: the sub-fits' spread and the training error (0.1-1%)
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


def test_band_grows_past_the_fitted_horizon(paper_law: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def width(*overrides: str) -> float:
        rc, out, _ = run_cli("law", "predict", str(paper_law), TINY_WSD, *overrides)
        assert rc == 0
        final = float(out.split("last batch: ")[1].split()[0])
        lo, hi = (float(x) for x in out.split("(band ")[1].split(")")[0].split(" to "))
        return (hi - lo) / 2 / final

    near = width(*PAPER_RUN)
    far = width("max_duration=72000ba", "optimizer.lr=3e-4", "scheduler.t_warmup=2160ba")
    assert far > near + BAND["c"] * 1.0 * 0.9  # log(72000 / 24001) ~ 1.1 more of c


def test_extrapolation_is_named_and_strict_refuses(paper_law: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["law", "predict", str(paper_law), TINY_WSD, "max_duration=24000ba", "optimizer.lr=3",
            "scheduler.t_warmup=2160ba"]  # fmt: skip
    rc, _, err = run_cli(*args)
    assert rc == 0
    assert "warning: peak LR 3 is outside the fitted runs' 0.0003 to 0.0003: the law extrapolates" in err
    assert "warning: LR area (the LR summed over every batch) " in err
    rc, _, err = run_cli(*args, "--strict")
    assert rc == 2 and err.count("\n") == 1
    assert "--strict: peak LR 3 is outside the fitted runs' 0.0003 to 0.0003" in err
    rc, _, err = run_cli("law", "predict", str(paper_law), TINY_WSD, *PAPER_RUN[:2], "max_duration=60000ba",
                       "scheduler.t_warmup=2160ba")  # fmt: skip
    assert "warning: length (batches) 6e+04 is outside the fitted runs' 1.414e+04 to 2.394e+04" in err


def test_lr_zero_is_refused_not_inf(paper_law: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_cli("law", "predict", str(paper_law), TINY_WSD, "optimizer.lr=0")
    assert rc == 2 and "inf" not in out + err and err.count("\n") == 1
    assert "the LR is 0 at every batch (optimizer.lr 0?)" in err


def test_older_law_json_predicts_with_one_line(
    paper_law: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(paper_law.read_text())
    del doc["reliability"], doc["domain"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    rc, out, err = run_cli("law", "predict", str(old), TINY_WSD, *PAPER_RUN)
    assert rc == 0 and "(band" not in out
    assert (
        err == f"note: {old} was not checked (written before `law fit` checked its fits): no verdict, no band; "
        "fit again for them\n"
    )


def test_tune_says_when_the_best_is_not_resolvable(paper_law: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli("law", "tune", str(paper_law), TINY_WSD, *PAPER_RUN,
                     "--grid", "scheduler.t_decay=0.1dur,0.2dur,0.3dur")  # fmt: skip
    assert rc == 0
    assert out.splitlines()[-1].startswith("best: not resolvable: the bands of the first ")
    rc, out, _ = run_cli("law", "tune", str(paper_law), TINY_WSD, *PAPER_RUN,
                     "--grid", "scheduler.alpha_f=0.0,0.9")  # fmt: skip
    assert rc == 0
    assert out.splitlines()[-1] == "best: scheduler.alpha_f=0.0", out


def test_tune_ranks_branches_of_a_stable_run(paper_law: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stable = [*PAPER_RUN[:2], "scheduler.t_warmup=2160ba", "scheduler.t_decay=0ba", "max_duration=24000ba"]
    rc, out, err = run_cli("law", "tune", str(paper_law), TINY_WSD, *stable,
                       "--branch-from", "8000,12000,16000,20000", "--end", "24000")  # fmt: skip
    assert rc == 0, err
    assert "4 branches predicted" in out
    ranked = [line.split() for line in out.splitlines() if line.startswith("    ")]
    assert ranked[0][4] == "from=20000" or "not resolvable" in out
    assert all(r[5] == f"decay={24000 - int(r[4].removeprefix('from='))}ba" for r in ranked)
    rc, out, err = run_cli("law", "tune", str(paper_law), TINY_WSD, *stable,
                       "--branch-from", "16000", "--decay", "2000ba,0.2dur", "--shape", "linear,sqrt")  # fmt: skip
    assert rc == 0, err
    assert "4 branches predicted" in out and "decay=4000ba" in out  # 0.2dur of 16000 + LEN: 4000


def test_tune_says_where_each_branch_ends_and_ranks_none_past_max_duration(
    paper_law: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 46: branches of 16k to 28k batches were ranked together, one past max_duration (which anneal refuses)."""
    stable = [*PAPER_RUN[:2], "scheduler.t_warmup=2160ba", "scheduler.t_decay=0ba", "max_duration=24000ba"]
    rc, out, err = run_cli("law", "tune", str(paper_law), TINY_WSD, *stable,
                       "--branch-from", "12000,16000,20000", "--decay", "4000ba,8000ba")  # fmt: skip
    assert rc == 0, err
    assert err.splitlines() == [
        "note: not ranked, past the YAML's max_duration (24000 batches), as anneal refuses them: from=20000 "
        "decay=8000ba (ends at 28000)"
    ]
    ranked = [line.split()[4:7] for line in out.splitlines() if line.startswith("    ")]
    assert len(ranked) == 5 and "5 branches predicted" in out
    for start, decay, end in ranked:
        s, n = int(start.removeprefix("from=")), int(decay.removeprefix("decay=").removesuffix("ba"))
        assert end == f"end={s + n}" and s + n <= 24000, ranked
    rc, _, err = run_cli("law", "tune", str(paper_law), TINY_WSD, *stable,
                     "--branch-from", "20000", "--decay", "4000ba,8000ba")  # fmt: skip
    assert rc == 2
    assert err.splitlines()[-1] == (
        "foundry-ext law: error: 1 branch within max_duration (24000 batches), nothing to rank; give two or more "
        "branch points, lengths or shapes"
    )


def _final_in_band(law: Path, curve: Path, out_csv: Path) -> tuple[bool, float, float]:
    """``law predict --trace --csv``, at the curve's last measured loss: whether it is inside the band, the band's
    width (high - low) relative to the prediction, and the relative error (measured - predicted) / predicted."""
    assert main(["law", "predict", str(law), "--trace", str(curve), "--points", "2", "--csv", str(out_csv)]) == 0
    row = [r for r in csv.DictReader(open(out_csv)) if r["measured_loss"]][-1]
    pred, lo, hi, measured = (float(row[k]) for k in ("predicted_loss", "predicted_low", "predicted_high",
                                                        "measured_loss"))  # fmt: skip
    return lo <= measured <= hi, (hi - lo) / pred, (measured - pred) / pred


def test_docs_fit_holds_its_held_out_finals(
    paper_law: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 46's check: fitted as the docs do on three of the 25M curves (a set of the benchmark's confirm half: BAND
    was not chosen on it), the six other curves' measured final losses lie inside their bands, under 2% wide within
    the fitted runs' length. The law under-predicts 5 of them (by up to 0.49%)."""
    checked = {name: _final_in_band(paper_law, CURVES / f"{name}.csv", tmp_path / "p.csv") for name in TEST}
    assert sum(error > 0 for _, _, error in checked.values()) >= 5, checked  # the law's own bias: too low
    assert all(width < 0.02 for name, (_, width, _) in checked.items() if "72000" not in name), checked
    assert all(inside for inside, _, _ in checked.values()), checked


@pytest.mark.parametrize(
    "data",
    [
        "25M",
        pytest.param("tiny", marks=pytest.mark.xfail(strict=True, reason="issue 46, not covered: the tiny runs' "
                                                     "bands are 7% wide, and past the fitted runs hold 77%")),
    ],
)  # fmt: skip
def test_band_holds_80_percent_of_the_confirm_halfs_held_out_finals(data: str) -> None:
    """The shipped BAND on the benchmark's recorded fits of the confirm half (bench/data/law-reliability.json, made
    by bench_law_reliability.py; BAND was chosen on the other half): >= 80% of the held-out finals inside, within
    the fitted runs' LR area and length and past them, at a median width under 2%; the band before this term held
    under 80% within them."""
    from tests.law.test_law_bench_smoke import _bench

    bench = _bench("bench_law_reliability")
    records = json.loads((REPO / "bench/data/law-reliability.json").read_text())
    _, confirm = bench.halves(records)
    mine = [r for r in confirm if r["dataset"].startswith(data)]
    assert len(mine) >= 42
    for where in ("near", "far"):
        inside, width, _, n = bench.coverage(mine, BAND, where)
        assert n >= 68 and inside >= 0.8 and width < 0.02, (data, where, inside, width)
    assert bench.coverage(mine, bench.BEFORE, "near")[0] < 0.8


def test_a_check_whose_error_is_not_a_number_is_refused_in_one_line(
    paper_law: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(paper_law.read_text())
    doc["reliability"]["checks"][1]["final_rel"] = "0.1%"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    rc, out, err = run_cli("law", "predict", str(bad), TINY_WSD, *PAPER_RUN)
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert "reliability.checks[1].final_rel '0.1%' must be a number >= 0 or null" in err
