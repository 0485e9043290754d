"""The corpus of hostile and malformed run logs: real files, the command that reads each, and the one line expected.

Each case is ``(argv, env, expected)``: the command ``foundry-ext`` runs (``law fit``, ``law predict --metrics``,
``plot --metrics``), environment variables it needs (``MLFLOW_TRACKING_URI``), and fragments its single stderr line
must hold (the file and line or key, the value, what is allowed). Built by :func:`build` in a folder.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from foundry_ext.law.forms import FORMS
from tests.runlog.runs import LAW, LR_KEY, METRIC, log_runs
from tests.support.launcher import REPO

CURVES = REPO / "bench/data/loss-curves/25M"
GOOD = str(CURVES / "cosine_24000.csv")
PLATEAU = [str(REPO / "yamls/tiny-plateau.yaml"), "max_duration=10000ba", "scheduler.t_warmup=500ba"]
GOOD_CSV = "step,lr,loss\n0,0.0,\n100,0.1,\n200,0.1,3.5\n"

Case = tuple[list[str], dict[str, str], list[str]]


def _fit(path: str | Path, out: Path) -> list[str]:
    return ["law", "fit", str(path), GOOD, "--out", str(out / "law.json")]


def _plot(path: str | Path, out: Path) -> list[str]:
    return ["plot", *PLATEAU, "--metrics", str(path), "--out", str(out / "lr.png")]


def build(d: Path) -> dict[str, Case]:
    """Write every case's files under ``d``; the cases by name."""
    d.mkdir(parents=True, exist_ok=True)
    out = d / "out"
    out.mkdir(exist_ok=True)
    cases: dict[str, Case] = {}

    def file(name: str, data: str | bytes) -> Path:
        p = d / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)
        return p

    # --- CSV run logs of law fit ---
    p = file("long-cell.csv", "step,lr,loss\n0,0.1,\n10,0.1," + "9" * 200_000 + "\n")
    cases["csv-cell-over-the-field-limit"] = (_fit(p, out), {}, [f"{p}:3:", "longer than 65,536 characters"])
    p = file("latin1.csv", b"step,lr,loss\n0,0.1,\n10,0.1,3.0\xff\n")
    cases["csv-bytes-not-utf8"] = (_fit(p, out), {}, [f"{p}:3:", "byte 0xff at column 11 is not UTF-8"])
    p = file("utf16.csv", GOOD_CSV.encode("utf-16"))
    cases["csv-utf16"] = (_fit(p, out), {}, [f"{p}:1:", "byte 0xff at column 1 is not UTF-8"])
    cases["csv-unreadable"] = (_fit("/proc/self/mem", out), {}, ["/proc/self/mem: cannot read: Input/output error"])
    fifo = d / "fifo.csv"
    if not fifo.exists():
        os.mkfifo(fifo)
    cases["csv-a-pipe"] = (_fit(fifo, out), {}, [f"{fifo}: not a regular file"])
    sock = d / "sock.csv"
    if not sock.exists():
        socket.socket(socket.AF_UNIX).bind(str(sock))
    cases["csv-a-socket"] = (_fit(sock, out), {}, [f"{sock}: not a regular file"])
    cases["csv-missing"] = (_fit(d / "nope.csv", out), {}, [f"{d / 'nope.csv'}: no such file"])
    (d / "dangling.csv").unlink(missing_ok=True)
    (d / "dangling.csv").symlink_to(d / "nowhere")
    cases["csv-dangling-link"] = (_fit(d / "dangling.csv", out), {}, [f"{d / 'dangling.csv'}: no such file"])
    p = file("gap.csv", "step,lr,loss\n0,0.1,\n1000000000000,0.1,3\n")
    cases["csv-1e12-batch-gap"] = (_fit(p, out), {}, [f"{p}:3:", "step 1000000000000 is beyond the 10,000,000"])
    p = file("huge-step.csv", "step,lr,loss\n0,0.1,\n1e400,0.1,3\n")
    cases["csv-step-overflows"] = (_fit(p, out), {}, [f"{p}:3:", "step 1e400 is not finite"])
    p = file("nul.csv", "step,lr,loss\n0,0.1\x00,\n10,0.1,3\n")
    cases["csv-nul-byte"] = (_fit(p, out), {}, [f"{p}:2:"])
    p = file("empty.csv", "")
    cases["csv-empty"] = (_fit(p, out), {}, [f"{p}:", "missing step,lr,loss (header: none)"])
    p = file("header-only.csv", "step,lr,loss\r\n")
    cases["csv-header-only"] = (_fit(p, out), {}, [f"{p}:", "no rows after the header"])
    p = file("text-lr.csv", "step,lr,loss\n0,fast,\n")
    cases["csv-lr-not-a-number"] = (_fit(p, out), {}, [f"{p}:2:", "lr 'fast' is not a number"])
    p = file("fraction-step.csv", "step,lr,loss\n0,0.1,\n2.5,0.1,3\n")
    cases["csv-fractional-step"] = (_fit(p, out), {}, [f"{p}:3:", "step 2.5 must be an integer >= 0"])
    p = file("inf-loss.csv", "step,lr,loss\n0,0.1,\n10,0.1,inf\n")
    cases["csv-inf-loss"] = (_fit(p, out), {}, [f"{p}:3:", "loss inf is not finite"])
    a = file("a/run.csv", (CURVES / "cosine_24000.csv").read_text())
    rows = (CURVES / "cosine_24000.csv").read_text().splitlines()
    scaled = [rows[0]] + [",".join([s, repr(float(lr) * 10), loss]) for s, lr, loss in (r.split(",") for r in rows[1:])]
    b = file("b/run.csv", "\n".join(scaled) + "\n")
    cases["csv-same-name-in-two-folders"] = (
        ["law", "fit", str(a), str(b), "--out", str(out / "law.json")],
        {},
        ["the runs' peak LRs differ 10x", f"{b}: 0.003", f"{a}: 0.0003"],
    )

    # --- plot --metrics and law predict --metrics (rows batch,value) ---
    p = file("metrics-inf.csv", "batch,value\n100,3.0\n200,inf\n")
    cases["metrics-inf-value"] = (_plot(p, out), {}, [f"--metrics {p}:3:", "value inf is not finite"])
    params = dict(zip(FORMS["multipower"].names, LAW, strict=True))
    law = file("law.json", json.dumps({"foundry_ext_law": 1, "form": "multipower", "params": params}))
    cases["predict-metrics-inf-value"] = (
        ["law", "predict", str(law), *PLATEAU, "--metrics", str(p)],
        {},
        [f"--metrics {p}:3:", "value inf is not finite"],
    )
    p = file("metrics-inf-batch.csv", "batch,value\n100,3.0\ninf,2.9\n")
    cases["metrics-inf-batch"] = (_plot(p, out), {}, [f"--metrics {p}:3:", "batch inf must be an integer >= 0"])
    p = file("metrics-latin1.csv", b"batch,value\n100,3.0\n200,2.9 \xe9\n")
    cases["metrics-bytes-not-utf8"] = (_plot(p, out), {}, [f"--metrics {p}:3:", "byte 0xe9 at column 9"])
    p = file("metrics-long.csv", "batch,value\n100," + "1" * 100_000 + "\n")
    cases["metrics-cell-over-the-field-limit"] = (_plot(p, out), {}, [f"--metrics {p}:2:", "longer than 65,536"])
    p = file("metrics-unsorted.csv", "batch,value\n200,3.0\n100,2.9\n")
    cases["metrics-unsorted"] = (_plot(p, out), {}, [f"--metrics {p}:3:", "batch 100 comes after batch 200"])

    # --- MLflow runs ---

    def fit_mlflow(*sources: str) -> list[str]:
        return ["law", "fit", *sources, "--metric", METRIC, "--out", str(out / "law.json")]

    root = d / "mlruns"
    if not root.exists():
        log_runs(root.as_uri(), ("cosine", "steps", "empty", "garbage", "nan", "no-lr"))
    by_name = {(m.parent / "tags/mlflow.runName").read_text(): m.parent for m in root.glob("*/*/meta.yaml")}
    good = str(by_name["cosine"])
    (by_name["empty"] / "metrics" / LR_KEY).write_text("")
    cases["mlflow-empty-metric-file"] = (
        fit_mlflow(str(by_name["empty"]), good),
        {},
        [f"{by_name['empty']}: MLflow cannot read the run:", f"Metric '{LR_KEY}' is malformed. No data found."],
    )
    with (by_name["garbage"] / "metrics" / METRIC).open("a") as f:
        f.write("1700000000 3.0 twelve\n")
    cases["mlflow-garbage-metric-line"] = (
        fit_mlflow(str(by_name["garbage"]), good),
        {},
        [  # issue 46: MLflow's "invalid literal for int()" named neither the metric, the file nor the line
            f"{by_name['garbage']}: metric '{METRIC}' ({by_name['garbage'] / 'metrics' / METRIC}, line ",
            "'1700000000 3.0 twelve' is not MLflow's 'timestamp value step'",
        ],
    )
    experiment = by_name["cosine"].parent
    cases["mlflow-experiment-folder"] = (  # issue 46: "MLflow cannot read the run: 'experiment_id'"
        fit_mlflow(str(experiment), good),
        {},
        [f"{experiment}: an MLflow experiment folder (mlruns/<experiment>), not a run; name one of its runs, "
         f"{experiment}/<run id> (", " and 3 more), or runs:/RUN_ID"],
    )  # fmt: skip
    with (by_name["nan"] / "metrics" / METRIC).open("a") as f:
        f.write("1700000000 nan 63\n")
    cases["mlflow-nan-loss"] = (
        fit_mlflow(str(by_name["nan"]), good),
        {},
        [f"{by_name['nan']}: metric '{METRIC}' is nan at step 63; expected finite values"],
    )
    (by_name["no-lr"] / "metrics" / LR_KEY).unlink()
    cases["mlflow-no-lr-metric"] = (
        fit_mlflow(str(by_name["no-lr"]), good),
        {},
        [
            f"{by_name['no-lr']}: no lr_monitor metric (lr-<optimizer>/group0)",
            f"metrics it has: loss/train/total, {METRIC}",
        ],
    )
    cases["mlflow-wrong-metric"] = (
        ["law", "fit", str(by_name["steps"]), good, "--out", str(out / "law.json")],
        {},
        [f"{by_name['steps']}: no metric 'metrics/eval/LanguageCrossEntropy' (--metric); metrics it has: "],
    )
    no_meta = d / "mlruns-copy" / "0" / "abc"
    (no_meta / "metrics").mkdir(parents=True, exist_ok=True)
    cases["mlflow-folder-without-meta"] = (fit_mlflow(str(no_meta), good), {}, [f"{no_meta}: a folder without"])
    store = {"MLFLOW_TRACKING_URI": root.as_uri()}
    cases["mlflow-runs-unknown-id"] = (
        fit_mlflow("runs:/0123456789abcdef", good),
        store,
        ["runs:/0123456789abcdef (MLFLOW_TRACKING_URI=file://", "Run '0123456789abcdef' not found"],
    )
    cases["mlflow-runs-without-id"] = (fit_mlflow("runs:/", good), store, ["runs:/: expected runs:/RUN_ID"])
    cases["mlflow-runs-artifact-path"] = (
        fit_mlflow(f"runs:/{by_name['steps'].name}/model", good),
        store,
        ["expected runs:/RUN_ID"],
    )
    db = d / "missing.db"
    cases["mlflow-sqlite-missing-database"] = (
        fit_mlflow("runs:/abc", good),
        {"MLFLOW_TRACKING_URI": f"sqlite:///{db}"},
        [f"no such database file {db}"],
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there
    cases["mlflow-server-not-answering"] = (
        fit_mlflow("runs:/abc", good),
        {"MLFLOW_TRACKING_URI": f"http://127.0.0.1:{port}"},
        [f"runs:/abc (MLFLOW_TRACKING_URI=http://127.0.0.1:{port}): MLflow cannot read the run:"],
    )
    cases["plot-mlflow-wrong-monitor"] = (
        _plot(by_name["steps"], out),
        {},
        [f"--metrics {by_name['steps']}: the run has no metric 'metrics/eval/LanguageCrossEntropy'", "it logged:"],
    )
    return cases
