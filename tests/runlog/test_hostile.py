"""Every hostile or malformed run log: one line naming the file (and line or key), the value and what is allowed.

The corpus is tests/runlog/hostile.py (real files: a cell over the csv module's field limit, bytes that are not
UTF-8, an unreadable file, a pipe, an empty MLflow metric file, ``inf`` in a ``--metrics`` file, a 1e12-batch gap,
two runs named alike in two folders, a tracking server that does not answer, ...). Each case runs in this process
(exit 2, the expected fragments, one line, no traceback); all of them run again in a fresh process that must not
import Composer, llm-foundry or torch, answer each within 10 s and stay under 500 MB.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from foundry_ext.cli import main
from tests.runlog.hostile import build
from tests.support.launcher import REPO


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory):
    return build(tmp_path_factory.mktemp("hostile"))


NAMES = [
    "csv-cell-over-the-field-limit", "csv-bytes-not-utf8", "csv-utf16", "csv-unreadable", "csv-a-pipe",
    "csv-a-socket", "csv-missing", "csv-dangling-link", "csv-1e12-batch-gap", "csv-step-overflows", "csv-nul-byte",
    "csv-empty", "csv-header-only", "csv-lr-not-a-number", "csv-fractional-step", "csv-inf-loss",
    "csv-same-name-in-two-folders", "metrics-inf-value", "predict-metrics-inf-value", "metrics-inf-batch",
    "metrics-bytes-not-utf8", "metrics-cell-over-the-field-limit", "metrics-unsorted", "mlflow-empty-metric-file",
    "mlflow-garbage-metric-line", "mlflow-experiment-folder", "mlflow-nan-loss", "mlflow-no-lr-metric",
    "mlflow-wrong-metric",
    "mlflow-folder-without-meta", "mlflow-runs-unknown-id", "mlflow-runs-without-id", "mlflow-runs-artifact-path",
    "mlflow-sqlite-missing-database", "mlflow-server-not-answering", "plot-mlflow-wrong-monitor",
]  # fmt: skip


def test_the_corpus_is_the_list(corpus) -> None:
    assert sorted(corpus) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_one_line_exit_2(
    name: str, corpus, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, env, expected = corpus[name]
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for fragment in expected:
        assert fragment in err, err


RUNNER = """
import contextlib, io, json, os, sys, time
from foundry_ext.cli import main
def peak_mb():  # VmHWM: this process's own peak (ru_maxrss keeps the parent's across fork and exec)
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
cases = json.loads(sys.argv[1])
result = {}
for name, (argv, env) in cases.items():
    saved = dict(os.environ)
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    os.environ.update(env)
    err = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(argv)
    peak = peak_mb()
    result[name] = [rc, err.getvalue(), time.perf_counter() - start, peak]
    os.environ.clear()
    os.environ.update(saved)
result["_modules"] = sorted(m for m in ("composer", "llmfoundry", "torch") if m in sys.modules)
result["_peak_mb"] = peak_mb()
print(json.dumps(result))
"""


def run_fresh(cases: dict) -> dict:
    """Run ``cases`` (name: (argv, env, ...)) in one fresh process; rc, stderr and seconds by name."""
    arg = json.dumps({name: [argv, env] for name, (argv, env, *_) in cases.items()})
    done = subprocess.run([sys.executable, "-c", RUNNER, arg], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.slow  # imports MLflow in a fresh process: ~5 s
def test_in_a_fresh_process_without_composer_within_10s_and_500mb(corpus) -> None:
    result = run_fresh(corpus)
    assert result.pop("_modules") == []
    assert result.pop("_peak_mb") < 500
    for name, (rc, err, seconds, _) in result.items():
        assert rc == 2 and err.count("\n") == 1, (name, err)
        assert seconds < 10, (name, seconds)
