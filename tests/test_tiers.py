"""The quick tier (``bash scripts/test.sh --quick``: ``-m 'not slow'``) reaches every module of the package.

Measured once, checked cheaply. ``tests/quick_reach.json`` records, for every module, the first quick test that
called one of its functions in the pytest process (``tests/support/reach.py``, a ``sys.setprofile`` plugin, over the
whole quick tier: ``FOUNDRY_EXT_REACH=tests/quick_reach.json .venv/bin/python -m pytest -m 'not slow' -p
tests.support.reach``). This file checks, in a fraction of a second and without running anything, that the record
still holds as far as files can say: each named test still exists and is still quick (not ``slow``, ``launcher`` or
``docs_training`` by its decorators, its file's ``pytestmark``, the ``run_composer`` fixture or
``tests/durations.json``). A module the measurement cannot see (run only in a subprocess or at import) is in
:data:`THROUGH`, with a quick test file that imports the module through which it runs; a package counts when one of
its modules does; a module newer than the measurement needs a quick test file that imports it (or names it as a
string). A module the quick tier did not reach when measured, a named test made slow or deleted, or a stale entry
fails here.
"""

from __future__ import annotations

import ast
import json
from functools import cache
from pathlib import Path

from tests.support.launcher import REPO

PACKAGE = REPO / "foundry_ext"
HEAVY_MARKS = ("slow", "launcher", "docs_training")
HEAVY_FIXTURES = {"run_composer"}
MEASURED = json.loads((REPO / "tests" / "durations.json").read_text())  # functions over 2.5 s: slow (conftest.py)
# {"modules": [...], "reached": {module: first quick test that called into it}}, measured by tests/support/reach.py
REACH = json.loads((REPO / "tests" / "quick_reach.json").read_text())

# Modules the measurement cannot see (run only in a subprocess, a `foundry-ext` command a test starts, or only at
# import): module -> (quick test file, the module that file imports and through which the module runs)
THROUGH: dict[str, tuple[str, str]] = {
    # one exception class, no function to call: raised by the reader for each hostile run log the CLI answers
    "foundry_ext.runlog.errors": ("tests/runlog/test_hostile.py", "foundry_ext.cli"),
}


def package_modules() -> list[str]:
    modules = []
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        modules.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(modules)


def _is_heavy_mark(node: ast.AST) -> bool:
    text = ast.unparse(node)
    return any(f"mark.{mark}" in text for mark in HEAVY_MARKS)


@cache
def quick_tests(path: Path) -> tuple[str, ...]:
    """The names of the tests of a file that the quick tier runs (by its source: decorators, pytestmark, fixtures)."""
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in node.targets):
            if _is_heavy_mark(node.value):
                return ()
    heavy_fixtures = set(HEAVY_FIXTURES)
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for _ in range(3):  # fixtures built on heavy fixtures, a few levels deep
        for fn in functions:
            if any("fixture" in ast.unparse(d) for d in fn.decorator_list):
                if {a.arg for a in fn.args.args} & heavy_fixtures:
                    heavy_fixtures.add(fn.name)
    quick = []
    for fn in functions:
        if not fn.name.startswith("test"):
            continue
        if any(_is_heavy_mark(d) for d in fn.decorator_list) or {a.arg for a in fn.args.args} & heavy_fixtures:
            continue
        if path.is_relative_to(REPO) and f"{path.relative_to(REPO).as_posix()}::{fn.name}" in MEASURED:
            continue
        quick.append(fn.name)
    return tuple(quick)


@cache
def names_in(path: Path) -> frozenset[str]:
    """Every module a file imports (``import a.b``, ``from a import b`` as ``a`` and ``a.b``) or names in a string."""
    found: set[str] = set()  # importing a.b.c runs a, a.b and a.b.c: every prefix counts
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("foundry_ext"):
            found.add(node.value.split(":")[0])
    return frozenset(".".join(name.split(".")[:i]) for name in found for i in range(1, name.count(".") + 2))


def quick_files() -> list[Path]:
    tests = sorted(path for path in (REPO / "tests").rglob("test_*.py") if path != Path(__file__))  # not THROUGH's
    return [path for path in tests if quick_tests(path)]


def problem(module: str, modules: list[str]) -> str | None:
    """Why the quick tier does not reach ``module``, or None when it does (see the module docstring)."""
    test = REACH["reached"].get(module)
    if test is not None:
        file, _, rest = test.partition("::")
        path = REPO / file
        if not file.startswith("tests/"):  # a docs block: quick unless it trains (docs_training)
            return None if path.is_file() else f"{module}: measured as reached by {test}, whose page is gone"
        if path.is_file() and rest.split("::")[-1].split("[")[0] in quick_tests(path):
            return None
        return f"{module}: measured as reached by {test}, which is gone or slow now"
    if module in THROUGH:
        test_file, through = THROUGH[module]
        path = REPO / test_file
        if not path.is_file() or not quick_tests(path):
            return f"{module}: THROUGH names {test_file}, which is gone or slow now"
        return None if through in names_in(path) else f"{module}: {test_file} does not import {through} any more"
    submodules = [m for m in modules if m.startswith(module + ".")]
    if submodules:  # a package: importing any of its modules runs it
        return None if any(problem(m, modules) is None for m in submodules) else f"{module}: no module of it reached"
    if module not in REACH["modules"]:  # newer than the measurement: a quick test file that imports it will do
        if any(module in names_in(path) for path in quick_files()):
            return None
        return f"{module}: new, and no quick test file imports it"
    return f"{module}: the quick tier did not reach it when measured"


