"""What each project kind is, as data the layers above read (verify/, engines/, runner/).

The kinds themselves (how each loads its project and stages a variant) are the table in
project/kinds.py; a staged variant carries its kind's facts (``Stage.kind``) so that the checks
and the engines ask what a kind does (which smoke program, which wheel layout) and never which
kind it is. Kept apart from the table because the stages import these facts and the table
imports the stages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from wheelfactory.plan import kind_names
from wheelfactory.plan.kind_names import KindName

# The smoke program verify/checks.py runs on a compiled wheel, named for what it checks:
# "declared-ops": kernel.toml's ops registered, with references, samples matched (native_smoke.py);
# "op-namespace": the library registers ops under its build's namespace (kernel_builder_smoke.py);
# "imports": the package and each compiled module import (byo_smoke.py).
SmokeProgram = Literal["declared-ops", "op-namespace", "imports"]


@dataclass(frozen=True)
class KindFacts:
    name: KindName
    describe: str  # for messages: "factory-native (kernel.toml)"
    smoke: SmokeProgram | None  # None: nothing compiled (a pip install check instead)
    # The wheel has the factory's layout: ``<pkg>/_C*.so``, ``<pkg>/_build.json``, cp39-abi3 when
    # abi3 (verify/repair.py check_wheel's ``native``); its smoke must load the prebuilt library.
    factory_layout: bool
    # The factory writes the project's packaging (setup.py): the host engine can always build abi3.
    generated_packaging: bool
    # The project's own build system picks its arch flags and may compile no device code at all: a
    # CPU-only CUDA wheel is a warning, and an arch mismatch names the matrix setting that matches.
    own_arch_flags: bool


NATIVE = KindFacts(
    kind_names.NATIVE,
    "factory-native (kernel.toml)",
    "declared-ops",
    factory_layout=True,
    generated_packaging=True,
    own_arch_flags=False,
)
KERNEL_BUILDER = KindFacts(
    kind_names.KERNEL_BUILDER,
    "kernel-builder (a Hugging Face build.toml)",
    "op-namespace",
    factory_layout=False,
    generated_packaging=True,
    own_arch_flags=False,
)
KERNEL_BUILDER_NOARCH = KindFacts(
    kind_names.KERNEL_BUILDER_NOARCH,
    "kernel-builder noarch (pure Python, no [kernel.*])",
    None,
    factory_layout=False,
    generated_packaging=True,
    own_arch_flags=False,
)
BRING_YOUR_OWN = KindFacts(
    kind_names.BRING_YOUR_OWN,
    "bring-your-own (setup.py / pyproject.toml)",
    "imports",
    factory_layout=False,
    generated_packaging=False,
    own_arch_flags=True,
)
