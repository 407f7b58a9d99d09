"""One home for each fact publishing and merging share (issue 40, item 4): what makes an entry a
pure-Python (noarch) build, the record of a variant left out, the reading of a wheel's build
record (capped, in verify/wheel_identity.py), what a damaged zip raises; and select.py is made
without parsing any source (item 6)."""

from __future__ import annotations

import re

import pytest
from tests.testkit import REPO

PACKAGE = REPO / "factory" / "wheelfactory"
PUBLISHING = sorted([*(PACKAGE / "publish").glob("*.py"), *(PACKAGE / "ci").glob("*.py"),
                     *(PACKAGE / "cli").glob("*.py")])
SECOND_SPELLINGS = {
    "noarch told apart from hub_metadata": re.compile(r"hub_metadata is (not )?None"),
    "a record of a variant left out": re.compile(r"^class (Skipped|Refused|Refusal|LeftOut)\b", re.M),
    "a build record read by hand": re.compile(r"\b(load_record_json|partial_record|record_member)\("),
    "what a damaged zip raises": re.compile(r"zlib\.error"),
    "source parsed to make select.py": re.compile(r"^\s*import ast\b|\bast\.parse\(", re.M),
}


@pytest.mark.parametrize("fact", sorted(SECOND_SPELLINGS))
def test_publish_ci_and_cli_spell_no_fact_twice(fact: str) -> None:
    found = [f"{path.relative_to(REPO)}: {match.group(0)}" for path in PUBLISHING
             for match in SECOND_SPELLINGS[fact].finditer(path.read_text(encoding="utf-8"))]
    assert not found, f"{fact} has its home elsewhere (runner/refusals.py, verify/wheel_identity.py):\n" + \
        "\n".join(found)


def test_the_spellings_are_found_where_they_live() -> None:
    """A grep that finds nothing checks nothing: each pattern matches its home."""
    homes = {"noarch told apart from hub_metadata": "runner/refusals.py",
             "a record of a variant left out": "runner/refusals.py",
             "a build record read by hand": "verify/wheel_identity.py",
             "what a damaged zip raises": "verify/wheel_identity.py"}
    for fact, home in homes.items():
        assert SECOND_SPELLINGS[fact].search((PACKAGE / home).read_text(encoding="utf-8")), fact
    assert SECOND_SPELLINGS["source parsed to make select.py"].search("import ast\n")
