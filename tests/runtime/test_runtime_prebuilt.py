"""The lean prebuilt path (``_prebuilt``) against the full loader.

The lean check must accept what the full rule accepts (``parse_build_record`` plus
``decide_prebuilt``) and never what it rejects: Hypothesis holds the two together on generated
records and environments. A prebuilt load must import the two lean modules of the runtime
(``_package`` and ``_prebuilt``) and no module that ``import torch`` had not imported, and its ``backend_info()`` must be what the full loader reports
for the same library (fresh interpreters with the compiled fixture kernel; slow).
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.runtime import rt_assemble as rt
from hypothesis import example, given, settings
from hypothesis import strategies as st
from wheelfactory._runtime import _fit, _gpus, _loader, _package, _prebuilt, _record
from wheelfactory._runtime._arch import CudaArch
from wheelfactory._runtime._env import detect_environment, environment_from
from wheelfactory._runtime._errors import InvalidArch, InvalidVersion, RecordError
from wheelfactory._runtime._prebuilt import environment_facts, prebuilt_fits
from wheelfactory._runtime._record import decide_prebuilt, parse_build_record
from wheelfactory._runtime._settings import read_settings
from wheelfactory._runtime._versions import MajorMinor
from wheelfactory.project.kernel_toml import KernelSpec

CUDA_ARCHS = [
    "7.5",
    "8.0",
    "8.6",
    "9.0",
    "9.0a",
    "10.0f",
    "12.0",
    "8.0+PTX",
    "12.0+PTX",
    "10.0a+PTX",
    "10.0f+PTX",
]
GFX_ARCHS = ["gfx90a", "gfx942:sramecc+:xnack-", "gfx1100"]
CAPABILITIES = [(7, 5), (8, 0), (8, 6), (9, 0), (10, 0), (10, 3), (12, 0), (12, 1)]
TORCHES = ["2.6.0+cu124", "2.12.1", "2.13.0+cpu", "2.13.1+cu130", "2.14.0a0+git1234", "2.13.0+rocm7.1"]
CUDAS = [None, "", "12.4", "12.8", "13.0", "13.2"]
HIPS = [None, "", "7.1.25424-dd7f95766", "7.2.1"]
MACHINES = ["x86_64", "AMD64", "aarch64", "arm64"]
PYTHONS = [(3, 8), (3, 9), (3, 11), (3, 12), (3, 14)]
# What a hand-edited or corrupt record, or an odd torch, may hold instead.
JUNK: list[object] = [
    None,
    True,
    False,
    0,
    1,
    2,
    1.5,
    "",
    " 2.13",
    "2.13\n",
    "v2.13",
    "2",
    "x",
    [],
    ["x"],
    ["8.0\n"],
    {},
    "gfx",
    "9.0b",
    "13.0.1",
    "../_C.so",
    "_C.so\n",
    ".so",
    "-C.so",
    ".x.so",
    "class",
    "a-b",
    "abi3 ",
    "3.11\n",
    "\u00b2.13",
    "\u0663.13",
    "op\u00e9",
    [3],
    [None],
    ["op\u00e9"],
]

Facts = tuple[Any, Any, Any, Any, Any, Any]


@st.composite
def environments(draw: st.DrawFn) -> tuple[Facts, list[tuple[int, int]], list[str]]:
    """environment_facts() as torch may report them, with the GPUs visible_gpus() would find."""
    facts = (
        draw(st.sampled_from(TORCHES)),
        draw(st.sampled_from(CUDAS)),
        draw(st.sampled_from(HIPS)),
        draw(st.booleans()),
        draw(st.sampled_from(PYTHONS)),
        draw(st.sampled_from(MACHINES)),
    )
    caps = draw(st.lists(st.sampled_from(CAPABILITIES), max_size=3))
    gfx = draw(st.lists(st.sampled_from([a.split(":")[0] for a in GFX_ARCHS] + ["gfx1201"]), max_size=2))
    return facts, caps, gfx


def neighbours(version: str) -> list[str]:
    """``2.13.0+cpu`` -> 2.13 (twice: the likeliest), 2.12, 2.14."""
    major, minor = _fit.parse_major_minor(version)
    return [f"{major}.{minor}", f"{major}.{minor}", f"{major}.{minor + 1}"] + [f"{major}.{minor - 1}"] * (
        minor > 0
    )


@st.composite
def records(draw: st.DrawFn, facts: Facts) -> dict[str, object]:
    """A build record as the factory writes it, each field often the one ``facts`` would need."""
    torch, cuda, hip, cxx11_abi, python, machine = facts

    def near(here: object, *others: object) -> object:
        return draw(st.sampled_from([here, here, *others]))

    backend = str(near("rocm" if hip else "cuda" if cuda else "cpu", "cpu", "cuda", "rocm"))
    env_toolkit = hip if backend == "rocm" else cuda
    toolkit = (
        near(*neighbours(env_toolkit), "12.4", "13.0", "7.1", None) if env_toolkit else near(None, "13.0")
    )
    pool = CUDA_ARCHS if backend == "cuda" else GFX_ARCHS if backend == "rocm" else CUDA_ARCHS + GFX_ARCHS
    return {
        "schema": 1,
        "name": "tinyops",
        "version": draw(st.sampled_from([None, "0.1.0+cputorch2.13"])),
        "variant": "torch213-cxx11-cpu-x86_64-linux",
        "torch": near(*neighbours(torch), "2.6", "2.13.0"),
        "built_with_torch": draw(st.sampled_from([None, "2.13.0"])),
        "backend": backend,
        "toolkit": toolkit,
        "cxx11_abi": near(cxx11_abi, not cxx11_abi),
        "python": near("abi3", f"{python[0]}.{python[1]}", "3.11", "3.12"),
        "arch": near(machine, "x86_64", "aarch64", "AMD64"),
        "arch_list": draw(st.lists(st.sampled_from(pool), max_size=3)),
        "namespace": "_tinyops_cpu_1a2b3c4d",
        "ops": ["silu_and_mul", "scale_add"],
        "library": "_C.abi3.so",
        "stable_abi": draw(st.booleans()),
        "source_digest": draw(st.sampled_from([None, "ab" * 32])),
    }


def full_rule(data: object, facts: Facts, caps: Sequence[tuple[int, int]], gfx: Sequence[str]) -> bool:
    """What the full loader decides: parse the record, detect the environment, decide_prebuilt."""
    try:
        record = parse_build_record(data)
        env = environment_from(facts)
    except (RecordError, InvalidVersion):
        return False  # a record it cannot use, a torch it cannot read: not prebuilt
    env = dataclasses.replace(
        env, gpu_capabilities=tuple(MajorMinor(*c) for c in caps), gpu_archs=tuple(gfx), gpus_probed=True
    )
    try:
        return decide_prebuilt(env, record).accepted
    except ValueError:  # a torch version the fit rule cannot parse: the loader's auto-mode safety net
        return False


def lean_check(data: object, facts: Facts, caps: Sequence[tuple[int, int]], gfx: Sequence[str]) -> bool:
    asked: list[str] = []

    def gpus(backend: str) -> tuple[Sequence[tuple[int, int]], Sequence[str]]:
        asked.append(backend)
        return caps, gfx

    fits = prebuilt_fits(json.loads(json.dumps(data)), facts, gpus)  # types exactly as json gives them
    # The GPUs are probed (CUDA initialised) only for a GPU record in a torch of its backend.
    assert not asked or (isinstance(data, dict) and asked == [data["backend"]] and data["backend"] != "cpu")
    return fits


@st.composite
def cases(draw: st.DrawFn) -> tuple[dict[str, object], Facts, list[tuple[int, int]], list[str]]:
    facts, caps, gfx = draw(environments())
    return draw(records(facts)), facts, caps, gfx


@settings(max_examples=1500, deadline=None)
@given(cases())
def test_the_lean_check_agrees_with_the_full_rule(
    case: tuple[dict[str, object], Facts, list[tuple[int, int]], list[str]],
) -> None:
    data, facts, caps, gfx = case
    assert lean_check(data, facts, caps, gfx) == full_rule(data, facts, caps, gfx)


def junk_for(key: str) -> st.SearchStrategy[object]:
    """What a hand-edited or corrupt record may hold under ``key``."""
    if key in ("arch_list", "ops"):
        names = [*CUDA_ARCHS, *GFX_ARCHS, "op", "x", "gfx", "gfx90a\n", "9.0b", "", "8.0.1", "a-b", 3]
        return st.one_of(st.sampled_from(JUNK), st.lists(st.sampled_from(names), min_size=1, max_size=2))
    return st.sampled_from(JUNK)


@st.composite
def fitting_cases(draw: st.DrawFn) -> tuple[dict[str, object], Facts, list[tuple[int, int]], list[str]]:
    """A record made for the environment drawn: the full rule accepts it."""
    facts, caps, gfx = draw(environments())
    torch, cuda, hip, cxx11_abi, python, machine = facts
    backend, toolkit = ("rocm", hip) if hip else ("cuda", cuda) if cuda else ("cpu", None)
    arch_list = {"cpu": [], "cuda": [f"{a}.{b}" for a, b in caps], "rocm": list(gfx)}[backend]
    record = {
        **draw(records(facts)),
        "torch": neighbours(torch)[0],
        "backend": backend,
        "toolkit": toolkit and neighbours(toolkit)[0],
        "cxx11_abi": cxx11_abi,
        "python": draw(st.sampled_from(["abi3", f"{python[0]}.{python[1]}"])) if python >= (3, 9) else "3.8",
        "arch": machine,
        "arch_list": arch_list,
    }
    return record, facts, caps, gfx


@settings(max_examples=1000, deadline=None)
@given(fitting_cases(), st.data())
def test_the_lean_check_never_accepts_what_the_full_rule_rejects(
    case: tuple[dict[str, object], Facts, list[tuple[int, int]], list[str]], data: st.DataObject
) -> None:
    """From a record that fits, break a field or what torch reports: the lean check may leave a
    case to the full rule, but never loads what the full rule would not."""
    record, facts, caps, gfx = case
    assert lean_check(record, facts, caps, gfx) and full_rule(record, facts, caps, gfx)
    for _ in range(data.draw(st.integers(1, 2), label="changes")):
        if data.draw(st.booleans(), label="torch reports something odd"):
            index = data.draw(st.integers(0, 2), label="fact")
            facts = (*facts[:index], data.draw(st.sampled_from(JUNK), label="reported"), *facts[index + 1 :])
        else:
            key = data.draw(st.sampled_from(sorted(record)), label="key")
            if data.draw(st.booleans(), label="delete"):
                del record[key]
            else:
                record[key] = data.draw(junk_for(key), label="value")
    assert not lean_check(record, facts, caps, gfx) or full_rule(record, facts, caps, gfx)


# -- the lean check's pieces against the full rule's parsers, where sampling is too thin ---------

ARCH_TEXTS = [
    *CUDA_ARCHS,
    "9.0a+PTX",
    "8.0.1",
    " 8.0",
    "8.0 ",
    "9.0af",
    "sm_80",
    "8",
    "",
    "+PTX",
    "12.0+ptx",
    "10.0F",
]


@pytest.mark.parametrize("text", ARCH_TEXTS)
def test_the_lean_cuda_arch_reading_is_cuda_arch_parse(text: str) -> None:
    try:
        full: CudaArch | None = CudaArch.parse(text)
    except InvalidArch:
        full = None
    lean = _gpus._cuda_arch(text)
    if lean is None:
        assert full is None or text != text.strip()  # blanks around it: left to the full rule
    else:
        assert full == CudaArch(*lean)


@pytest.mark.parametrize("arch", [*CUDA_ARCHS, "9.0a+PTX", "8.6+PTX", "8.6"])
def test_the_lean_arch_check_is_cuda_arch_serves(arch: str) -> None:
    lean = _gpus._cuda_arch(arch)
    assert lean is not None
    for capability in itertools.product(range(5, 14), range(10)):
        assert _gpus._serves(lean, capability) == CudaArch.parse(arch).serves(MajorMinor(*capability))


VERSIONS = [*TORCHES, *filter(None, CUDAS), *filter(None, HIPS), "2.13", "13.0"]  # torch's and the factory's


@given(st.one_of(st.sampled_from(VERSIONS), st.text("0123456789.+-v abcu\u00b2\u0663")))
def test_the_lean_version_reading_is_the_fit_rule_s(text: str) -> None:
    lean = _prebuilt.major_minor(text)
    if lean is not None:
        assert lean == _fit.parse_major_minor(text)
    else:
        assert text not in VERSIONS  # the spellings torch and the factory use are read here


CPU_FIT: dict[str, object] = {
    "schema": 1,
    "name": "t",
    "variant": "v",
    "torch": "2.13",
    "backend": "cpu",
    "cxx11_abi": True,
    "python": "abi3",
    "arch": "x86_64",
    "namespace": "_t",
    "ops": ["op"],
    "library": "_C.abi3.so",
}
CPU_TORCH = ("2.13.0+cpu", None, None, True, (3, 11), "x86_64")
ROCM_TORCH = ("2.13.0+rocm7.1", None, "7.1.25424", True, (3, 11), "x86_64")


@given(st.text("gfx0123456789abcdef:+-_.soCpyd/\n\u00e9", max_size=12))
@example("-x.so")
@example(".x.so")
@example("gfx")
@example("gfx90a:xnack-")
@example("gfx90a:x\ny")
@example("op\u00e9")
def test_the_lean_name_checks_are_the_record_s_patterns(text: str) -> None:
    """A library file name, an op namespace or name, a gfx name: the lean check takes what the
    record's patterns take, and without line breaks only that (their ``$`` takes a trailing one)."""
    for record, facts in (
        ({**CPU_FIT, "library": text}, CPU_TORCH),
        ({**CPU_FIT, "namespace": text}, CPU_TORCH),
        ({**CPU_FIT, "ops": ["op", text]}, CPU_TORCH),
        ({**CPU_FIT, "backend": "rocm", "toolkit": "7.1", "arch_list": [text]}, ROCM_TORCH),
    ):
        lean, full = lean_check(record, facts, [], []), full_rule(record, facts, [], [])
        assert lean == full if "\n" not in text else full or not lean


