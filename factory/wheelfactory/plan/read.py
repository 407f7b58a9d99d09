"""A matrix.toml read with its compatibility table: the one place both are loaded, for the API
(``wheelfactory.load_plan``) and every command that reads a matrix."""

from __future__ import annotations

from pathlib import Path

from wheelfactory.plan.compat import CompatTable, load_table
from wheelfactory.plan.matrix import Matrix, load_matrix


def read_matrix(matrix: Path, compat: Path | None = None) -> tuple[Matrix, CompatTable]:
    """``matrix`` parsed against the compatibility table ``compat`` (None: the bundled one), and
    that table; ConfigError naming the file, key and line on bad input."""
    table = load_table(compat)
    return load_matrix(matrix, table, display=str(matrix)), table
