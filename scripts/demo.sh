#!/usr/bin/env bash
# The main demo: set up .venv, write the offline demo data, train the tiny model with WSD through `composer train.py`.
# Extra arguments are llm-foundry overrides, e.g. `bash scripts/demo.sh max_duration=100ba`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
# Let the run write the bytecode of the modules it imports after start-up, once (scripts/setup.sh)
unset PYTHONDONTWRITEBYTECODE
# the marker is written last, so its presence means complete data (skips ~20 s of imports when it is there)
[ -f demo-data/.foundry-ext-demo.json ] || .venv/bin/foundry-ext demo-data demo-data
# A rerun that will continue an earlier run's checkpoints (autoresume=true, or a load_path) says so first: the
# Trainer itself does it silently, and the loss curve then starts mid-run.
.venv/bin/python - "$@" <<'PY'
import os, sys
from omegaconf import OmegaConf as om
cfg = om.merge(om.load("yamls/tiny-wsd.yaml"), om.from_cli(sys.argv[1:]))
folder = str(cfg.save_folder).replace("{run_name}", str(cfg.run_name)).replace("${run_name}", str(cfg.run_name))
latest = os.path.join(folder, "latest-rank0.pt")
if cfg.get("load_path"):
    print(f"demo: resuming from load_path {cfg.load_path} (not a fresh run)")
elif cfg.get("autoresume") and os.path.exists(latest):
    print(f"demo: resuming from the earlier run's checkpoint {latest} -> {os.path.basename(os.path.realpath(latest))} "
          f"(autoresume); delete {os.path.dirname(folder)} to start over")
PY
.venv/bin/composer train.py yamls/tiny-wsd.yaml "$@"

# The closing block, after the launcher's own last lines: what was trained, where it is, what to run next.
folder=$(.venv/bin/python - "$@" <<'PY'
import sys
from omegaconf import OmegaConf as om
cfg = om.merge(om.load("yamls/tiny-wsd.yaml"), om.from_cli(sys.argv[1:]))
print(str(cfg.save_folder).replace("{run_name}", str(cfg.run_name)), cfg.max_duration)
PY
)
read -r checkpoints max_duration <<< "$folder"
overrides=${*:+ $*}
echo
echo "demo: done. Trained a tiny MPT (yamls/tiny-wsd.yaml$overrides: warmup_stable_decay, $max_duration) on ./demo-data."
echo "demo: checkpoint $checkpoints/latest-rank0.pt -> $(readlink "$checkpoints/latest-rank0.pt" || echo none)"
echo "demo: console log $(dirname "$checkpoints")/train-rank0.log"
echo "next:"
echo "  .venv/bin/foundry-ext inspect $checkpoints/latest-rank0.pt   # its time, LR, schedule state"
echo "  .venv/bin/foundry-ext plot yamls/tiny-wsd.yaml$overrides --out out/lr.png   # the LR of every batch it trained"
