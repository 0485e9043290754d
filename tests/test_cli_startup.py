"""The CLI starts without importing torch or Composer where it does not use them (bench/bench_cli_startup.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "composer", "llmfoundry", "transformers", "matplotlib")

PROBE = """
import sys
from foundry_ext.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print("LOADED", *sorted(m for m in {heavy!r} if m in sys.modules))
"""


def loaded(*argv: str) -> tuple[set[str], str]:
    """Run the CLI in a fresh interpreter; return the heavy packages it imported, and its output."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    line = [x for x in done.stdout.splitlines() if x.startswith("LOADED")][-1]
    return set(line.split()[1:]), done.stdout + done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["--version"],
        ["schedulers"],
        ["schedulers", "warmup_stable_decay", "torch_lr_scheduler"],
        ["schema"],
        ["plot", "--help"],
        ["validate", "yamls/tiny-wsd.yaml"],  # this package's schedule and llm-foundry's callbacks: nothing heavy
    ],
    ids=" ".join,
)
def test_no_heavy_import(argv: list[str]) -> None:
    modules, output = loaded(*argv)
    assert modules == set(), output


def with_scheduler(tmp_path: Path, block: str) -> Path:
    text = (ROOT / "yamls" / "tiny-wsd.yaml").read_text()
    start = text.index("\nscheduler:") + 1
    end = text.index("\n\n", start)
    config = tmp_path / "cfg.yaml"
    config.write_text(text[:start] + f"scheduler: {block}" + text[end:])
    return config


def test_validate_imports_torch_only_for_a_torch_scheduler(tmp_path: Path) -> None:
    config = with_scheduler(tmp_path, "{name: torch_lr_scheduler, type: StepLR, step_size: 10}")
    modules, output = loaded("validate", str(config))
    assert "OK: torch_lr_scheduler" in output
    assert modules == {"torch"}


def test_plot_of_this_package_s_schedule_imports_no_torch(tmp_path: Path) -> None:
    modules, output = loaded("plot", "yamls/tiny-wsd.yaml", "--out", str(tmp_path / "lr.png"))
    assert "wrote" in output
    assert modules == {"matplotlib"}


def test_version_names_the_stack() -> None:
    _, output = loaded("--version")
    assert output.startswith("foundry-ext ") and "composer 0.32" in output and "torch 2.7" in output


def test_llm_foundry_s_own_schedule_validates_without_composer_and_plots_without_llm_foundry(tmp_path: Path) -> None:
    config = with_scheduler(tmp_path, "{name: cosine_with_warmup, t_warmup: 20ba}")
    modules, output = loaded("validate", str(config))
    assert "OK: cosine_with_warmup" in output and modules == set()
    modules, output = loaded("plot", str(config), "--out", str(tmp_path / "lr.png"))
    assert "wrote" in output
    assert "composer" in modules and "llmfoundry" not in modules  # Composer's formula: its class, not llm-foundry
