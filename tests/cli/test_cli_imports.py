"""The CLI parses options and renders results: it reaches the package through the API's functions
(wheelfactory/__init__.py), and cli/ imports at most 20 of the package's modules outside cli/
(issue 40; cibuildwheel's __main__ imports 13)."""

from __future__ import annotations

import re
from tests.testkit import REPO

CLI = REPO / "factory" / "wheelfactory" / "cli"
LIMIT = 20
# `from wheelfactory.X import ...` and `import wheelfactory.X`, at module level or in a function
IMPORT = re.compile(r"^\s*(?:from\s+(wheelfactory(?:\.\w+)+)\s+import\b|import\s+(wheelfactory(?:\.\w+)+))", re.M)


def package_modules(texts: list[str]) -> set[str]:
    found = {a or b for text in texts for a, b in IMPORT.findall(text)}
    return {name for name in found if not name.startswith("wheelfactory.cli")}


def test_cli_imports_at_most_20_package_modules() -> None:
    modules = package_modules([path.read_text(encoding="utf-8") for path in sorted(CLI.glob("*.py"))])
    assert len(modules) <= LIMIT, sorted(modules)


def test_the_count_sees_every_spelling() -> None:
    """A count that cannot go up counts nothing: each way of importing a module is seen, cli/'s own
    modules are not counted."""
    planted = ("from wheelfactory.publish.index import index_dist\n"
               "def f():\n    import wheelfactory.ci.merge\n"
               "    from wheelfactory.runner.session import (\n        prepare_build,\n    )\n"
               "from wheelfactory.cli.render import console\nimport wheelfactory\n")
    assert package_modules([planted]) == {"wheelfactory.publish.index", "wheelfactory.ci.merge",
                                          "wheelfactory.runner.session"}

