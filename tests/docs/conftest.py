"""Every code block of README.md and docs/*.md runs in the suite, through Sybil.

Languages, each with its evaluator:

- ```console: ``$ command`` lines (``\\`` continues a line) each followed by the output the doc shows; the command
  runs in bash and its output (stdout and stderr, in order) must equal the shown one, after normalising only what
  varies between runs: the working folder, and times (``0.9s``, ``0:01:07.478074``). A line ``...`` stands for
  any number of lines the doc leaves out.
- ```bash: every command (comments and blank lines aside) runs in bash and must exit 0.
- ```python: run by Sybil's own Python parser; the blocks of a page share one namespace.
- ```yaml: a train-config fragment; merged over yamls/tiny-wsd.yaml (with a long max_duration unless it sets
  one), it must pass ``foundry-ext validate``.
- ```text: not code (a formula, a diagram, a usage synopsis, an excerpt): not run.

A block that cannot run here carries ``<!-- skip: next "the reason" -->`` (Sybil's skip syntax) right above it;
``test_docs_coverage.py`` fails on a fence of any other language and on a skip without a reason.

Commands run in a fresh folder per page that holds links to the repository's yamls/, train.py, scripts/, .venv and
demo-data/ and a copy of docs/img, so that the doc's relative paths work and nothing in the repository is written.
A command that leaves a file at that folder's root (the repository's root, for a reader) fails: the docs write every
output into ``out/`` (ignored by git); only ``runs/``, the example YAMLs' checkpoint folder, is also allowed.
Pages are collected next to tests/docs/README.md (pytest only offers files under ``testpaths`` to this folder's
hooks); their test ids are ``README.md::line:N,column:1`` and ``docs/cli.md::line:N,column:1``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from sybil import Example, Sybil
from sybil.integration.pytest import SybilFile
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser, SkipParser

from tests.support.configs import write_train_yaml
from tests.support.launcher import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINKED = ("yamls", "train.py", "scripts", ".venv", "demo-data", "bench", "foundry_ext", "pyproject.toml")
COMMAND_TIMEOUT = 900  # seconds: the longest doc command (lr-find, a tiny training run) takes ~1 min here

# times: "0.9s", "0.01s", "12 s", "3 min", "0:01:07.478074"
_TIME = re.compile(r"\b\d+:\d\d:\d\d(\.\d+)?\b|\b\d+(\.\d+)?( ?s| ?ms| min)\b")


def normalise(text: str, workdir: Path) -> list[str]:
    """The lines of a command's output with the working folder and times replaced, trailing blanks removed."""
    text = text.replace(str(workdir) + "/", "").replace(str(workdir), ".")
    return [_TIME.sub("<time>", line).rstrip() for line in text.rstrip("\n").splitlines()]


def matches(shown: list[str], got: list[str]) -> bool:
    """Whether ``got`` equals ``shown``, where a line ``...`` of ``shown`` stands for any number of lines."""
    if not shown:
        return not got
    if shown[0] == "...":
        return any(matches(shown[1:], got[i:]) for i in range(len(got) + 1))
    return bool(got) and shown[0] == got[0] and matches(shown[1:], got[1:])


def workdir_of(example: Example) -> Path:
    """The page's scratch folder (made on first use): links to the repository, a copy of docs/img."""
    namespace = example.namespace
    if "workdir" not in namespace:
        work = Path(tempfile.mkdtemp(prefix="foundry-ext-docs-"))
        for name in LINKED:
            (work / name).symlink_to(REPO / name)
        shutil.copytree(REPO / "docs" / "img", work / "docs" / "img")
        namespace["workdir"] = work
    return namespace["workdir"]


def run(command: str, workdir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "120"}
    return subprocess.run(
        ["bash", "-c", command],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )


def split_commands(source: str) -> list[str]:
    """Commands of a bash block: ``\\``-continued lines joined, blank lines and comments dropped."""
    commands, current = [], ""
    for line in source.splitlines():
        current += line
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        if current.strip() and not current.lstrip().startswith("#"):
            commands.append(current.strip())
        current = ""
    return commands


#: What a page's commands may leave at the root besides the links: ``out/`` (every output the docs write, ignored by
#: git), ``runs/`` (the example YAMLs' ``save_folder``, ignored) and the harness's own merged YAMLs.
ROOT_ALLOWED = {*LINKED, "docs", "out", "runs"}


