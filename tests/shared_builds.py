"""The builds that tests read but do not change: each declared once, as a module-level
``SharedBuild`` beside the tests that read it, made once per run into the test cache
(``TEST_CACHE/<name>``) and kept across runs (the factory's cache key makes an unchanged rebuild
all cached). A test that needs a built variant reads one of these (the Docker tier's
``shared_build`` fixture, tests/docker_tier.py); a test that changes something (an edit, a
flag, a kill) builds a copy in its own tmp_path.

tests/test_ci_budget.py plans every declared build with the factory's own planner and fails when
two of them build the same variant of the same project with the same engine: the second module
must share the first one's build instead of compiling it again. Imports nothing beyond the
standard library and wheelfactory's planning (no pytest).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# The Docker tier's offline [build] tables (tests/docker_tier.py offline_build_tables) as the
# planner sees them: the base image's tag is only known once it is made.
PLANNING_TABLES = """
[[exclude]]
torch = "2.6"
cxx11_abi = true

[build]
engine = "docker"
base_image = "wheelfactory/base:planning"
torch_index = "pypi"
"""


@dataclass(frozen=True)
class SharedBuild:
    """``matrix.toml`` of one shared build: ``[project] path = <project>``, then ``tables`` (more
    [project] keys, [matrix], [cuda], [test], ...), then its own ``[build]`` table
    (``build_table``) or, when it has none, the Docker tier's offline tables, which end in their
    [build] table; ``build_keys``: more keys of that [build] table. ``only``: the variants built
    (`--only` patterns; none: the whole plan)."""

    name: str
    project: Path
    tables: str
    build_table: str | None = None
    only: tuple[str, ...] = ()
    build_keys: str = ""

    def matrix_toml(self, offline_tables: str) -> str:
        build = f"{(self.build_table or offline_tables).rstrip()}\n{self.build_keys}"
        return f'[project]\npath = "{self.project}"\n{self.tables}\n{build}'

    def planned(self) -> set[tuple[str, str, str]]:
        """(engine, project, variant id) of each variant this build makes, by the factory's planner."""
        from wheelfactory.plan.compat import load_table
        from wheelfactory.plan.expand import expand, select
        from wheelfactory.plan.matrix import parse_matrix
        from wheelfactory.plan.tomlsource import TomlDocument
        from wheelfactory.project.kinds import project_plan

        table = load_table()
        text = self.matrix_toml(PLANNING_TABLES)
        matrix = parse_matrix(TomlDocument.from_text(text, f"{self.name}/matrix.toml"), table, base_dir=self.project)
        plan = project_plan(matrix, table) if self.project.exists() else expand(matrix, table)
        engine = "docker" if matrix.build.engine in ("docker", "auto") else matrix.build.engine
        return {(engine, str(self.project.resolve()), variant.id) for variant in select(plan, self.only)}