def test_no_single_corrupt_field_is_loaded_where_the_full_rule_would_not() -> None:
    """Every field of a fitting record (and what torch reports) replaced by each odd value, or left out."""
    record, facts = {**CPU_FIT, "arch_list": [], "stable_abi": False, "version": None}, CPU_TORCH
    assert lean_check(record, facts, [], []) and full_rule(record, facts, [], [])
    absent = object()
    for key in sorted(record):
        for value in [absent, *JUNK]:
            changed = {k: v for k, v in record.items() if k != key or value is not absent}
            if value is not absent:
                changed[key] = value
            assert not lean_check(changed, facts, [], []) or full_rule(changed, facts, [], []), (key, value)
    for index in range(3):
        for value in JUNK:
            odd = (*facts[:index], value, *facts[index + 1 :])
            assert not lean_check(record, odd, [], []) or full_rule(record, odd, [], []), (index, value)


def test_the_lean_check_repeats_the_full_rule_s_constants() -> None:
    assert _prebuilt.BUILD_RECORD_FILE == _record.BUILD_RECORD_FILE
    assert _prebuilt.ABI3_MIN_PYTHON == _fit.ABI3_MIN_PYTHON
    assert _record.RECORD_SCHEMA == 1  # the schema prebuilt_fits reads


@given(st.text(max_size=12))
def test_env_prefix_maps_every_non_alphanumeric_to_an_underscore(name: str) -> None:
    assert _prebuilt.env_prefix(name) == re.sub(r"[^0-9A-Za-z]", "_", name).upper()


