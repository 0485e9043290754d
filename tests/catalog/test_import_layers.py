"""The import-linter contracts of pyproject.toml hold, and they catch an upward import and torch at start-up.

``scripts/test.sh`` runs ``lint-imports`` on the package; here it runs on a copy of the package in a temporary folder,
once as it is (kept) and once with one import added that the layers forbid (broken, naming the import).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.launcher import REPO

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(tmp_path: Path, module: str | None = None, line: str = "") -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on a copy of foundry_ext (``line`` appended to ``module``'s file) with the repo's contracts."""
    shutil.copytree(REPO / "foundry_ext", tmp_path / "foundry_ext", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copyfile(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    if module is not None:
        path = tmp_path / (module.replace(".", "/") + ".py")
        path.write_text(path.read_text() + f"\n{line}\n")
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_package_keeps_every_contract(tmp_path: Path) -> None:
    result = _lint(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in re.sub(r"\x1b\[[0-9;]*m", "", result.stdout)


@pytest.mark.parametrize(
    ("module", "line", "contract", "names"),
    [
        # config is the floor: reaching up to the catalog breaks the package's layers
        ("foundry_ext.config.errors", "import foundry_ext.catalog.registry", "tools -> Composer layer",
         "foundry_ext.config is not allowed to import foundry_ext.catalog"),
        # a schedule model importing the Composer layer: upward, and it would bring Composer into `schedulers`
        ("foundry_ext.schedules.wsd", "from foundry_ext.trainer import schedulers", "tools -> Composer layer",
         "foundry_ext.schedules is not allowed to import foundry_ext.trainer"),
        # a circle inside the Composer layer: the resume check importing the plateau that sits above it
        ("foundry_ext.trainer.resume_check", "import foundry_ext.trainer.plateau", "foundry_ext.trainer:",
         "foundry_ext.trainer.resume_check is not allowed to import foundry_ext.trainer.plateau"),
        # torch at the top of a module that `foundry-ext schedulers` imports
        ("foundry_ext.schedules.base", "import torch", "import neither torch",
         "foundry_ext.cli.schedulers is not allowed to import torch"),
        # a command's module importing another's: the shared work belongs in a tool
        ("foundry_ext.cli.validate", "import foundry_ext.cli.plot", "imports no other command's",
         "foundry_ext.cli.validate is not allowed to import foundry_ext.cli.plot"),
        # torch in the law's maths, even in a function body
        ("foundry_ext.law.multipower", "def _f():\n    import torch", "the law's maths import neither",
         "foundry_ext.law.multipower is not allowed to import torch"),
    ],
)  # fmt: skip
def test_an_import_against_the_layers_breaks_a_contract(
    tmp_path: Path, module: str, line: str, contract: str, names: str
) -> None:
    result = _lint(tmp_path, module, line)
    assert result.returncode == 1, result.stdout + result.stderr
    out = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout)  # rich may colour it
    broken = [row for row in out.splitlines() if row.endswith("BROKEN")]
    assert any(contract in row for row in broken), out
    assert names in out, out
