"""The code's shape, measured as the review measured it (issue 40): the package and the runtime are
formatted to the anchors' width (ruff format, 100 columns, as cibuildwheel and build are)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from testkit import REPO

RUFF = Path(sys.executable).parent / "ruff"
SOURCES = ("factory/wheelfactory", "runtime")


def test_the_package_and_the_runtime_are_formatted_to_100_columns() -> None:
    result = subprocess.run([str(RUFF), "format", "--check", "--config", str(REPO / "pyproject.toml"),
                             *SOURCES], cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_the_format_check_fails_on_a_line_past_the_width(tmp_path: Path) -> None:
    """A check that cannot fail checks nothing: a planted 120-column call is reported."""
    planted = tmp_path / "planted.py"
    planted.write_text("call_with_a_long_name(" + ", ".join(f"argument_{n}" for n in range(12)) + ")\n")
    result = subprocess.run([str(RUFF), "format", "--check", "--config", str(REPO / "pyproject.toml"),
                             str(planted)], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 1 and "planted.py" in result.stdout, result.stdout + result.stderr
