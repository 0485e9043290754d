"""CLI start-up and ``validate`` time, as ratios to ``python -c "import torch"`` measured side by side.

Each round runs every command once, each right after a run of the baseline (``python -c "import torch"``), and takes
the ratio of the pair: a ratio stays meaningful when the machine's speed drifts. Wall seconds of whole processes
(``time.perf_counter`` around ``subprocess.run``), median over rounds, after one warm-up round.

    .venv/bin/python bench/bench_cli_startup.py            # ~2 min; --rounds 7
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
CLI = str(BIN / "foundry-ext")


def commands(tmp: Path) -> dict[str, list[str]]:
    torch_yaml = tmp / "torch.yaml"
    text = (ROOT / "yamls" / "tiny-wsd.yaml").read_text()
    start = text.index("\nscheduler:") + 1
    end = text.index("\n\n", start)
    torch_yaml.write_text(
        text[:start] + "scheduler: {name: torch_lr_scheduler, type: StepLR, step_size: 10}" + text[end:]
    )
    composer_yaml = tmp / "composer.yaml"
    composer_yaml.write_text(text[:start] + "scheduler: {name: cosine_with_warmup, t_warmup: 20ba}" + text[end:])
    return {
        "foundry-ext --help": [CLI, "--help"],
        "foundry-ext --version": [CLI, "--version"],
        "foundry-ext schedulers": [CLI, "schedulers"],
        "foundry-ext schema": [CLI, "schema"],
        "validate yamls/tiny-wsd.yaml (WSD)": [CLI, "validate", "yamls/tiny-wsd.yaml"],
        "validate yamls/tiny-plateau.yaml (plateau)": [CLI, "validate", "yamls/tiny-plateau.yaml"],
        "validate yamls/mpt-125m-torch-onecycle.yaml": [CLI, "validate", "yamls/mpt-125m-torch-onecycle.yaml"],
        "validate, torch_lr_scheduler StepLR": [CLI, "validate", str(torch_yaml)],
        "validate, llm-foundry's cosine_with_warmup": [CLI, "validate", str(composer_yaml)],
        "plot yamls/tiny-wsd.yaml": [CLI, "plot", "yamls/tiny-wsd.yaml", "--out", str(tmp / "lr.png")],
        "inspect yamls/tiny-wsd.yaml (not a checkpoint)": [CLI, "inspect", "yamls/tiny-wsd.yaml"],
        'python -c "import composer"': [sys.executable, "-c", "import composer"],
    }


# What one `validate` spends its time on, phase by phase, in a fresh interpreter (seconds, perf_counter).
BREAKDOWN = r"""
import json, sys, time
t0 = time.perf_counter()
import omegaconf, pydantic, yaml  # noqa: F401
t1 = time.perf_counter()
from foundry_ext.config import preflight, train_yaml  # noqa: F401  (the models and the registry)
from foundry_ext.cli import validate  # noqa: F401
t2 = time.perf_counter()
cfg = train_yaml.load_train_config(sys.argv[1])
t3 = time.perf_counter()
found = preflight.check_train_config(cfg)
t4 = time.perf_counter()
problems = validate._evaluate(cfg, found, [])
t5 = time.perf_counter()
print(json.dumps({"omegaconf, pydantic, yaml": t1 - t0, "foundry-ext's models and CLI": t2 - t1,
                  "load and resolve the YAML": t3 - t2, "pre-flight checks": t4 - t3,
                  "evaluate the schedule (first and last batch)": t5 - t4}))
"""


def breakdown(path: str, rounds: int) -> dict[str, float]:
    """Median seconds per phase of validating ``path``, and the interpreter's own start-up."""
    import json

    runs = []
    for _ in range(rounds + 1):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", BREAKDOWN, path], cwd=ROOT, capture_output=True, text=True)
        total = time.perf_counter() - start
        phases = json.loads(done.stdout.splitlines()[-1])
        phases["Python start-up and exit"] = total - sum(phases.values())
        runs.append(phases)
    return {k: statistics.median(r[k] for r in runs[1:]) for k in runs[0]}


def wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", nargs="*", help="only the commands whose label contains one of these words")
    parser.add_argument("--breakdown", action="store_true", help="also: what validate spends its time on")
    args = parser.parse_args()
    baseline = [sys.executable, "-c", "import torch"]
    with tempfile.TemporaryDirectory() as tmp:
        cmds = commands(Path(tmp))
        if args.only:
            cmds = {k: v for k, v in cmds.items() if any(word in k for word in args.only)}
        times: dict[str, list[float]] = {k: [] for k in cmds}
        ratios: dict[str, list[float]] = {k: [] for k in cmds}
        base_times: list[float] = []
        for round_ in range(args.rounds + 1):  # round 0 warms the file cache, not counted
            for label, cmd in cmds.items():
                b = wall(baseline)
                a = wall(cmd)
                if round_:
                    base_times.append(b)
                    times[label].append(a)
                    ratios[label].append(a / b)
    load = os.getloadavg()[0]
    print(
        f'{args.rounds} rounds; 1-min load average at the end {load:.1f}; baseline `python -c "import torch"`: '
        f"median {statistics.median(base_times):.2f} s"
    )
    print()
    print("| command | median wall s | ratio to `import torch` (median, min-max) |")
    print("|---|---|---|")
    for label in cmds:
        r = ratios[label]
        print(
            f"| `{label}` | {statistics.median(times[label]):.2f} | {statistics.median(r):.2f}x "
            f"({min(r):.2f}-{max(r):.2f}) |"
        )
    if args.breakdown:
        for path in ("yamls/tiny-wsd.yaml", "yamls/mpt-125m-torch-onecycle.yaml"):
            phases = breakdown(path, args.rounds)
            print(f"\n`foundry-ext validate {path}`, median seconds per phase over {args.rounds} runs:\n")
            print("| phase | seconds |\n|---|---|")
            for phase, seconds in phases.items():
                print(f"| {phase} | {seconds:.3f} |")


if __name__ == "__main__":
    main()