@pytest.mark.parametrize("value", ["", "  ", "auto", " Prebuilt ", "JIT", "reference", "turbo"])
def test_the_hot_path_reads_the_load_mode_the_settings_layer_reads(value: str, tmp_path: Path) -> None:
    environ = {"MY_KERNELS_LOAD": value, "HOME": str(tmp_path)}
    lean = _prebuilt.load_mode("my-kernels", environ)
    if lean in ("auto", "prebuilt", "jit", "reference"):
        assert read_settings("my-kernels", environ).load_mode == lean
    else:
        assert value.strip().lower() == lean == "turbo"


def test_the_facts_are_what_detect_environment_reads() -> None:
    detected = detect_environment()
    assert environment_from(environment_facts(), detected.torch_git_version, detected.python_abi) == detected


# -- fresh interpreters: what a prebuilt load imports, what it reports -------------------------

# The runtime modules a prebuilt load may import: the package, its _runtime and the lean modules.
HOT_PATH = ["tinyops", "tinyops._runtime", "tinyops._runtime._package", "tinyops._runtime._prebuilt"]

NEW_MODULES = r"""
import json, sys
import torch
x, out = torch.randn(4, 8), torch.empty(4, 4)
before = set(sys.modules)
if sys.argv[1] == "bare":
    torch.ops.load_library(sys.argv[2])
    getattr(torch.ops, sys.argv[3]).silu_and_mul(out, x)
else:
    import tinyops
    tinyops.silu_and_mul(x, out=out)
    tinyops.scale_add(x, x, 2.0)
new = sorted(set(sys.modules) - before)
mode = tinyops.backend_info()["mode"] if sys.argv[1] != "bare" else "bare"
print("RESULT " + json.dumps({"new": new, "mode": mode}))
"""

