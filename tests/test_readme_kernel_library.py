"""docs/reference/kernel-toml.md, "Writing a kernel library": each claim checked against the code it describes.

The kernel.toml table against the parser (every key it accepts, each default, required keys), the
scaffold's file list, matrix and `_runtime` snippet against what `wheelfactory new` writes, and the
runtime contract on a staged scaffold (the vendored `_runtime`, the op names from the build record,
`<NAME>_LOAD`, `<NAME>_CACHE_DIR`, the reference fallback). The NAME rules and the writing are in
tests/project/test_scaffold.py; the build, tests and `prebuilt` load in
tests/integration/test_scaffold_build.py and tests/docker/test_scaffold_docker.py.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from tests.testkit import REPO, docs_text, markdown_section
from wheelfactory import load_plan
from wheelfactory.errors import ConfigError
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.matrix import load_matrix
from wheelfactory.plan.project_tests import ProjectTests
from wheelfactory.plan.tomlsource import Table
from wheelfactory.project.kernel_toml import KernelSpec, load_kernel
from wheelfactory.project.scaffold import plan_scaffold, write_scaffold
from wheelfactory.project.native import namespace_for, plan_stage, write_stage

if sys.version_info >= (3, 11):
    import tomllib
else:  # the package's own fallback (plan/tomlsource.py)
    import tomli as tomllib

SECTION = docs_text("reference/kernel-toml.md")  # the page "Writing a kernel library: kernel.toml"


def kernel_rows() -> list[tuple[str, str, str, str]]:
    """(``table.key``, type, default, meaning) per key of the kernel.toml table; a row naming two keys
    (`[stable_abi] cpu`, `cuda`) gives two."""
    rows = []
    for line in markdown_section(SECTION, "## kernel.toml").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`["):
            continue
        names = re.findall(r"`([^`]+)`", cells[0])
        table = re.match(r"\[(\w+)\] ", names[0])
        assert table, cells[0]
        for name in names:
            rows.append((f"{table.group(1)}.{name.split()[-1]}", cells[1], cells[2], cells[3]))
    return rows


ROWS = kernel_rows()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_scaffold(plan_scaffold("demo"), tmp_path_factory.mktemp("scaffold") / "demo")


def parse_with(project: Path, tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> KernelSpec:
    """The scaffold's kernel.toml, edited as a dict, parsed in a copy of the project."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(project, copy)
    data = tomllib.loads((copy / "kernel.toml").read_text())
    edit(data)
    (copy / "kernel.toml").write_text(tomli_w.dumps(data))
    return load_kernel(copy)


# --- the kernel.toml table -------------------------------------------------------------------


