"""README.md and CONTRIBUTING.md, "The two commands": what they say of the release matrix (its torch range and how many
variants it plans) is what `wheelfactory plan` makes of matrix.toml with the bundled table."""

from __future__ import annotations

import re

import pytest
from tests.testkit import REPO
from wheelfactory import load_plan


@pytest.mark.parametrize("page", ["README.md", "CONTRIBUTING.md"])
def test_readme_names_the_release_matrixs_torch_range_and_variant_count(page: str) -> None:
    text = " ".join((REPO / page).read_text().split())
    found = re.search(r"CPU and CUDA for torch (\d+\.\d+) to (\d+\.\d+), (\d+) variants", text)
    assert found, f"{page} no longer describes the release matrix"
    plan = load_plan(REPO / "matrix.toml")
    torches = sorted({v.key.torch for v in plan.variants}, key=lambda t: tuple(map(int, t.split("."))))
    assert (found.group(1), found.group(2), int(found.group(3))) == (torches[0], torches[-1], len(plan.variants))
    comment = re.search(r"release \((\d+) variants\)", (REPO / "matrix.toml").read_text())
    assert comment and int(comment.group(1)) == len(plan.variants)  # matrix.toml's own header says it too