SAME_REPORT = r"""
import json, sys
import torch
import tinyops
from tinyops._runtime import _package
tinyops.silu_and_mul(torch.randn(4, 8))
lean_only = "tinyops._runtime._loader" not in sys.modules
lean = tinyops.backend_info()
# The full loader alone, on the same package (its library already loaded: dlopen of the same path).
full_package = _package.KernelPackage(
    "tinyops", tinyops._package.package_dir, tinyops._package.op_names, module="tinyops"
)
full_package._load_prebuilt = lambda: None
full = full_package.backend_info()
print("RESULT " + json.dumps({"lean_only": lean_only, "lean": lean, "full": full}))
"""


def run(code: str, env: dict[str, str], *args: str) -> dict[str, Any]:
    proc = rt.run_python(["-c", code, *args], env)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])  # type: ignore[no-any-return]
    raise AssertionError(f"no result (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr[-3000:]}")


@pytest.mark.slow  # compiles the fixture kernel (the session's prebuilt library)
def test_a_prebuilt_load_imports_the_lean_modules_and_nothing_torch_had_not(
    kernel: KernelSpec, prebuilt_parent: Path, tmp_path: Path
) -> None:
    """Against the floor: whatever a bare ``torch.ops.load_library`` + call imports (torch's own
    lazy modules) is allowed; beyond that only the package, _runtime, _package and _prebuilt."""
    env = rt.child_env(kernel, prebuilt_parent, cache_dir=tmp_path / "cache")
    package = run(NEW_MODULES, env, "package")
    bare = run(
        NEW_MODULES, env, "bare", str(prebuilt_parent / kernel.name / rt.LIBRARY_NAME), rt.PREBUILT_NAMESPACE
    )
    assert package["mode"] == "prebuilt"
    assert sorted(set(package["new"]) - set(bare["new"])) == HOT_PATH


