"""``law predict --out``: the PNG of the LR and the predicted loss (``foundry_ext.law.figure``), or one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from foundry_ext.cli import main
from tests.law.paper import CURVES, TRAIN
from tests.support.launcher import REPO

TINY_WSD = REPO / "yamls/tiny-wsd.yaml"


@pytest.fixture(scope="module")
def law(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("law") / "law.json"
    assert main(["law", "fit", *(str(CURVES / f"{n}.csv") for n in TRAIN), "--out", str(path)]) == 0
    return path


def test_predict_draws_the_lr_and_the_predicted_loss(
    law: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from PIL import Image

    out = tmp_path / "law.png"
    assert main(["law", "predict", str(law), str(TINY_WSD), "--out", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"wrote {out}"
    assert Image.open(out).size == (1000, 520)  # 10 x 5.2 inches at 100 dpi


def test_a_file_matplotlib_cannot_write_is_one_line(
    law: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "law.xyz"
    assert main(["law", "predict", str(law), str(TINY_WSD), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()  # the law's warnings first (this YAML's LR is not fitted)
    assert [line for line in err if "error" in line] == err[-1:], err
    assert err[-1].startswith(f"foundry-ext law: error: --out {out}: cannot write: Format 'xyz' is not supported"), err
    assert not out.exists()
