"""Pure toolkit checks: nvcc vs torch's CUDA, arch selection, gencode flags, build tools.

The toolkit facts (CUDA minor groups, default arch lists, arch ranges) are not the runtime's: they
come from factory/wheelfactory/data/compat.toml, shipped at staging as ``_runtime/_toolkits.json``. These tests
feed the runtime that file as staging writes it, and check that the runtime follows it.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from tests.testkit import REPO
from wheelfactory._runtime._arch import CudaArch
from wheelfactory._runtime._errors import InvalidArch, InvalidVersion
from wheelfactory._runtime._toolkit import (
    TOOLKITS_FILE,
    ToolkitFacts,
    check_build_tools,
    check_nvcc_version,
    gencode_flags,
    parse_arch_list,
    parse_nvcc_version,
    read_toolkit_facts,
    select_cuda_archs,
)
from wheelfactory._runtime._versions import MajorMinor
from wheelfactory.plan.compat import load_table

V = MajorMinor.parse
RUNTIME = REPO / "runtime"


def shipped(tmp_path: Path, edit: object = None) -> ToolkitFacts:
    """The facts as the runtime reads them from the file staging writes (optionally edited)."""
    data = load_table().toolkit_facts().to_json()
    if callable(edit):
        edit(data)
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / TOOLKITS_FILE).write_text(json.dumps(data), encoding="utf-8")
    facts = read_toolkit_facts(tmp_path)
    assert facts.shipped, facts.source
    return facts


@pytest.fixture
def facts(tmp_path: Path) -> ToolkitFacts:
    return shipped(tmp_path)


@pytest.mark.parametrize(
    ("nvcc", "torch_cuda", "ok", "words"),
    [
        ("13.0", "13.0", True, "matches"),
        ("12.6", "12.6", True, "matches"),
        ("12.4", "12.6", True, "same minor-version group"),
        ("12.8", "12.6", True, "same minor-version group"),
        ("12.9", "12.0", True, "same minor-version group"),
        ("12.1", "12.9", True, "same minor-version group"),
        ("11.8", "11.0", True, "same minor-version group"),
        ("11.1", "11.7", True, "same minor-version group"),
        ("10.2", "10.0", True, "same minor-version group"),
        ("13.2", "13.0", True, "same minor-version group"),  # 13.x is one group
        ("13.0", "13.1", True, "same minor-version group"),
        ("12.8", "13.0", False, "major versions differ"),
        ("13.0", "12.8", False, "major versions differ"),
        ("11.8", "12.1", False, "major versions differ"),
        ("12.10", "12.6", False, "not in one compatibility group"),  # not in DeepSpeed's table
        ("14.1", "14.0", False, "not in one compatibility group"),  # unknown major: exact only
        ("14.0", "14.0", True, "matches"),
    ],
)
def test_check_nvcc_version(nvcc: str, torch_cuda: str, ok: bool, words: str, facts: ToolkitFacts) -> None:
    verdict = check_nvcc_version(V(nvcc), V(torch_cuda), facts)
    assert verdict.ok is ok
    assert words in verdict.reason
    assert f"nvcc {nvcc}" in verdict.reason and torch_cuda in verdict.reason
    assert bool(verdict.fix) is not ok  # a refusal always says what to do


def test_parse_nvcc_version() -> None:
    text = (
        "nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\n"
        "Built on Wed_Aug_20_01:58:59_PM_PDT_2025\nCuda compilation tools, release 13.0, V13.0.88\n"
    )
    assert parse_nvcc_version(text) == MajorMinor(13, 0)
    with pytest.raises(InvalidVersion, match=r"no 'release X\.Y'"):
        parse_nvcc_version("command not found")


def archs(text: str) -> tuple[CudaArch, ...]:
    return tuple(sorted({CudaArch.parse(a) for a in text.split(";")}))


@pytest.mark.parametrize(
    ("env_list", "caps", "record", "torch_cuda", "expected", "source"),
    [
        ("8.0;9.0+PTX", ("12.0",), ("7.5",), "13.0", "8.0;9.0+PTX", "TORCH_CUDA_ARCH_LIST"),
        ("8.0 9.0", (), (), "13.0", "8.0;9.0", "TORCH_CUDA_ARCH_LIST"),
        ("Ampere;Hopper+PTX", (), (), "12.8", "8.0;8.6;9.0+PTX", "TORCH_CUDA_ARCH_LIST"),
        ("native", ("9.0",), (), "13.0", "9.0", "the GPUs present"),
        (None, ("8.6", "9.0", "8.6"), ("7.5",), "13.0", "8.6;9.0", "the GPUs present"),
        (None, (), ("8.0", "12.0+PTX"), "13.0", "8.0;12.0+PTX", "the build record"),
        (None, (), (), "12.8", "7.0;7.5;8.0;8.6;9.0;10.0;12.0", "PyTorch's defaults for CUDA 12.8"),
        (None, (), (), "13.0", "7.5;8.0;8.6;9.0;10.0;12.0+PTX", "PyTorch's defaults for CUDA 13.0"),
        (None, (), (), "13.2", "7.5;8.0;8.6;9.0;10.0;12.0+PTX", "PyTorch's defaults for CUDA 13.2"),
        (None, (), (), "12.7", "5.0;6.0;7.0;7.5;8.0;8.6;9.0", "PyTorch's defaults for CUDA 12.7"),
        # CUDA 12.4 compiles up to 9.0: its own list, not a newer release's (10.0, 12.0+PTX)
        (None, (), (), "12.4", "5.0;6.0;7.0;7.5;8.0;8.6;9.0", "PyTorch's defaults for CUDA 12.4"),
        # CUDA 13 cannot compile sm_70 and older: dropped unless the user asked for them
        (None, (), ("7.0", "8.0"), "13.0", "8.0", "without archs CUDA 13 dropped"),
        (None, ("7.0", "9.0"), (), "13.0", "9.0", "without archs CUDA 13 dropped"),
    ],
)
def test_select_cuda_archs(
    env_list: str | None,
    caps: tuple[str, ...],
    record: tuple[str, ...],
    torch_cuda: str,
    expected: str,
    source: str,
    facts: ToolkitFacts,
) -> None:
    selection = select_cuda_archs(
        arch_list_env=env_list,
        gpu_capabilities=[V(c) for c in caps],
        record_archs=record,
        torch_cuda=V(torch_cuda),
        facts=facts,
    )
    assert selection.archs == archs(expected)
    assert source in selection.source


def test_invalid_arch_list_is_refused() -> None:
    with pytest.raises(InvalidArch, match=r"'9\.x'"):
        parse_arch_list("8.0;9.x")
    with pytest.raises(InvalidArch, match="empty"):
        parse_arch_list(" ; ")


def test_gencode_flags_are_sorted_and_unique() -> None:
    assert gencode_flags(archs("9.0a;8.0;12.0+PTX;8.0")) == [
        "-gencode=arch=compute_120,code=compute_120",
        "-gencode=arch=compute_120,code=sm_120",
        "-gencode=arch=compute_80,code=sm_80",
        "-gencode=arch=compute_90a,code=sm_90a",
    ]


@pytest.mark.parametrize(
    ("cxx", "ninja", "ok", "words"),
    [
        ("/usr/bin/c++", "/usr/bin/ninja", True, "c++ at /usr/bin/c++, ninja at /usr/bin/ninja"),
        (None, "/usr/bin/ninja", False, "no C++ compiler ('c++' is not on PATH"),
        ("/usr/bin/c++", None, False, "ninja is not on PATH"),
        (
            None,
            None,
            False,
            "no C++ compiler ('c++' is not on PATH; set CXX to choose one); ninja is not on PATH",
        ),
    ],
)
def test_check_build_tools(cxx: str | None, ninja: str | None, ok: bool, words: str) -> None:
    verdict = check_build_tools("c++", cxx, ninja)
    assert verdict.ok is ok and words in verdict.reason
    if not ok:
        assert "install" in verdict.fix


def _defaults(facts: ToolkitFacts, cuda: str) -> tuple[CudaArch, ...]:
    return select_cuda_archs(arch_list_env=None, gpu_capabilities=(), record_archs=(),
                             torch_cuda=V(cuda), facts=facts).archs


def test_default_arch_lists_are_compat_toml_s(facts: ToolkitFacts) -> None:
    table = load_table()
    assert _defaults(facts, "12.4") == archs(";".join(table.cuda_toolkit("12.4").arch_list))
    assert max(a.capability for a in _defaults(facts, "12.4")) == MajorMinor(9, 0)
    for toolkit in table.cuda:  # every release the table knows, not only the wheel's own
        expected = parse_arch_list(";".join(toolkit.arch_list))
        oldest = V(str(toolkit.min_arch))
        assert _defaults(facts, toolkit.version) == tuple(a for a in expected if a.capability >= oldest)


def test_the_runtime_follows_the_shipped_table(tmp_path: Path) -> None:
    """No second copy in runtime/: change the shipped data and the runtime's answers change."""
    facts = shipped(tmp_path / "as-is")
    assert check_nvcc_version(V("12.4"), V("12.6"), facts).ok

    def edit(data: dict[str, object]) -> None:
        groups: list[list[str]] = data["cuda_groups"]  # type: ignore[assignment]
        for group in groups:
            if "12.4" in group:
                group.remove("12.4")
        cuda: dict[str, dict[str, str]] = data["cuda"]  # type: ignore[assignment]
        cuda["12.4"]["arch_list"] = "8.0;8.9"

    edited = shipped(tmp_path / "edited", edit)
    verdict = check_nvcc_version(V("12.4"), V("12.6"), edited)
    assert not verdict.ok and "not in one compatibility group" in verdict.reason
    assert check_nvcc_version(V("12.6"), V("12.8"), edited).ok  # the rest of the group still holds
    assert _defaults(edited, "12.4") == archs("8.0;8.9")