def test_every_module_is_reached_by_a_quick_test() -> None:
    modules = package_modules()
    problems = [p for p in (problem(m, modules) for m in modules) if p is not None]
    assert not problems, (
        "\n".join(problems) + "\nAdd a quick test (not slow) that runs each; then re-measure "
        "(`FOUNDRY_EXT_REACH=tests/quick_reach.json .venv/bin/python -m pytest -m 'not slow' -p tests.support.reach`),"
        " or, for a module only a subprocess or an import runs, add an entry to THROUGH"
    )


def test_through_names_only_modules_the_measurement_did_not_see() -> None:
    modules = package_modules()
    stale = [m for m in THROUGH if m not in modules or m in REACH["reached"]]
    assert not stale, f"THROUGH entries that are no module, or that the measured run reached itself: {stale}"


def test_the_file_reading_sees_heavy_tests(tmp_path: Path) -> None:
    """The rules above, on a file written here: a slow mark, a launcher fixture (through a fixture), pytestmark."""
    source = tmp_path / "test_sample.py"
    source.write_text(
        "import pytest\n"
        "from foundry_ext.config import durations\n"
        "@pytest.fixture\n"
        "def trained(run_composer):\n"
        "    return run_composer('x.yaml')\n"
        "@pytest.mark.slow\n"
        "def test_slow(): pass\n"
        "@pytest.mark.launcher\n"
        "def test_range(): pass\n"
        "def test_trained(trained): pass\n"
        "def test_quick(tmp_path): assert 'foundry_ext.cli.plot:main'\n"
    )
    assert quick_tests(source) == ("test_quick",)
    assert {"foundry_ext.config", "foundry_ext.config.durations", "foundry_ext.cli.plot"} <= names_in(source)
    marked = tmp_path / "test_marked.py"
    marked.write_text("import pytest\npytestmark = pytest.mark.launcher\ndef test_a(): pass\n")
    assert quick_tests(marked) == ()


def test_the_full_suite_s_workers_take_the_kills_first_and_every_file_whole() -> None:
    """tests/conftest.py's pytest-xdist scheduling (`bash scripts/test.sh`: two workers), on the
    nodeids the workers report."""
    from tests.conftest import _order, _scope

    kills = [  # the launcher tests that SIGKILL a run at a moment: each file its own scope, handed out first
        "tests/resume/test_checkpoint_faults.py::test_kill_at_ten_moments_then_the_same_command_resumes_exactly",
        "tests/resume/test_folder_owner.py::test_two_launchers_on_one_folder",
        "tests/resume/test_two_nodes.py::test_two_nodes_kill_one_restart_both",
        "tests/resume/test_resume.py::test_load_path_and_autoresume_after_sigkill_match_the_uninterrupted_run",
        "tests/anneal/test_anneal_exact.py::test_a_killed_branch_resumes_from_its_own_checkpoint_and_trains_as_the_"
        "planned_run",
    ]
    assert [_scope(nodeid) for nodeid in kills] == [nodeid.split("::")[0] for nodeid in kills]
    assert {_order(nodeid) for nodeid in kills} == {0}
    ranks = [  # other 2-rank files: each its own scope, handed out next
        "tests/resume/test_clean_exit.py::test_a_refusal_at_the_first_call_ends_both_ranks_with_status_2",
        "tests/lr_find/test_lr_find.py::test_two_ranks_through_the_launcher_agree",
        "tests/spike/test_guard.py::test_two_ranks_decide_alike_and_skip_bitwise",
    ]
    assert [_scope(nodeid) for nodeid in ranks] == [nodeid.split("::")[0] for nodeid in ranks]
    assert {_order(nodeid) for nodeid in ranks} == {1}
    assert _order("tests/test_tiers.py::test_x") == _order("docs/cli.md::line:706,column:1") == 2
    # a docs page's blocks share a namespace and a folder: the page is one scope; any other file is its own
    assert _scope("docs/cli.md::line:706,column:1") == "docs/cli.md"
    assert _scope("README.md::line:182,column:1") == "README.md"
    assert _scope("tests/test_tiers.py::test_through_names_only_modules_the_measurement_did_not_see") == (
        "tests/test_tiers.py"
    )
    assert _scope("tests/schedules/test_olmo_schedules.py::test_x[a::b]") == "tests/schedules/test_olmo_schedules.py"


def test_within_each_class_the_files_with_a_slow_test_go_first_and_the_quick_files_last() -> None:
    """tests/conftest.py's ``schedule_order``: the workers' order, which pytest-xdist hands out scope by scope."""
    from tests.conftest import schedule_order

    class Item:  # what schedule_order reads of a pytest item
        def __init__(self, nodeid: str, slow: bool = False) -> None:
            self.nodeid, self.slow = nodeid, slow

        def get_closest_marker(self, name: str) -> object | None:
            return object() if name == "slow" and self.slow else None

    relaunch = "tests/resume/test_clean_exit.py::test_a_refusal_at_the_first_call_ends_both_ranks_with_status_2"
    collected = [
        Item("docs/cli.md::line:1,column:1"),  # a quick block of a page that trains further down: its page is heavy
        Item("docs/cli.md::line:9,column:1", slow=True),
        Item("tests/cli/test_quick_one.py::test_x"),
        Item("tests/release/test_release_build.py::test_the_installed_wheel_trains", slow=True),
        Item(relaunch, slow=True),
        Item("tests/schedules/test_quick_two.py::test_y"),
    ]
    schedule_order(collected)
    assert [item.nodeid for item in collected] == [
        relaunch,  # starts ranks: before every other file
        "docs/cli.md::line:1,column:1",  # the page whole, in its order
        "docs/cli.md::line:9,column:1",
        "tests/release/test_release_build.py::test_the_installed_wheel_trains",
        "tests/cli/test_quick_one.py::test_x",  # the quick files last, in collection order
        "tests/schedules/test_quick_two.py::test_y",
    ]