@pytest.mark.slow  # compiles the fixture kernel (the session's prebuilt library)
def test_backend_info_after_a_lean_load_is_the_full_loader_s(
    kernel: KernelSpec, prebuilt_parent: Path, tmp_path: Path
) -> None:
    result = run(SAME_REPORT, rt.child_env(kernel, prebuilt_parent, cache_dir=tmp_path / "cache"))
    assert result["lean_only"] is True
    assert result["lean"]["mode"] == "prebuilt"
    assert result["lean"]["reason"].endswith("matches this environment")
    assert result["lean"] == result["full"]


RECORDING_REFERENCE = """
calls = []
def silu_and_mul(out, x):
    calls.append(("silu_and_mul", x.device.type))
def scale_add(out, x, y, alpha):
    calls.append(("scale_add", x.device.type))
"""


@pytest.mark.slow  # compiles the fixture kernel (the session's prebuilt library)
def test_a_cpu_build_in_a_gpu_torch_is_left_to_the_full_loader(
    kernel: KernelSpec, prebuilt_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lean path declines before any dlopen; the full loader loads the library prebuilt and
    sends GPU tensors (meta tensors stand in for them) to the reference ops."""
    package = rt.assemble(kernel, tmp_path, record=rt.current_record(kernel, rt.PREBUILT_NAMESPACE))
    (package / rt.LIBRARY_NAME).symlink_to(prebuilt_library)  # one file: loaded once per process
    (tmp_path / "recording_ref").mkdir()
    (tmp_path / "recording_ref" / "__init__.py").write_text("")
    (tmp_path / "recording_ref" / "_reference.py").write_text(RECORDING_REFERENCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    torch_version = detect_environment().torch_version.split("+")[0]
    facts = (f"{torch_version}+cu130", "13.0", None, *environment_facts()[3:])
    monkeypatch.setattr(_prebuilt, "environment_facts", lambda: facts)
    monkeypatch.setattr(_loader, "detect_environment", lambda: environment_from(facts))
    pkg = _package.KernelPackage(kernel.name, package, kernel.ops, module="recording_ref", environ={})

    assert prebuilt_fits(json.loads((package / "_build.json").read_text()), facts)
    assert pkg._load_prebuilt() is None
    info = pkg.backend_info()
    assert info["mode"] == "prebuilt" and "cuda tensors use the reference ops" in str(info["reason"])
    import torch

    x, out = torch.randn(4, 8, device="meta"), torch.empty(4, 4, device="meta")
    pkg.op("silu_and_mul")(out, x)
    pkg.op("silu_and_mul")(torch.empty(4, 4), torch.randn(4, 8))  # a CPU tensor: the library's op
    assert importlib.import_module("recording_ref._reference").calls == [("silu_and_mul", "meta")]
