"""What a kernel-builder wheel is checked against: matrix.toml's [test], else the project's own
``tests/`` (as kernel-builder's test step runs them), with the offline Hub loader plugin
(project/hub_offline_plugin.py) where those tests load the kernel through ``kernels``."""

from __future__ import annotations

import json
import re
from importlib.resources import files
from pathlib import Path

from wheelfactory.plan.identity import Variant
from wheelfactory.plan.project_tests import ProjectTests
from wheelfactory.project.build_toml import DECLARATION, KernelBuilderSpec
from wheelfactory.project.wheel_checks import WheelChecks

# The tests' loader: the Hub tests' kernels.get_kernel(<repo id>) gets this build (project/hub_offline_plugin.py).
HUB_PLUGIN = "wheelfactory_hub_offline"
_USES_KERNELS = re.compile(r"^\s*(?:from\s+kernels\b|import\s+kernels\b)", re.MULTILINE)
_GET_KERNEL = re.compile(
    r"""(?:get_kernel|has_kernel|load_kernel)\(\s*["']([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)["']"""
)


def wheel_checks(
    spec: KernelBuilderSpec, variant: Variant, namespace: str, tests: ProjectTests | None
) -> WheelChecks:
    """The checks of the wheel of ``variant`` whose op namespace is ``namespace``; ``tests``:
    matrix.toml's [test], which replaces the project's own."""
    package = spec.general.python_name
    if tests is not None:
        return WheelChecks(spec.root, package, tests=tests, op_namespace=namespace)
    tests = default_tests(spec.root)
    hub = tests is not None and HUB_PLUGIN in tests.command
    return WheelChecks(
        spec.root,
        package,
        tests=tests,
        op_namespace=namespace,
        support_files=hub_test_files(spec, variant, namespace) if hub else (),
    )


def default_tests(root: Path) -> ProjectTests | None:
    """kernel-builder projects keep pytest tests in ``tests/``: with no [test] table in matrix.toml,
    those run against each wheel (as kernel-builder's own test step runs them). Tests that load the
    kernel through the ``kernels`` package get it, and the offline loader plugin."""
    if not (root / "tests").is_dir():
        return None
    hub = any(_USES_KERNELS.search(text) for text in _test_texts(root))
    plugin = f" -p {HUB_PLUGIN}" if hub else ""
    return ProjectTests(
        command=f"python -m pytest -q -rs -p no:cacheprovider{plugin} {{project}}/tests",
        requires=("pytest", *(("kernels",) if hub else ())),
        sources=("tests",),
        declared_in=f"{DECLARATION} (its tests/ directory)",
    )


def hub_repo_ids(spec: KernelBuilderSpec) -> tuple[str, ...]:
    """The Hub repository ids that are this kernel: build.toml's [general.hub] repo-id, and any
    ``<org>/<name>`` its tests load whose name is the kernel's."""
    found = {spec.general.hub.repo_id} if spec.general.hub.repo_id else set()
    for text in _test_texts(spec.root):
        found.update(
            r for r in _GET_KERNEL.findall(text) if r.split("/", 1)[1] == spec.general.name
        )
    return tuple(sorted(found))


def hub_test_files(
    spec: KernelBuilderSpec, variant: Variant, namespace: str
) -> tuple[tuple[str, str], ...]:
    """The plugin and its settings: which repository ids are this build, and the metadata.json the
    ``kernels`` loader validates for its variant."""
    settings = {
        "repos": list(hub_repo_ids(spec)),
        "package": spec.general.python_name,
        "variant": variant.id,
        "metadata": {
            "id": namespace,
            "name": spec.general.name,
            "version": int(spec.general.version or 0),
            "license": spec.general.license or "unknown",
            "python-depends": [],
            "backend": {"type": variant.key.backend.kind},
        },
    }
    plugin = (
        files("wheelfactory.project").joinpath("hub_offline_plugin.py").read_text(encoding="utf-8")
    )
    return (
        (f"{HUB_PLUGIN}.py", plugin),
        (f"{HUB_PLUGIN}.json", json.dumps(settings, indent=2) + "\n"),
    )


def _test_texts(root: Path) -> list[str]:
    return [
        p.read_text(encoding="utf-8", errors="replace")
        for p in sorted((root / "tests").rglob("*.py"))
        if "__pycache__" not in p.parts
    ]