def test_without_a_shipped_table_only_exact_matches_and_no_default_archs(tmp_path: Path) -> None:
    """A runtime used from a source checkout has no _toolkits.json: it says so, trusts only an
    exact nvcc match, and asks for TORCH_CUDA_ARCH_LIST rather than guessing a list."""
    facts = read_toolkit_facts(tmp_path)
    assert not facts.shipped and TOOLKITS_FILE in facts.source
    assert check_nvcc_version(V("12.6"), V("12.6"), facts).ok
    verdict = check_nvcc_version(V("12.4"), V("12.6"), facts)
    assert not verdict.ok and "only an exact match is trusted" in verdict.reason and verdict.fix
    with pytest.raises(InvalidArch, match="set TORCH_CUDA_ARCH_LIST"):
        _defaults(facts, "12.4")
    chosen = select_cuda_archs(arch_list_env=None, gpu_capabilities=(V("9.0"),), record_archs=(),
                               torch_cuda=V("12.4"), facts=facts)
    assert chosen.archs == archs("9.0")  # the GPU present still names the arch
    (tmp_path / TOOLKITS_FILE).write_text("{not json", encoding="utf-8")
    broken = read_toolkit_facts(tmp_path)
    assert not broken.shipped and "unusable" in broken.source


def test_the_shipped_file_round_trips(facts: ToolkitFacts) -> None:
    assert ToolkitFacts.from_json(json.loads(json.dumps(facts.to_json())), facts.source.split(" ")[0]) \
        ._replace(source=facts.source) == facts
    table = load_table()
    assert {str(c.version) for c in facts.cuda} == {c.version for c in table.cuda}
    assert {str(v) for v, _ in facts.rocm} == {r.version for r in table.rocm}