def litter(workdir: Path) -> list[str]:
    """Files a command left at the page folder's root (the repository's root, for a reader) outside ``out/``."""
    return sorted(
        p.name for p in workdir.iterdir() if p.name not in ROOT_ALLOWED and not re.match(r"doc-line-\d+\.yaml$", p.name)
    )


def _littered(command: str, workdir: Path) -> str | None:
    left = litter(workdir)
    if not left:
        return None
    return f"$ {command}\nleft {', '.join(left)} at the root: write outputs into out/ (e.g. --out out/lr.png)"


def evaluate_bash(example: Example) -> str | None:
    workdir = workdir_of(example)
    for command in split_commands(example.parsed):
        done = run(command, workdir)
        if done.returncode != 0:
            return f"$ {command}\nexit {done.returncode}\n{done.stdout}"
        if problem := _littered(command, workdir):
            return problem
    return None


def sessions(source: str) -> list[tuple[str, list[str]]]:
    """``($ command, shown output lines)`` pairs of a console block."""
    pairs: list[tuple[str, list[str]]] = []
    lines = source.rstrip("\n").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            raise ValueError(f"a console block must start with '$ ': {line!r}")
        command = line[2:]
        while command.endswith("\\"):
            i += 1
            command = command[:-1] + " " + lines[i].strip()
        i += 1
        output = []
        while i < len(lines) and not lines[i].startswith("$ "):
            output.append(lines[i])
            i += 1
        while output and not output[-1].strip():  # the blank line between two sessions
            output.pop()
        pairs.append((command, output))
    return pairs


def evaluate_console(example: Example) -> str | None:
    workdir = workdir_of(example)
    for command, shown in sessions(example.parsed):
        done = run(command, workdir)
        got = normalise(done.stdout, workdir)
        want = [_TIME.sub("<time>", line).rstrip() for line in shown]
        if not matches(want, got):
            diff = "\n".join(f"  doc: {w}" for w in want) + "\n" + "\n".join(f"  got: {g}" for g in got)
            return f"$ {command}\nthe output differs from the doc (exit {done.returncode}):\n{diff}"
        if problem := _littered(command, workdir):
            return problem
    return None


def evaluate_yaml(example: Example) -> str | None:
    fragment: Any = yaml.safe_load(example.parsed)
    if not isinstance(fragment, dict):
        return f"not a YAML mapping: {example.parsed!r}"
    workdir = workdir_of(example)
    base = yaml.safe_load((REPO / "yamls" / "tiny-wsd.yaml").read_text())
    if "max_duration" not in fragment:
        base["max_duration"] = "100000ba"
    merged = _merge(base, fragment)
    path = write_train_yaml(workdir / f"doc-line-{example.line}.yaml", merged)
    done = run(f".venv/bin/foundry-ext validate {path.name}", workdir)
    if done.returncode != 0:
        return f"foundry-ext validate of the block merged over yamls/tiny-wsd.yaml:\n{done.stdout}"
    return None


def _merge(base: dict[str, Any], fragment: dict[str, Any]) -> dict[str, Any]:
    """``fragment`` over ``base``; a ``scheduler`` block replaces the base's whole (its keys belong to its name)."""
    merged = dict(base)
    for key, value in fragment.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict) and key != "scheduler":
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _python_setup(namespace: dict[str, Any]) -> None:
    namespace["__name__"] = "__docs__"


SYBIL = Sybil(
    parsers=[
        SkipParser(),
        CodeBlockParser("console", evaluate_console),
        CodeBlockParser("bash", evaluate_bash),
        CodeBlockParser("yaml", evaluate_yaml),
        PythonCodeBlockParser(),
    ],
    path=str(REPO),
    patterns=["README.md", "docs/*.md"],
    setup=_python_setup,
)


class DocPages(pytest.File):
    """Collects README.md and docs/*.md (outside ``testpaths``) as Sybil files."""

    def collect(self):
        for page in PAGES:
            yield SybilFile.from_parent(self, path=page, sybils=[SYBIL])


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path == Path(__file__).with_name("README.md"):
        return DocPages.from_parent(parent, path=file_path)
    return None
