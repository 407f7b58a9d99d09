"""A pytest plugin that lets a Hub kernel's own tests run offline against the wheel just built.

kernels-community tests load the kernel by its repository id (``kernels.get_kernel("org/name",
version=1)``, often when the test module is imported). Copied beside the test sources with a JSON
file of the same name, loaded with ``-p``, it:

* lays the installed package out as the Hub does (``build/<variant>/<package>`` and a
  ``metadata.json``) in a temporary directory, found with ``importlib.util.find_spec`` (the
  package is not imported here);
* points the ``kernels`` loader's ``LOCAL_KERNELS`` at it for the repository ids that are this
  build, and sets ``HF_HUB_OFFLINE=1``;
* asks the loader for this build's backend where a test names none: the torch the tests run with
  may be another build than the variant's users have (a CPU variant's wheel tested beside a CUDA
  torch), and the loader would otherwise look for that build's variant;
* turns a load of any other repository into a skip that says so: a test that needs a kernel this
  build did not make is reported as not run, never as a pass or a network failure.

Standard library and pytest only; wheelfactory is not installed where it runs.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

CONFIG = Path(__file__).with_suffix(".json")


def pytest_configure(config: pytest.Config) -> None:
    # the marker kernel-builder's generated pyproject declares for its CI subset
    config.addinivalue_line("markers", "kernels_ci: the subset of tests kernel-builder's CI runs")
    settings = json.loads(CONFIG.read_text(encoding="utf-8"))
    repos: list[str] = settings["repos"]
    spec = importlib.util.find_spec(settings["package"])
    if spec is None or not spec.submodule_search_locations:
        raise pytest.UsageError(
            f"wheelfactory: the package {settings['package']} is not installed for the tests"
        )
    root = Path(tempfile.mkdtemp(prefix="wheelfactory-hub-"))
    variant = root / "build" / settings["variant"]
    variant.mkdir(parents=True)
    (variant / settings["package"]).symlink_to(
        Path(list(spec.submodule_search_locations)[0]), target_is_directory=True
    )
    (variant / "metadata.json").write_text(json.dumps(settings["metadata"]), encoding="utf-8")
    os.environ["LOCAL_KERNELS"] = ":".join(f"{repo}={root}" for repo in repos)
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        import kernels  # type: ignore[import-untyped]
    except ImportError:
        return  # the tests do not use the loader
    backend = settings["metadata"]["backend"]["type"]
    for name in ("get_kernel", "has_kernel", "load_kernel"):
        original = getattr(kernels, name, None)
        if original is not None:
            setattr(kernels, name, _only_this_build(original, repos, name, backend))


def _only_this_build(original: Any, repos: list[str], name: str, backend: str) -> Any:
    @functools.wraps(original)
    def guarded(repo_id: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(repo_id, str) and "/" in repo_id and repo_id not in repos:
            if name == "has_kernel":
                return False
            caller = sys._getframe(1).f_code.co_filename  # the test that asked, for the report
            raise pytest.skip.Exception(
                f"not run: needs the Hub kernel {repo_id}, which this build did not make "
                f"(asked for in {os.path.relpath(caller)}; the tests run offline)",
                allow_module_level=True,
            )
        if kwargs.get("backend") is None:
            kwargs["backend"] = backend
        return original(repo_id, *args, **kwargs)

    return guarded
