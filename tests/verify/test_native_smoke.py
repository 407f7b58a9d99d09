"""The generic smoke check of factory-native wheels (verify/native_smoke.py), in-process: ops
really registered with torch.library under a fresh namespace, a package whose loader binds them,
and each way the three declarations of the ops can disagree."""

from __future__ import annotations

import io
import itertools
import json
import sys
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
import torch
from wheelfactory.verify.native_smoke import main

_count = itertools.count()

RUNTIME = '''
import importlib
import torch

class KernelPackage:
    def __init__(self, name, namespace, ops):
        self.name, self.namespace, self.op_names = name, namespace, tuple(ops)

    def backend_info(self):
        return {"mode": "prebuilt", "variant": "v1", "namespace": self.namespace}

    def reference(self):
        return importlib.import_module(self.name + "._reference")

    def op(self, name):
        return getattr(getattr(torch.ops, self.namespace), name).default
'''

REFERENCE = '''
def twice(out, x):
    out.copy_(x * 2)

def plus_one(out, x):
    out.copy_(x + 1)
'''


@pytest.fixture
def kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """make(package_ops, registered={op: impl}, reference=text, samples=text) -> package name."""
    libraries: list[torch.library.Library] = []

    def make(package_ops: list[str], registered: dict[str, Any], reference: str = REFERENCE,
             samples: str | None = None) -> str:
        n = next(_count)
        name, namespace = f"smokepkg{n}", f"_smoke_test_ns_{n}"
        library = torch.library.Library(namespace, "DEF")
        libraries.append(library)
        for op, impl in registered.items():
            library.define(f"{op}(Tensor! out, Tensor x) -> ()")
            library.impl(op, impl, "CPU")
        package = tmp_path / name
        (package / "_runtime").mkdir(parents=True)
        (package / "_runtime" / "__init__.py").write_text(RUNTIME)
        (package / "__init__.py").write_text(
            f"from ._runtime import KernelPackage\n_package = KernelPackage({name!r}, {namespace!r}, {package_ops!r})\n")
        (package / "_reference.py").write_text(reference)
        if samples is not None:
            (package / "_samples.py").write_text(samples)
        return name

    monkeypatch.syspath_prepend(str(tmp_path))
    yield make
    for module in [m for m in sys.modules if m.startswith("smokepkg")]:
        del sys.modules[module]


def twice(out: torch.Tensor, x: torch.Tensor) -> None:
    out.copy_(x * 2)


def plus_one(out: torch.Tensor, x: torch.Tensor) -> None:
    out.copy_(x + 1)


def wrong_twice(out: torch.Tensor, x: torch.Tensor) -> None:
    out.copy_(x * 3)


SAMPLES = '''
import torch
def sample_inputs():
    return {"twice": [(torch.empty(3), torch.arange(3.0))], "plus_one": [(torch.empty(2, 2), torch.ones(2, 2))]}
'''


def smoke(name: str, ops: list[str], samples: bool = False) -> dict[str, Any]:
    out = io.StringIO()
    with redirect_stdout(out):
        main({"package": name, "ops": ops, "sample_inputs": ["_samples", "sample_inputs"] if samples else None})
    result: dict[str, Any] = json.loads(out.getvalue().strip().splitlines()[-1])
    return result


def test_agreeing_declarations_and_matching_samples_pass(kernel: Any) -> None:
    name = kernel(["twice", "plus_one"], {"twice": twice, "plus_one": plus_one}, samples=SAMPLES)
    result = smoke(name, ["twice", "plus_one"], samples=True)
    assert result == {"mode": "prebuilt", "variant": "v1", "ops": 2, "samples": 2, "problems": []}


def test_a_declared_op_the_library_does_not_register_is_named(kernel: Any) -> None:
    name = kernel(["twice", "plus_one"], {"twice": twice})
    problems = smoke(name, ["twice", "plus_one"])["problems"]
    assert any("op 'plus_one' is in kernel.toml but _C registers no _smoke_test_ns_" in p for p in problems), problems


def test_an_op_the_library_registers_but_kernel_toml_does_not_declare_is_named(kernel: Any) -> None:
    name = kernel(["twice"], {"twice": twice, "plus_one": plus_one})
    problems = smoke(name, ["twice"])["problems"]
    assert len(problems) == 1 and "::plus_one, which kernel.toml does not declare" in problems[0]


def test_the_package_declaring_other_ops_than_kernel_toml_is_named(kernel: Any) -> None:
    name = kernel(["twice"], {"twice": twice, "plus_one": plus_one})
    problems = smoke(name, ["twice", "plus_one"])["problems"]
    assert problems == ["op 'plus_one' is in kernel.toml but not among the package's KernelPackage ops"]


def test_an_op_without_a_reference_is_named(kernel: Any) -> None:
    name = kernel(["twice", "plus_one"], {"twice": twice, "plus_one": plus_one}, reference=REFERENCE.split("def plus")[0])
    problems = smoke(name, ["twice", "plus_one"])["problems"]
    assert problems == [f"op 'plus_one' has no reference implementation in {name}._reference"]


def test_a_kernel_that_disagrees_with_its_reference_on_a_sample_is_named(kernel: Any) -> None:
    name = kernel(["twice", "plus_one"], {"twice": wrong_twice, "plus_one": plus_one}, samples=SAMPLES)
    result = smoke(name, ["twice", "plus_one"], samples=True)
    assert result["samples"] == 2 and len(result["problems"]) == 1
    assert result["problems"][0].startswith("op 'twice' sample 1 differs from its reference: argument 0 after the call")


def test_samples_for_an_undeclared_op_are_refused(kernel: Any) -> None:
    name = kernel(["twice"], {"twice": twice}, samples="def sample_inputs():\n    return {'nope': []}\n")
    assert smoke(name, ["twice"], samples=True)["problems"] == [
        "sample inputs name op 'nope', which kernel.toml does not declare"]


def test_a_sample_may_set_its_own_tolerance(kernel: Any) -> None:
    loose = ("import torch\ndef sample_inputs():\n"
             "    return {'twice': [{'args': (torch.empty(3), torch.arange(3.0)), 'rtol': 0.0, 'atol': 10.0}]}\n")
    name = kernel(["twice"], {"twice": wrong_twice}, samples=loose)
    assert smoke(name, ["twice"], samples=True)["problems"] == []
