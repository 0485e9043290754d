"""This package's tiny runs (bench/data/law-tiny-1000ba.json) as step,lr,loss CSVs the CLI reads."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.launcher import REPO

TINY = REPO / "bench/data/law-tiny-1000ba.json"


def write_csvs(folder: Path, names: tuple[str, ...], seed: str = "17") -> list[Path]:
    """The runs ``names`` of ``seed`` as CSVs in ``folder`` (a row per batch for the LR, the evals as losses)."""
    runs = json.loads(TINY.read_text())
    paths = []
    for name in names:
        r = runs[name][seed]
        evals = dict((int(b), v) for b, v in r["evals"])
        path = folder / f"{name.replace(':', '').replace(' ', '_').replace('%', '')}.csv"
        rows = ["step,lr,loss"]
        rows += [f"{b},{lr!r},{evals.get(b, '')}" for b, lr in enumerate(r["lr"])]
        last = len(r["lr"])
        if last in evals:  # the loss after the last batch: its LR row repeats the last LR
            rows.append(f"{last},{r['lr'][-1]!r},{evals[last]}")
        path.write_text("\n".join(rows) + "\n")
        paths.append(path)
    return paths