def test_the_table_documents_every_key_the_parser_accepts(project: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    accepted: dict[tuple[str | int, ...], set[str]] = {}
    real = Table.reject_unknown

    def recording(self: Table, allowed: Any) -> None:
        accepted[self.path] = set(allowed)
        real(self, allowed)

    monkeypatch.setattr(Table, "reject_unknown", recording)
    load_kernel(project)  # the scaffold has every table, [test] included
    keys = {f"{path[0]}.{key}" for path, allowed in accepted.items() if path for key in allowed}
    assert sorted(name for name, *_ in ROWS) == sorted(keys)
    assert {name.split(".")[0] for name, *_ in ROWS} == accepted[()]


# What each key parses to, for comparing with the documented default.
VALUES: dict[str, Callable[[KernelSpec], object]] = {
    "kernel.description": lambda k: k.description,
    "kernel.sample_inputs": lambda k: k.sample_inputs,
    "sources.include_dirs": lambda k: list(k.include_dirs),
    "sources.cuda": lambda k: list(dict(k.sources)["cuda"]),
    "sources.device_check": lambda k: k.device_check,
    "stable_abi.cpu": lambda k: dict(k.stable_sources).get("cpu"),
    "stable_abi.cuda": lambda k: dict(k.stable_sources).get("cuda"),
    "flags.cxx": lambda k: list(k.cxx_flags),
    "flags.nvcc": lambda k: list(k.nvcc_flags),
    "test.requires": lambda k: list(k.test.requires) if k.test else "no [test]",
    "test.sources": lambda k: list(k.test.sources) if k.test else "no [test]",
    "test.skip": lambda k: list(k.test.skip) if k.test else "no [test]",
    "test.find_links": lambda k: list(k.test.find_links) if k.test else "no [test]",
}


def drop(name: str) -> Callable[[dict[str, Any]], None]:
    table, key = name.split(".")
    return lambda data: data.get(table, {}).pop(key, None)


@pytest.mark.parametrize("name, default", [(n, d) for n, _, d, _ in ROWS if d.startswith("required")])
def test_required_keys(project: Path, tmp_path: Path, name: str, default: str) -> None:
    key = name.split(".")[1]
    with pytest.raises(ConfigError) as info:
        parse_with(project, tmp_path, drop(name))
    assert key in str(info.value) and "kernel.toml" in str(info.value)


@pytest.mark.parametrize("name, default", [(n, d) for n, _, d, _ in ROWS if not d.startswith("required")])
def test_documented_defaults(project: Path, tmp_path: Path, name: str, default: str) -> None:
    kernel = parse_with(project, tmp_path, drop(name))
    if name == "kernel.namespace_macro":
        assert default == '`"<NAME>_NAMESPACE"`' and kernel.namespace_macro == "DEMO_NAMESPACE"
    elif default == "none":
        assert VALUES[name](kernel) is None
    else:
        literal = re.fullmatch(r"`(.*)`", default)
        assert literal, default
        assert VALUES[name](kernel) == tomllib.loads(f"v = {literal.group(1)}")["v"]


@pytest.mark.parametrize("name, kind", [(n, t) for n, t, _, _ in ROWS])
def test_documented_types(project: Path, tmp_path: Path, name: str, kind: str) -> None:
    table, key = name.split(".")
    assert kind in ("string", "array of strings")
    wrong: object = ["x.cpp"] if kind == "string" else 12345

    def edit(data: dict[str, Any]) -> None:
        data.setdefault(table, {})[key] = wrong

    with pytest.raises(ConfigError, match=key):
        parse_with(project, tmp_path, edit)


def test_unknown_keys_and_paths_outside_the_project_are_errors(project: Path, tmp_path: Path) -> None:
    assert "An unknown key is an error" in SECTION and "must stay inside the project" in SECTION
    with pytest.raises(ConfigError, match="opz"):
        parse_with(project, tmp_path, lambda data: data["kernel"].update(opz=["x"]))
    with pytest.raises(ConfigError, match="inside the project"):
        parse_with(project, tmp_path / "b", lambda data: data["kernel"].update(python_package="../python/demo"))


def test_sample_inputs_module_must_exist(project: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no module '_missing'"):
        parse_with(project, tmp_path, lambda data: data["kernel"].update(sample_inputs="_missing:sample_inputs"))


def test_what_a_cpu_variant_ships(project: Path) -> None:
    """[sources] cuda: not shipped nor hashed by a CPU variant; include_dirs: every file ships."""
    kernel = load_kernel(project)
    cpu = {p.as_posix() for p in kernel.files_for("cpu")}
    assert "csrc/demo.h" in cpu and "csrc/cuda/scaled_add.cu" not in cpu
    assert "csrc/cuda/scaled_add.cu" in {p.as_posix() for p in kernel.files_for("cuda")}


def test_test_placeholders_and_skip() -> None:
    tests = ProjectTests(command="cd {project} && pytest {package}/tests ${HOME}", skip=("torch26-*",))
    assert tests.render("/t/p") == "cd /t/p && pytest /t/p/tests ${HOME}"
    assert not tests.runs_for("torch26-cxx98-cpu-x86_64-linux") and tests.runs_for("torch213-cxx11-cpu-x86_64-linux")


def test_scaffold_test_table_is_the_documented_one(project: Path) -> None:
    test = load_kernel(project).test
    assert test is not None
    assert f'`command = "{test.command}"`' in SECTION
    assert f"`requires = {json.dumps(list(test.requires))}`" in SECTION
    assert f"`sources = {json.dumps(list(test.sources))}`" in SECTION


# --- what `wheelfactory new` writes ----------------------------------------------------------


def documented_files() -> Iterator[str]:
    block = SECTION.split("```\nkernel.toml", 1)[1].split("```", 1)[0]
    for line in ("kernel.toml" + block).splitlines():
        if line and not line.startswith(" "):
            yield from re.split(r",\s*", re.split(r"\s{2,}", line)[0])


def test_the_file_list_is_what_new_writes() -> None:
    files = set(plan_scaffold("demo").files)
    documented = [path.replace("NAME", "demo") for path in documented_files()]
    assert len(documented) >= 10
    for path in documented:
        assert path in files or any(f.startswith(path) for f in files), path
    for path in files:
        assert any(path == d or path.startswith(d) for d in documented), f"{path} is not in the page's list"


def test_the_matrix_is_as_documented(project: Path) -> None:
    assert 'project.path = "."' in SECTION and "torch 2.6 and 2.13" in SECTION
    table = load_table()
    matrix = load_matrix(project / "matrix.toml", table)
    repo = load_matrix(REPO / "matrix.toml", table)
    assert matrix.project.path == project.resolve()
    assert matrix.build.engine == "docker" and matrix.python == ("abi3",)
    assert (matrix.build.debian_base, matrix.build.torch_index) == (repo.build.debian_base, repo.build.torch_index)
    variants = load_plan(project / "matrix.toml").variants
    assert {v.key.torch for v in variants} == {"2.6", "2.13"}
    assert {v.key.cxx11_abi for v in variants if v.key.torch == "2.6"} == {True, False}  # both ABIs
    for variant in variants:
        if variant.key.backend.kind == "cuda":  # each release's default CUDA build, only
            release = table.release(variant.key.torch)
            assert release is not None and variant.backend.build_name == release.pypi_default
    assert {v.key.backend.kind for v in variants} == {"cpu", "cuda"}


def test_the_runtime_snippet_is_the_scaffolds(project: Path) -> None:
    snippet = markdown_section(SECTION, "## The `_runtime` contract").split("```python\n", 1)[1].split("```", 1)[0]
    init_lines = set((project / "python" / "demo" / "__init__.py").read_text().replace('"demo"', '"NAME"').splitlines())
    lines = [line for line in snippet.splitlines() if line.strip()]
    assert len(lines) >= 8
    for line in lines:
        assert line in init_lines, line


# --- the runtime contract, on the scaffold staged as a build stages it --------------------------


@pytest.fixture(scope="module")
def staged(project: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    (variant,) = [v for v in load_plan(project / "matrix.toml").variants if v.id == "torch213-cxx11-cpu-x86_64-linux"]
    dest = tmp_path_factory.mktemp("staged")
    write_stage(plan_stage(load_kernel(project), variant), dest)
    return dest


def test_staging_vendors_the_runtime_and_carries_the_ops(project: Path, staged: Path) -> None:
    assert not (project / "python" / "demo" / "_runtime").exists()
    assert (staged / "demo" / "_runtime" / "__init__.py").is_file()
    record = json.loads((staged / "demo" / "_build.json").read_text())
    assert record["ops"] == list(load_kernel(project).ops)
    assert record["version"] == "0.1.0+cputorch2.13"  # each wheel: +<variant's local version>
    assert "description='PyTorch ops in C++ and CUDA'" in (staged / "setup.py").read_text()  # the wheel's summary


def test_namespace_is_unique_per_variant_and_version(project: Path) -> None:
    kernel = load_kernel(project)
    variants = load_plan(project / "matrix.toml").variants
    names = {namespace_for(kernel, v) for v in variants}
    assert len(names) == len(variants)
    for variant in variants:
        assert re.fullmatch(rf"_demo_{variant.key.backend.kind}_[0-9a-f]{{8}}", namespace_for(kernel, variant))
    newer = dataclasses.replace(kernel, version="0.2.0")
    assert all(namespace_for(newer, v) != namespace_for(kernel, v) for v in variants)
    cpu = next(v for v in variants if v.key.backend.kind == "cpu")
    setup = plan_stage(kernel, cpu).setup_py
    assert f"('DEMO_NAMESPACE', {namespace_for(kernel, cpu)!r})" in setup


RUN = r"""
import json, sys, warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import torch, demo
    x, y = torch.randn(3, 5), torch.randn(3, 5)
    result = {"close": bool(torch.allclose(demo.scaled_add(x, y, 0.5), x + 0.5 * y)),
              "ops": list(demo._package.op_names), "info": demo.backend_info()}
    try:
        demo._package.op("undeclared")
    except AttributeError as exc:
        result["undeclared"] = str(exc)
result["warnings"] = [str(w.message) for w in caught if "demo" in str(w.message)]
print(json.dumps(result, default=str))
"""


def run_staged(staged: Path, tmp_path: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    bare = tmp_path / "bin"  # no compiler on PATH: nothing can JIT
    bare.mkdir(exist_ok=True)
    environ = {"PATH": str(bare), "HOME": str(tmp_path), "PYTHONPATH": str(staged), **env}
    return subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=300,
                          env=environ, cwd=tmp_path)


def test_without_a_compiled_library_the_reference_ops_run_with_one_warning(staged: Path, tmp_path: Path) -> None:
    result = run_staged(staged, tmp_path, RUN)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.splitlines()[-1])
    assert out["close"] and out["ops"] == ["scaled_add"]  # the op names: kernel.toml, via _build.json
    assert out["info"]["mode"] == "reference"
    assert set(out["info"]) >= {"mode", "variant", "library", "reason", "ops", "decisions"}
    assert len(out["warnings"]) == 1, out["warnings"]
    assert "undeclared" in out["undeclared"]


def test_load_variable_is_read_at_the_first_op_not_at_import(staged: Path, tmp_path: Path) -> None:
    code = "import torch, demo\nprint('imported')\ndemo.scaled_add(torch.ones(1), torch.ones(1))"
    result = run_staged(staged, tmp_path, code, DEMO_LOAD="sometimes")
    assert result.stdout.strip() == "imported" and result.returncode != 0
    assert "DEMO_LOAD='sometimes'" in result.stderr and "auto, prebuilt, jit, reference" in result.stderr
    forced = run_staged(staged, tmp_path, RUN, DEMO_LOAD="reference")
    assert forced.returncode == 0, forced.stderr
    assert json.loads(forced.stdout.splitlines()[-1])["info"]["mode"] == "reference"


def test_cache_dir_variable_and_default(tmp_path: Path) -> None:
    from wheelfactory._runtime._settings import read_settings

    assert "`<NAME>_CACHE_DIR`" in SECTION and "(default `~/.cache/NAME`)" in SECTION
    settings = read_settings("demo", {"HOME": str(tmp_path)})
    assert (settings.load_var, settings.cache_var) == ("DEMO_LOAD", "DEMO_CACHE_DIR")
    assert settings.cache_dir == tmp_path / ".cache" / "demo"
    moved = read_settings("demo", {"HOME": str(tmp_path), "DEMO_CACHE_DIR": str(tmp_path / "c")})
    assert moved.cache_dir == tmp_path / "c"
    assert read_settings("demo", {"HOME": str(tmp_path), "DEMO_LOAD": "jit"}).load_mode == "jit"


def test_section_names_the_command_and_its_defaults() -> None:
    assert "wheelfactory new NAME [--path DIR]" in SECTION and "(default `./NAME`)" in SECTION
    assert "exit code 2" in SECTION and "(exit 9)" in SECTION
