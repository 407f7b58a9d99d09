"""docs/reference/bring-your-own.md's recipe for a project that chooses its ops from the
environment is the matrix.toml the Docker tier builds tests/fixtures/optkit with
(tests/docker/test_docker_op_builder.py), and that fixture reads exactly those variables."""

from __future__ import annotations

import sys

from tests.testkit import REPO, docs_text, markdown_section

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SECTION = markdown_section(docs_text("reference/bring-your-own.md"), "## Ops chosen by the environment")


def test_the_recipe_is_what_the_docker_test_builds() -> None:
    recipe = tomllib.loads(SECTION.split("```toml\n", 1)[1].split("```", 1)[0])["project"]
    built = (REPO / "tests" / "docker" / "test_docker_op_builder.py").read_text()
    matrix = tomllib.loads(built.split('SharedBuild("docker-optkit", REPO / "tests" / "fixtures" / "optkit", """', 1)[1]
                           .split('"""', 1)[0])
    assert recipe["import_name"] == matrix["import_name"] == "optkit"
    assert recipe["env"] == matrix["env"] == {"OPTKIT_BUILD_OPS": "0", "OPTKIT_BUILD_CPU_ADAM": "1"}
    assert recipe["path"].endswith("/optkit")
    setup = (REPO / "tests" / "fixtures" / "optkit" / "setup.py").read_text()
    builder = (REPO / "tests" / "fixtures" / "optkit" / "op_builder" / "cpu_adam.py").read_text()
    assert 'env_switch("OPTKIT_BUILD_OPS", 0)' in setup and 'BUILD_VAR = "OPTKIT_BUILD_CPU_ADAM"' in builder
