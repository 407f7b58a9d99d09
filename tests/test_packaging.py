"""wheelfactory as a wheel (not an editable checkout): it carries its templates and runtime."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from tests.testkit import REPO, pip_install

pytestmark = pytest.mark.slow


def test_a_wheel_install_finds_templates_and_runtime(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path / "whl"),
                    str(REPO)], check=True, capture_output=True, timeout=600)
    (wheel,) = (tmp_path / "whl").glob("wheelfactory-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("wheelfactory/_docker/build-cpu.Dockerfile", "wheelfactory/_docker/debian-manylinux.Dockerfile",
                   "wheelfactory/_docker/cross-toolchain-fetch.sh",
                   "wheelfactory/_runtime/__init__.py", "wheelfactory/_runtime/_loader.py",
                   "wheelfactory/engines/docker.py", "wheelfactory/data/compat.toml", "wheelfactory/py.typed",
                   "wheelfactory/data/schema/matrix.schema.json", "wheelfactory/data/schema/kernel.schema.json",
                   "wheelfactory/data/templates/kernel-builder/registration.h",
                   # `wheelfactory new`'s templates, the hidden one and those named by placeholders too
                   "wheelfactory/data/templates/native/kernel.toml", "wheelfactory/data/templates/native/.gitignore",
                   "wheelfactory/data/templates/native/csrc/cuda/${op}.cu",
                   "wheelfactory/data/templates/native/python/${name}/__init__.py"):
        assert needed in names, needed
    # every subpackage of the source folder is in the wheel (pyproject.toml lists them by hand)
    for init in (REPO / "factory" / "wheelfactory").rglob("__init__.py"):
        member = "wheelfactory/" + init.relative_to(REPO / "factory" / "wheelfactory").as_posix()
        assert member in names, f"{member}: add its package to [tool.setuptools] packages in pyproject.toml"
    assert not any(name.startswith("factory/") for name in names)
    site = tmp_path / "site"
    pip_install(sys.executable, "--no-deps", "--no-index", "--target", str(site), str(wheel), timeout=300)
    code = ("import wheelfactory, wheelfactory.support.resources as r, wheelfactory.images.dockerfiles as i; "
            "from wheelfactory.project.scaffold import plan_scaffold; "
            "print(wheelfactory.__file__); print(r.templates_dir()); print(r.runtime_dir()); "
            "print(i.render_image('some/base:1').tag); print(','.join(sorted(plan_scaffold('demo').files)))")
    env = {**os.environ, "PYTHONPATH": str(site)}
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    module, templates, runtime, tag, scaffold = result.stdout.split()
    assert module.startswith(str(site)) and templates == str(site / "wheelfactory" / "_docker")
    assert runtime == str(site / "wheelfactory" / "_runtime") and tag.startswith("wheelfactory/build:")
    # `wheelfactory new` from the installed wheel: every template, and nothing an installer compiled beside them
    from wheelfactory.project.scaffold import plan_scaffold
    assert scaffold.split(",") == sorted(plan_scaffold("demo").files) and len(scaffold.split(",")) == 13
