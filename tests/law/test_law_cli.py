"""``foundry-ext law fit|predict|tune``: real runs, real YAMLs; the LR of every batch equal to ``plot``'s."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from foundry_ext.cli import main
from foundry_ext.law.predict import yaml_pipeline
from tests.law.paper import CURVES, TRAIN
from tests.support.cli import run_cli
from tests.support.configs import write_train_yaml
from tests.support.launcher import REPO

TINY_WSD = REPO / "yamls/tiny-wsd.yaml"

FAMILIES = {  # one scheduler of each family plot computes: this package's, llm-foundry's, Composer's, torch's
    "warmup_stable_decay": {"name": "warmup_stable_decay", "t_warmup": "20ba", "t_decay": "0.3dur",
                            "decay_type": "cosine", "alpha_f": 0.1},
    "cosine_with_warmup": {"name": "cosine_with_warmup", "t_warmup": "20ba", "alpha_f": 0.1},
    "multistep_with_warmup": {"name": "multistep_with_warmup", "t_warmup": "20ba", "milestones": ["100ba", "180ba"],
                              "gamma": 0.3},
    "torch_lr_scheduler": {"name": "torch_lr_scheduler", "type": "OneCycleLR", "max_lr": 1.0, "total_steps": 250},
}  # fmt: skip


@pytest.fixture(scope="module")
def law(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("law") / "law.json"
    assert main(["law", "fit", *(str(CURVES / f"{n}.csv") for n in TRAIN), "--out", str(path)]) == 0
    return path


def with_scheduler(tmp_path: Path, block: dict) -> Path:
    return write_train_yaml(
        tmp_path / f"{block['name']}.yaml", yaml.safe_load(TINY_WSD.read_text()), {"scheduler": block}
    )


def test_fit_writes_the_law_and_reports_its_quality(law: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli("law", "fit", *(str(CURVES / f"{n}.csv") for n in TRAIN), "--out", str(law))
    assert rc == 0
    assert "multipower law fitted on 3 runs" in out
    assert "cosine_24000" in out and "R^2" in out and "worst rel" in out
    doc = json.loads(law.read_text())
    assert doc["foundry_ext_law"] == 1 and doc["form"] == "multipower"
    assert doc["params"]["L0"] == pytest.approx(3.0098, rel=0.01)
    assert [r["name"] for r in doc["fit"]["runs"]] == list(TRAIN)


@pytest.mark.parametrize("family", FAMILIES)
def test_predict_uses_the_lr_plot_computes(
    family: str, law: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = with_scheduler(tmp_path, FAMILIES[family])
    rc, _, err = run_cli("plot", str(config), "--csv", str(tmp_path / "plot.csv"), "--out", str(tmp_path / "p.png"))
    assert rc == 0, err
    with open(tmp_path / "plot.csv") as f:
        plotted = {int(r["batch"]): float(r["lr"]) for r in csv.DictReader(f)}
    lrs = yaml_pipeline(str(config), []).lrs()
    assert len(lrs) == 250
    for batch, lr in plotted.items():
        assert lrs[batch] == pytest.approx(lr, rel=1e-12, abs=1e-300), batch
    rc, out, err = run_cli("law", "predict", str(law), str(config), "--csv", str(tmp_path / "pred.csv"),
                       "--out", str(tmp_path / "pred.png"))  # fmt: skip
    assert rc == 0, err
    assert "predicted multipower loss after the last batch" in out
    with open(tmp_path / "pred.csv") as f:
        rows = list(csv.DictReader(f))
    assert int(rows[-1]["step"]) == 250
    for r in rows:  # the LR of the last batch trained before each predicted loss
        assert float(r["lr"]) == pytest.approx(lrs[int(r["step"]) - 1], rel=1e-12, abs=1e-300)
    assert (tmp_path / "pred.png").read_bytes()[:4] == b"\x89PNG"


def test_predict_replays_the_plateau_cuts(law: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    metrics = tmp_path / "metrics.csv"
    metrics.write_text("batch,value\n" + "".join(f"{b},{3.0 if b < 100 else 2.9}\n" for b in range(50, 1001, 50)))
    config = str(REPO / "yamls/tiny-plateau.yaml")
    plain = yaml_pipeline(config, ["max_duration=1000ba"]).lrs()
    cut = yaml_pipeline(
        config, ["max_duration=1000ba"], [(b, 3.0 if b < 100 else 2.9) for b in range(50, 1001, 50)]
    ).lrs()
    assert np.all(cut <= plain) and cut[-1] < plain[-1]  # plateau at 2.9 from batch 100: cuts
    rc, out, err = run_cli("law", "predict", str(law), config, "max_duration=1000ba", "--metrics", str(metrics))
    assert rc == 0, err
    assert "1000 batches" in out


def test_predict_a_trace_shows_the_measured_losses(
    law: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_csv = tmp_path / "c.csv"
    rc, _, err = run_cli("law", "predict", str(law), "--trace", str(CURVES / "cosine_72000.csv"),
                       "--csv", str(out_csv))  # fmt: skip
    assert rc == 0, err
    with open(out_csv) as f:
        rows = [r for r in csv.DictReader(f) if r["measured_loss"]]
    assert len(rows) >= 540  # every logged loss is a predicted point
    rel = [abs(float(r["predicted_loss"]) - float(r["measured_loss"])) / float(r["measured_loss"]) for r in rows[1:]]
    assert np.mean(rel) < 0.005  # the long cosine: the hardest held-out curve (0.35% mean, docs/law.md)


def test_tune_ranks_a_grid_and_prints_the_best_override(law: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_cli("law", "tune", str(law), str(TINY_WSD), "max_duration=2000ba",
                       "--grid", "scheduler.t_decay=0.1dur,0.2dur,0.4dur",
                       "--grid", "scheduler.decay_type=linear,sqrt,cosine")  # fmt: skip
    assert rc == 0, err
    assert "9 combinations predicted" in out
    rows = [line.split() for line in out.splitlines() if line.startswith("  ")]
    ranked = [float(r[1]) for r in rows if r[0].endswith(".")]
    assert ranked == sorted(ranked) and len(ranked) == 9
    # the nine overlap within the law's bands (docs/law.md): the pick is named as not resolvable
    best = out.strip().splitlines()[-1]
    assert best.startswith("best: not resolvable: the bands of the first ") and "scheduler.decay_type=" in best
    best = "best: " + best.split("the law's pick: ")[1]
    # the ranking is the law's: the best line's prediction is the smallest of the nine, recomputed here
    from foundry_ext.law.lawfile import read_law
    from foundry_ext.law.predict import predict

    form, params = read_law(str(law))
    overrides = ["max_duration=2000ba", *best.removeprefix("best: ").split()]
    lr = yaml_pipeline(str(TINY_WSD), overrides).lrs()
    assert predict(form, params, lr, np.array([len(lr)]))[0] == pytest.approx(ranked[0], abs=1e-4)


BAD_CSV = {
    "no-columns": ("batch,lr\n0,0.1\n", "the header must name the columns step,lr,loss; missing step,loss"),
    "non-increasing": ("step,lr,loss\n0,0.1,\n10,0.1,3\n10,0.1,2.9\n", ":4: step 10 does not increase"),
    "negative-lr": ("step,lr,loss\n0,0.1,\n10,-0.1,3\n", ":3: lr -0.1 is negative"),
    "non-finite-loss": ("step,lr,loss\n0,0.1,\n10,0.1,nan\n", ":3: loss nan is not finite"),
    "non-finite-lr": ("step,lr,loss\n0,inf,\n10,0.1,3\n", ":2: lr inf is not finite"),
}


@pytest.mark.parametrize("case", BAD_CSV)
def test_bad_csv_is_one_line_exit_2(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text, message = BAD_CSV[case]
    bad = tmp_path / "bad.csv"
    bad.write_text(text)
    rc, _, err = run_cli("law", "fit", str(bad), str(CURVES / "cosine_24000.csv"), "--out", str(tmp_path / "l"))
    assert rc == 2
    assert message in err and err.count("\n") == 1, err


def test_one_run_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_cli("law", "fit", str(CURVES / "cosine_24000.csv"), "--out", str(tmp_path / "l.json"))
    assert rc == 2 and "1 run given: the law needs two or more runs" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda d: d.update(foundry_ext_law=2),
            "foundry_ext_law 2 is another version; this foundry-ext reads version 1",
        ),
        (lambda d: d["params"].update(beta=-1), "params.beta -1 is out of range; expected 0.3 <= beta <= 5"),
        (lambda d: d["params"].update(gamma="x"), "params.gamma 'x' is not a finite number"),
        (lambda d: d["params"].pop("B"), "params.B None is not a finite number"),
    ],
)
def test_bad_law_json_is_one_line_exit_2(
    edit, message: str, law: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(law.read_text())
    edit(doc)
    bad = tmp_path / "law.json"
    bad.write_text(json.dumps(doc))
    rc, _, err = run_cli("law", "predict", str(bad), str(TINY_WSD))
    assert rc == 2
    assert message in err and err.count("\n") == 1, err


def test_unknown_grid_key_says_did_you_mean(law: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_cli("law", "tune", str(law), str(TINY_WSD), "--grid", "scheduler.t_decy=0.1dur,0.2dur")
    assert rc == 2
    assert "scheduler 'warmup_stable_decay' has no key 't_decy' (did you mean 'scheduler.t_decay'?)" in err
    rc, _, err = run_cli("law", "tune", str(law), str(TINY_WSD), "--grid", "max_duraton=100ba,200ba")
    assert rc == 2 and "(did you mean 'max_duration'?)" in err


def test_plot_draws_the_predicted_loss(law: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "lr.png"
    rc, stdout, err = run_cli("plot", str(TINY_WSD), "--law", str(law), "--out", str(out))
    assert rc == 0, err
    rc2, pred, _ = run_cli("law", "predict", str(law), str(TINY_WSD))
    assert rc2 == 0
    final = pred.split("after the last batch: ")[1].split()[0]
    assert f"predicted multipower loss after the last batch {final}" in stdout
    assert out.read_bytes()[:4] == b"\x89PNG"
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    rc, _, err = run_cli("plot", str(TINY_WSD), "--law", str(bad), "--out", str(out))
    assert rc == 2 and "--law" in err and "not a LAW.json" in err