def test_runtime_keeps_no_arch_table_of_its_own() -> None:
    """A default arch list (three or more archs) spelled out in runtime/ would be a second copy."""
    arch_list = re.compile(r"^\d+\.\d+[af]?(\+PTX)?(;\d+\.\d+[af]?(\+PTX)?){2,}$")
    found = []
    for module in RUNTIME.glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and arch_list.match(node.value):
                found.append(f"{module.name}:{node.lineno}: {node.value}")
    assert not found


@pytest.mark.slow  # a fresh interpreter importing torch (seconds)
def test_an_installed_runtime_reads_the_table_staged_beside_it(tmp_path: Path) -> None:
    """In a package as the factory stages it, the vendored runtime finds _toolkits.json by itself."""
    from tests.runtime.rt_assemble import FIXTURE_KERNEL, child_env, run_python, stage_package
    from wheelfactory.project.kernel_toml import load_kernel

    kernel = load_kernel(FIXTURE_KERNEL)
    stage_package(kernel, tmp_path)
    code = ("from tinyops._runtime._toolkit import read_toolkit_facts; facts = read_toolkit_facts(); "
            "print(facts.shipped, {str(c.version): c.arch_list for c in facts.cuda}['12.4'])")
    proc = run_python(["-c", code], child_env(kernel, tmp_path), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", ";".join(load_table().cuda_toolkit("12.4").arch_list)]
