"""Refresh ``tests/durations.json``, the tests the quick tier leaves out for their measured time.

    .venv/bin/python -m pytest -m 'not slow' --junitxml=quick.xml
    .venv/bin/python -m tests.support.durations quick.xml

Every test function whose slowest case took over ``LIMIT`` seconds in that run (but ``KEEP_QUICK``) is written with
its time, keyed ``tests/<path>.py::<function>``; entries of functions the run did not measure (already slow, or
deselected) are kept.
``tests/conftest.py`` marks the functions listed ``slow``. Docs blocks are not listed: the ``docs_training`` marker
finds the heavy ones from their text.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET

from tests.support.launcher import REPO

FILE = REPO / "tests" / "durations.json"
LIMIT = 2.5  # seconds, on a loaded 2-core machine: the quick tier's 3 minutes hold with some margin
# Over LIMIT, and quick all the same: the quick tier's only test that runs a module (tests/test_tiers.py)
KEEP_QUICK = {
    "tests/lr_find/test_lr_find.py::test_no_suggestion_says_so_and_exits_1",  # lr_find.runner, lr_find.report
}


def key_of(classname: str, name: str) -> str | None:
    """``tests/a/test_b.py::test_c`` from a JUnit test case (``tests.a.test_b`` or ``tests.a.test_b.TestX``)."""
    if not classname.startswith("tests."):
        return None  # a docs block
    parts = classname.split(".")
    if parts[-1][:1].isupper():
        parts = parts[:-1]
    return "/".join(parts) + ".py::" + name.split("[")[0]


def main(junit: str) -> None:
    measured: dict[str, float] = {}
    for case in ET.parse(junit).iter("testcase"):
        key = key_of(case.get("classname", ""), case.get("name", ""))
        if key is not None:
            measured[key] = max(measured.get(key, 0.0), float(case.get("time", 0)))
    old = json.loads(FILE.read_text()) if FILE.exists() else {}
    heavy = {key: seconds for key, seconds in old.items() if key not in measured}
    heavy.update({k: round(s, 1) for k, s in measured.items() if s > LIMIT and k not in KEEP_QUICK})
    FILE.write_text(json.dumps(dict(sorted(heavy.items())), indent=1) + "\n")
    print(f"{FILE.relative_to(REPO)}: {len(heavy)} test functions over {LIMIT:g} s")


if __name__ == "__main__":
    main(sys.argv[1])
