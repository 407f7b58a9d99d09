"""One "does this build fit this environment" rule: the runtime's loader, `wheelfactory which` and
the index's select.py give the same answer, in the same words, on a table of cases.

select.py is run as users run it: a single file, by an interpreter with nothing but the standard
library (``python -I -S``: no site-packages, so no wheelfactory and no torch to lean on).
"""

from __future__ import annotations

import ast
import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest
from wheelfactory._runtime import _fit
from wheelfactory._runtime._env import Environment
from wheelfactory._runtime._record import decide_prebuilt, parse_build_record
from wheelfactory._runtime._versions import MajorMinor
from wheelfactory.publish import index_json, select
from wheelfactory.publish.select_script import select_script

ENVS = [
    # torch.__version__, backend, toolkit, cxx11 ABI, Python, platform.machine()
    ("2.13.0+cu131", "cuda", "13.1", True, "3.11", "x86_64"),
    ("2.13.1", "cpu", None, True, "3.12", "x86_64"),
    ("2.13.0+rocm7.1", "rocm", "7.1.25424", True, "3.11", "x86_64"),
    ("2.6.0+cu124", "cuda", "12.4", False, "3.8", "x86_64"),
    ("2.15.0+cu130", "cuda", "13.0", True, "3.13", "arm64"),
]
VARIANTS = [
    # torch, backend, toolkit, cxx11 ABI, python, arch, stable ABI
    ("2.13", "cuda", "13.0", True, "abi3", "x86_64", False),
    ("2.13", "cuda", "13.2", True, "abi3", "x86_64", False),
    ("2.13", "cuda", "12.8", True, "abi3", "x86_64", False),
    ("2.13", "cpu", None, True, "abi3", "x86_64", False),
    ("2.13", "cpu", None, True, "3.12", "x86_64", False),
    ("2.13", "rocm", "7.1", True, "abi3", "x86_64", False),
    ("2.13", "rocm", "7.2", True, "abi3", "x86_64", False),
    ("2.6", "cuda", "12.4", False, "abi3", "x86_64", False),
    ("2.6", "cuda", "12.1", False, "3.8", "x86_64", False),
    ("2.6", "cpu", None, True, "abi3", "x86_64", False),
    ("2.10", "cuda", "13.0", False, "abi3", "aarch64", True),
    ("2.10", "cpu", None, True, "abi3", "x86_64", True),
    ("2.14", "cuda", "13.0", True, "abi3", "x86_64", True),
    ("2.15", "cuda", "13.0", True, "abi3", "AMD64", False),
]


def env_dict(case: tuple[str, str, str | None, bool, str, str]) -> dict[str, object]:
    """The environment as select.py's detect() reports it."""
    version, backend, toolkit, abi, python, machine = case
    return {"torch": ".".join(version.split("+")[0].split(".")[:2]), "torch_version": version.split("+")[0],
            "backend": backend, "toolkit": ".".join(toolkit.split(".")[:2]) if toolkit else None,
            "cxx11_abi": abi, "python": python, "arch": machine}


def variant_dict(case: tuple[str, str, str | None, bool, str, str, bool]) -> dict[str, object]:
    """A row of index.json."""
    torch, backend, toolkit, abi, python, arch, stable = case
    return {"id": f"v-{torch}-{backend}{toolkit or ''}-{abi}-{python}-{arch}-{stable}", "project": "tiny",
            "torch": torch, "backend": backend, "toolkit": toolkit, "cxx11_abi": abi, "python": python,
            "arch": arch, "stable_abi": stable, "index": "x/simple/"}


def runtime_environment(case: tuple[str, str, str | None, bool, str, str]) -> Environment:
    version, backend, toolkit, abi, python, machine = case
    kit = MajorMinor.parse(toolkit) if toolkit else None
    return Environment(torch_version=version, torch_git_version="", cuda=kit if backend == "cuda" else None,
                       hip=kit if backend == "rocm" else None, cxx11_abi=abi, python=MajorMinor.parse(python),
                       python_abi="cpython-3xx", machine=_fit.normalize_machine(machine))


def runtime_record(variant: dict[str, object]) -> object:
    return parse_build_record({
        "schema": 1, "name": "tiny", "variant": variant["id"], "torch": variant["torch"],
        "backend": variant["backend"], "toolkit": variant["toolkit"], "cxx11_abi": variant["cxx11_abi"],
        "python": variant["python"], "arch": variant["arch"], "arch_list": [], "namespace": "_tiny_x",
        "ops": ["op"], "library": "_C.abi3.so", "stable_abi": variant["stable_abi"]})


CASES = list(itertools.product(ENVS, VARIANTS))


def runtime_answers() -> list[list[str]]:
    answers = []
    for env, variant in CASES:
        decision = decide_prebuilt(runtime_environment(env), runtime_record(variant_dict(variant)))  # type: ignore[arg-type]
        answers.append([] if decision.accepted else decision.reason.split("; "))
    return answers


def test_the_table_has_fits_and_misfits_of_every_kind() -> None:
    answers = runtime_answers()
    assert sum(not a for a in answers) >= 10 and sum(bool(a) for a in answers) >= 30
    words = " ".join(w for a in answers for w in a)
    for kind in ("this machine is", "this is torch", "ABI", "Python", "CUDA", "ROCm", "stable-ABI"):
        assert kind in words


def test_which_gives_the_runtime_s_answers() -> None:
    assert [select.mismatches(env_dict(e), variant_dict(v)) for e, v in CASES] == runtime_answers()


@pytest.fixture(scope="module")
def select_py(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("index") / "select.py"
    path.write_text(select_script("http://127.0.0.1:9"), encoding="utf-8")
    return path


SELECT_DRIVER = r"""
import json, sys
path, cases = sys.argv[1], json.loads(sys.stdin.read())
namespace = {"__name__": "select_under_test"}
exec(compile(open(path, encoding="utf-8").read(), path, "exec"), namespace)
print(json.dumps({"answers": [namespace["mismatches"](env, variant) for env, variant in cases],
                  "third_party": sorted(m for m in sys.modules if m.split(".")[0] in ("wheelfactory", "torch", "runtime"))}))
"""


def test_select_py_alone_gives_the_runtime_s_answers(select_py: Path) -> None:
    cases = [[env_dict(e), variant_dict(v)] for e, v in CASES]
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", SELECT_DRIVER, str(select_py)], input=json.dumps(cases),
                          capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["third_party"] == []
    assert result["answers"] == runtime_answers()


def test_select_py_is_one_standard_library_file(select_py: Path) -> None:
    tree = ast.parse(select_py.read_text(encoding="utf-8"))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.level == 0}
    assert imported - {"torch"} <= set(sys.stdlib_module_names) | {"__future__"}
    assert not any(isinstance(node, ast.ImportFrom) and node.level for node in ast.walk(tree))


def _top_level_names(source: str) -> set[str]:
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def test_embedding_shadows_nothing() -> None:
    """select.py is runtime/_fit.py, publish/index_json.py and publish/select.py in one file: no
    name may be defined by two of them."""
    modules = [_fit, index_json, select]
    names = [_top_level_names(Path(m.__file__ or "").read_text(encoding="utf-8")) - {"__all__"}
             for m in modules]
    for first, second in itertools.combinations(names, 2):
        assert not first & second
