"""Valid but unusual run logs are read as their plain form: Windows line ends, a UTF-8 BOM, extra or reordered
columns, scientific notation, blank lines; and long logs are read within bounds or refused in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from foundry_ext.cli.plot import read_metrics
from foundry_ext.law.runs import read_csv
from foundry_ext.runlog import MAX_ROWS
from tests.runlog.hostile import CURVES
from tests.support.launcher import REPO

PLAIN = (CURVES / "cosine_24000.csv").read_text()
ROWS = [r.split(",") for r in PLAIN.splitlines()[1:]]


def _variants() -> dict[str, str]:
    body = "\n".join(",".join(r) for r in ROWS)
    return {
        "crlf": "step,lr,loss\r\n" + "\r\n".join(",".join(r) for r in ROWS) + "\r\n",
        "bom": "\ufeffstep,lr,loss\n" + body + "\n",
        "bom-crlf": "\ufeffstep,lr,loss\r\n" + body.replace("\n", "\r\n") + "\r\n",
        "extra-columns": "tokens,step,lr,loss,note\n"
        + "\n".join(f"{int(s) * 4096},{s},{lr},{loss},x" for s, lr, loss in ROWS)
        + "\n",
        "reordered-upper-case": "LOSS, Step ,LR\n" + "\n".join(f"{loss},{s},{lr}" for s, lr, loss in ROWS) + "\n",
        "scientific": "step,lr,loss\n"
        + "\n".join(
            f"{float(s):e},{float(lr):.17e},{float(loss):.17e}" if loss else f"{s},{lr}," for s, lr, loss in ROWS
        )
        + "\n",
        "blank-lines-short-rows": "step,lr,loss\n\n"
        + "\n".join(f"{s},{lr}" if not loss else f"{s},{lr},{loss}" for s, lr, loss in ROWS)
        + "\n\n\n",
    }


@pytest.mark.parametrize("name", list(_variants()))
def test_a_law_csv_variant_reads_as_the_plain_file(name: str, tmp_path: Path) -> None:
    want = read_csv(str(CURVES / "cosine_24000.csv"))
    path = tmp_path / "run.csv"
    path.write_bytes(_variants()[name].encode())
    got = read_csv(str(path))
    assert got.lr.tolist() == want.lr.tolist()
    assert got.steps.tolist() == want.steps.tolist() and len(got.steps) > 100
    assert got.loss.tolist() == want.loss.tolist()
    assert got.warmup == want.warmup


def test_a_metrics_csv_variant_reads_as_the_plain_file(tmp_path: Path) -> None:
    plain = tmp_path / "plain.csv"
    plain.write_text("100,3.5\n200,3.25\n300,3.125\n1000,3\n")
    unusual = tmp_path / "unusual.csv"
    unusual.write_bytes(
        b"\xef\xbb\xbfbatch,value,extra\r\n# a comment\r\n100ba,3.5,x\r\n\r\n2e2,325e-2,y\r\n"
        b"300,3.125\r\n1000ba,3.0e0,z\r\n"
    )
    assert (
        read_metrics(str(unusual)) == read_metrics(str(plain)) == [(100, 3.5), (200, 3.25), (300, 3.125), (1000, 3.0)]
    )


def _fresh(code: str) -> list[str]:
    probe = (
        "def peak_mb():\n"
        "    with open('/proc/self/status') as f:\n"
        "        return next(int(l.split()[1]) for l in f if l.startswith('VmHWM:')) / 1024\n"
    )
    done = subprocess.run([sys.executable, "-c", probe + code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()


def _write_rows(path: Path, rows: int, header: str = "step,lr,loss\n") -> None:
    with path.open("w") as f:
        f.write(header)
        chunk = 1_000_000
        for start in range(0, rows, chunk):
            f.write("".join(f"{i},0.001,{3 + 1 / (i + 1)!r}\n" for i in range(start, min(rows, start + chunk))))


@pytest.mark.slow
def test_ten_million_rows_are_refused_in_bounded_time_and_memory(tmp_path: Path) -> None:
    big = tmp_path / "big.csv"
    _write_rows(big, 10_000_000)
    metrics = tmp_path / "metrics.csv"
    _write_rows(metrics, 10_000_000, header="batch,value\n")
    code = (
        "import io, contextlib, time\n"
        "from foundry_ext.cli import main\n"
        "from foundry_ext.cli.law.inputs import yaml_lrs\n"
        f"for argv in (['law', 'fit', {str(big)!r}, {str(big)!r}], "
        f"['plot', 'yamls/tiny-plateau.yaml', '--metrics', {str(metrics)!r}, '--out', {str(tmp_path / 'a.png')!r}]):\n"
        "    err = io.StringIO(); t = time.perf_counter()\n"
        "    with contextlib.redirect_stderr(err): rc = main(argv)\n"
        "    print(rc, round(time.perf_counter() - t, 2), err.getvalue().strip())\n"
        "print(peak_mb())\n"
    )
    *lines, peak = _fresh(code)
    print("", *lines, f"peak {peak} MB", sep="\n")  # the figures (pytest -s)
    for line, path, rows in zip(lines, (big, metrics), ("1,000,000", "1,000,000"), strict=True):
        rc, seconds, message = line.split(" ", 2)
        assert rc == "2" and float(seconds) < 10, line
        assert f"{path}:{int(rows.replace(',', '')) + 2}: more than {rows} rows" in message, line
    assert float(peak) < 500


@pytest.mark.slow
def test_a_million_rows_are_read_in_bounded_time_and_memory(tmp_path: Path) -> None:
    big = tmp_path / "big.csv"
    _write_rows(big, MAX_ROWS)
    code = (
        "import time\n"
        "from foundry_ext.law.runs import read_csv\n"
        f"t = time.perf_counter(); trace = read_csv({str(big)!r})\n"
        "print(trace.batches, len(trace.steps), trace.loss[-1], round(time.perf_counter() - t, 2), peak_mb())\n"
    )
    batches, steps, last, seconds, peak = _fresh(code)[-1].split()
    assert (int(batches), int(steps), float(last)) == (MAX_ROWS, MAX_ROWS, 3 + 1 / MAX_ROWS)
    assert float(seconds) < 10 and float(peak) < 500
