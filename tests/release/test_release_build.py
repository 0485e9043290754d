"""The release: ``uv build`` gives a wheel and an sdist that pass ``twine check --strict`` (metadata, and the README
rendered as a package index renders it); the sdist holds what the suite reads; the wheel, installed into a fresh
environment next to the llm-foundry pinned in ``uv.lock``, trains with the stock ``composer train.py``.

The fresh environment holds the wheel alone (``uv pip install --no-deps``, a local file: no index, no cache, no
network) and reaches the lock's stack through a ``.pth`` line naming the set-up ``.venv``'s site-packages, read-only:
the exact versions ``uv.lock`` pins, ~7 GB not copied. It used to install the lock's exported pins with ``uv pip
install --offline``, which resolves each ``name==version`` through the index pages uv caches: on a machine whose uv
cache was empty before ``uv sync`` (which fetches the lock's URLs and caches the wheels, not the pages) it failed with
``accelerate==1.8.1 ... unsatisfiable`` (issue 46). Python does not read the ``.pth`` files of a folder a ``.pth``
names, so ``.venv``'s editable foundry-ext is not on the path, and the wheel's own metadata comes first for entry
points. Training runs in a folder outside the repository, with copies of ``train.py`` and the YAML, and no
``PYTHONPATH``: foundry-ext, its entry points and its config transforms come from the installed wheel.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from tests.support.launcher import REPO

UV = ["bash", str(REPO / "scripts" / "uv.sh")]
TWINE = Path(sys.executable).with_name("twine")
VERSION = "0.1.0"
# the sdist holds these folders whole (MANIFEST.in), and these files at its top
SDIST_FOLDERS = ("bench", "docs", "foundry_ext", "scripts", "tests", "yamls")
SDIST_FILES = (
    ".ci/run", "CHANGELOG.md", "LICENSE", "MANIFEST.in", "README.md", "pyproject.toml", "train.py", "uv.lock",
)  # fmt: skip
WHEEL, SDIST = f"foundry_ext-{VERSION}-py3-none-any.whl", f"foundry_ext-{VERSION}.tar.gz"

pytestmark = pytest.mark.slow


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``uv build``'s output folder: the sdist, and the wheel built from it (uv's default)."""
    out = tmp_path_factory.mktemp("dist")
    _run([*UV, "build", "--quiet", "-o", str(out)], cwd=REPO)
    return out


def test_build_gives_one_wheel_and_one_sdist(dist: Path) -> None:
    assert sorted(p.name for p in dist.iterdir() if p.suffix in {".whl", ".gz"}) == [
        f"foundry_ext-{VERSION}-py3-none-any.whl",
        f"foundry_ext-{VERSION}.tar.gz",
    ]


def test_twine_check_strict_passes(dist: Path) -> None:
    done = _run([str(TWINE), "check", "--strict", str(dist / WHEEL), str(dist / SDIST)])
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_the_wheel_metadata_is_complete(dist: Path) -> None:
    with zipfile.ZipFile(dist / f"foundry_ext-{VERSION}-py3-none-any.whl") as wheel:
        metadata = wheel.read(f"foundry_ext-{VERSION}.dist-info/METADATA").decode()
        names = set(wheel.namelist())
        entry_points = wheel.read(f"foundry_ext-{VERSION}.dist-info/entry_points.txt").decode()
    headers = [line for line in metadata.split("\n\n")[0].splitlines() if not line.startswith(" ")]
    assert "License-Expression: Apache-2.0" in headers
    assert "License-File: LICENSE" in headers
    assert f"foundry_ext-{VERSION}.dist-info/licenses/LICENSE" in names
    assert not any(h.startswith("License: ") for h in headers)  # the deprecated free-text field
    assert "Author: The foundry-ext authors" in headers
    assert "Project-URL: Repository, https://github.com/foundry-ext/foundry-ext" in headers
    assert "Classifier: Programming Language :: Python :: 3.11" in headers
    assert any(h.startswith("Keywords: ") and "llm-foundry" in h for h in headers)
    assert "Description-Content-Type: text/markdown" in headers
    assert "Requires-Dist: llm-foundry<0.23,>=0.22" in headers
    assert all(n.startswith(("foundry_ext/", f"foundry_ext-{VERSION}.dist-info/")) for n in names)
    assert "foundry_ext/py.typed" in names
    for group in ("[llmfoundry_schedulers]", "[llmfoundry_callbacks]", "[llmfoundry_config_transforms]"):
        assert group in entry_points


