"""The run-log reader reads the same runs from a file-store folder, a SQLite database and a real tracking server.

Every source goes through MLflow's own client (foundry_ext.runlog.mlflow_log); the runs are logged by MLflow's client
as Composer logs them (repeated LR values dropped), and must come back as the LR of every batch and the losses.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from foundry_ext.cli import main
from foundry_ext.law.runs import read_run
from foundry_ext.runlog import read_series
from tests.runlog.runs import BATCHES, LR_KEY, METRIC, expected, log_runs, run_folder
from tests.support.launcher import REPO
from tests.support.multirank import free_port


def _check(trace, name: str) -> None:
    lr, steps, losses = expected(name)
    assert trace.batches == BATCHES
    assert trace.lr.tolist() == lr.tolist()  # exact: the logged floats, the dropped repeats filled in
    assert trace.steps.tolist() == steps.tolist()
    assert trace.loss.tolist() == losses.tolist()


def test_a_file_store_folder_and_runs_id_of_a_file_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "mlruns"
    ids = log_runs(root.as_uri())
    for name, run_id in ids.items():
        trace = read_run(str(run_folder(root, run_id)), METRIC)
        assert trace.name == name
        _check(trace, name)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", root.as_uri())
    for name, run_id in ids.items():
        _check(read_run(f"runs:/{run_id}", METRIC), name)


def test_runs_id_of_a_sqlite_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    ids = log_runs(uri)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    for name, run_id in ids.items():
        trace = read_run(f"runs:/{run_id}", METRIC)
        assert trace.name == name
        _check(trace, name)
    assert read_series(f"runs:/{ids['steps']}", METRIC) == list(
        zip(expected("steps")[1].tolist(), expected("steps")[2].tolist(), strict=True)
    )
    assert read_series(f"runs:/{ids['cosine']}", LR_KEY)[:2] == [(1, 0.0), (2, 0.1 / 6)]


def test_csv_law_fit_does_not_import_mlflow(tmp_path: Path) -> None:
    curves = REPO / "bench/data/loss-curves/25M"
    code = (
        "import sys; from foundry_ext.cli import main; "
        f"rc = main(['law', 'fit', {str(curves / 'cosine_24000.csv')!r}, {str(curves / 'constant_24000.csv')!r}, "
        f"'--out', {str(tmp_path / 'law.json')!r}]); "
        "print(rc, *(m in sys.modules for m in ('mlflow', 'composer', 'torch', 'llmfoundry')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert out.splitlines()[-1] == "0 False False False False"


@pytest.fixture
def server(tmp_path: Path):
    """``mlflow server`` with a SQLite backend, on a free port; its URI."""
    # MLflow 2.22's SQL store cannot import under SQLAlchemy 2.1 (both in the lock): the server's processes get the
    # package's alias (foundry_ext.runlog.mlflow_log._sqlalchemy_compat) through a sitecustomize module
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "from foundry_ext.runlog.mlflow_log import _sqlalchemy_compat\n_sqlalchemy_compat()\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    env.pop("MLFLOW_TRACKING_URI", None)
    port = free_port()
    mlflow = Path(sys.executable).parent / "mlflow"
    cmd = [str(mlflow), "server", "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
           "--default-artifact-root", str(tmp_path / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
           "--workers", "1"]  # fmt: skip
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as r:
                    if r.read() == b"OK":
                        break
            except OSError:
                pass
            assert proc.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "mlflow server did not answer /health in 120 s"
            time.sleep(0.5)
        yield uri
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


@pytest.mark.slow
def test_law_fit_and_plot_metrics_read_runs_of_a_real_tracking_server(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = log_runs(server)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server)
    for name, run_id in ids.items():
        _check(read_run(f"runs:/{run_id}", METRIC), name)
    # the law fitted on the server's runs is the one fitted on the same runs in a file store
    assert main(["law", "fit", *(f"runs:/{i}" for i in ids.values()), "--metric", METRIC,
                 "--out", str(tmp_path / "server.json")]) == 0  # fmt: skip
    assert "multipower law fitted on 2 runs" in capsys.readouterr().out
    root = tmp_path / "mlruns"
    local = log_runs(root.as_uri())
    assert main(["law", "fit", *(str(run_folder(root, i)) for i in local.values()), "--metric", METRIC,
                 "--out", str(tmp_path / "local.json")]) == 0  # fmt: skip
    capsys.readouterr()
    server_law = json.loads((tmp_path / "server.json").read_text())
    local_law = json.loads((tmp_path / "local.json").read_text())
    assert server_law["params"] == local_law["params"]
    # plot --metrics: the plateau's monitored metric from the server gives the cuts of the same values in a CSV
    from mlflow.tracking import MlflowClient

    from tests.cli.test_cli_metrics_mlflow import ARGS, CSV, MONITOR

    client = MlflowClient(server)
    run_id = client.create_run(client.create_experiment("plateau")).info.run_id
    for line in CSV.read_text().splitlines():
        batch, _, value = line.partition(",")
        if batch.strip().isdigit():
            client.log_metric(run_id, MONITOR, float(value), step=int(batch))
    assert main(["plot", *ARGS, "--metrics", str(CSV), "--out", str(tmp_path / "a.png")]) == 0
    from_csv = [line for line in capsys.readouterr().out.splitlines() if "cut" in line]
    assert main(["plot", *ARGS, "--metrics", f"runs:/{run_id}", "--out", str(tmp_path / "b.png")]) == 0
    from_server = [line for line in capsys.readouterr().out.splitlines() if "cut" in line]
    assert len(from_csv) > 2 and from_server == from_csv