def test_the_sdist_holds_the_suite_and_what_it_reads(dist: Path) -> None:
    with tarfile.open(dist / f"foundry_ext-{VERSION}.tar.gz") as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n and sdist.getmember(n).isfile()}
    for name in (
        "LICENSE", "CHANGELOG.md", "train.py", "uv.lock", "scripts/demo.sh", "scripts/uv.sh", "tests/conftest.py",
        "tests/docs/README.md", "tests/resume/fixtures/plateau_resume/ep0-ba12-rank0.pt", "docs/img/plateau.png",
        "docs/img/plateau-metrics.csv", "yamls/tiny-wsd.yaml", "bench/data/loss-curves/LICENSE",
        "bench/data/loss-curves/25M/cosine_24000.csv", "bench/data/law-tiny-1000ba.json",
    ):  # fmt: skip
        assert name in names, name
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert not [n for n in names if n.startswith(("demo-data/", "runs/", "out/", ".venv/", "build/", "dist/"))]
    if (REPO / ".git").exists():  # in a clone: exactly the tracked files of those folders, and the top files
        tracked = set(_run(["git", "ls-files", *SDIST_FOLDERS, *SDIST_FILES], cwd=REPO).stdout.split())
        built = {n for n in names if not n.startswith("foundry_ext.egg-info/")} - {"PKG-INFO", "setup.cfg"}
        assert sorted(built - tracked) == [] and sorted(tracked - built) == []


def test_the_installed_wheel_trains_with_the_stock_train_py(
    dist: Path, demo_data: Path, tmp_path: Path, record_property
) -> None:
    start = time.perf_counter()
    venv = tmp_path / "venv"
    _run([*UV, "venv", "--quiet", "--python", sys.executable, str(venv)], cwd=REPO)
    python = venv / "bin" / "python"
    stack = sysconfig.get_paths()["purelib"]  # the set-up .venv's site-packages: the lock's versions
    site = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    Path(site, "_lock_stack.pth").write_text(stack + "\n")
    wheel = dist / f"foundry_ext-{VERSION}-py3-none-any.whl"
    _run([*UV, "pip", "install", "--offline", "--quiet", "--python", str(python), "--no-deps", str(wheel)], cwd=REPO)
    installed = time.perf_counter() - start

    work = tmp_path / "work"  # outside the repository: copies of train.py and the YAML, no source tree on the path
    work.mkdir()
    shutil.copy(REPO / "train.py", work / "train.py")
    shutil.copy(REPO / "yamls" / "tiny-wsd.yaml", work / "tiny-wsd.yaml")
    # PYTHONDONTWRITEBYTECODE dropped: a user's Python writes each module's bytecode the first time (pip compiles it at
    # install); with it set (as in some sandboxes) every process here compiled the whole stack from source (~40 s more).
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE"}}
    env |= {"PYTHONNOUSERSITE": "1", "HF_HUB_OFFLINE": "1"}

    show = (
        "import importlib.metadata as m, foundry_ext, llmfoundry; print(foundry_ext.__file__, foundry_ext.__version__, "
        "m.distribution('foundry-ext')._path, sorted({e.value for e in m.entry_points(group='llmfoundry_schedulers')"
        " if e.name == 'warmup_stable_decay'}))"
    )
    where = _run([str(python), "-c", show], cwd=work, env=env).stdout
    assert where.startswith(str(venv / "lib")) and where.split()[1] == VERSION, where
    assert where.split()[2].startswith(str(venv / "lib")), where  # the wheel's metadata, not .venv's editable one
    validate = _run([str(venv / "bin" / "foundry-ext"), "validate", "tiny-wsd.yaml"], cwd=work, env=env)
    assert validate.stdout.splitlines()[-1].startswith("OK: warmup_stable_decay (t_warmup=20ba, t_decay=0.2dur")

    # the composer launcher of the lock's Composer, run by the fresh environment's Python (its ranks are too)
    launcher = [str(python), "-m", "composer.cli.launcher"]
    train = [*launcher, "train.py", "tiny-wsd.yaml", f"variables.data_local={demo_data}"]
    done = _run([*train, "max_duration=6ba", "eval_interval=3ba", "scheduler.t_warmup=2ba"], cwd=work, env=env)
    output = done.stdout + done.stderr
    assert "Train time/batch: 6" in output, output[-3000:]
    shown = output.replace(str(demo_data), "<demo-data>").replace(stack, "<lock-stack>")
    assert str(REPO) not in shown  # nothing of the source tree was used (the stack's files are .venv's)
    checkpoint = work / "runs" / "tiny-wsd" / "checkpoints" / "latest-rank0.pt"
    assert os.path.realpath(checkpoint).endswith("ep0-ba6-rank0.pt")
    elapsed = time.perf_counter() - start
    record_property("install_s", round(installed, 1))
    record_property("install_and_train_s", round(elapsed, 1))
    print(f"release: fresh venv installed in {installed:.1f} s; installed, validated and trained in {elapsed:.1f} s")

    # the wheel's config transform runs in training: a bad schedule stops before anything is built, one line
    bad = subprocess.run([*train, "max_duration=4ba"], cwd=work, env=env, capture_output=True, text=True, check=False)
    assert bad.returncode != 0
    assert "foundry-ext: error: scheduler.t_decay: warmup and decay do not fit before t_max" in bad.stderr
    assert "Traceback" not in bad.stderr
