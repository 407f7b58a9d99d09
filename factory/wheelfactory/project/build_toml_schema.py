"""The keys of build.toml (Hugging Face kernel-builder's declaration), declared once per edition as
matrix.toml's and kernel.toml's are (plan/toml_model.py): project/build_toml_reader.py refuses
every key an edition does not declare here and checks each value by its rule here (with the words
of the refusal); ``detect_edition`` tells an unmarked document's edition by the keys each adds.

Sources read to learn the format (huggingface/kernels unless named otherwise); no code was copied:

* ``kernels-data/src/config/v1.rs`` to ``v5.rs`` - one serde schema per format, every table
  ``deny_unknown_fields``;
* ``kernels-data/src/config/compat.rs`` - unversioned documents are tried as v1, then v2, then v3
  (then v4): the first schema that accepts the document wins;
* ``kernels-data/src/config/parse.rs`` - only edition 5 carries a marker (``[general] edition = 5``);
  v4 is upgraded in memory, v1-v3 must be migrated with ``kernel-builder update-build``;
* ``kernels-data/src/config/mod.rs`` - the common model: ``Build.is_noarch()`` is "no
  ``[kernel.*]``", ``Backend`` (cann cpu cuda metal neuron rocm xpu, tpu from edition 5),
  ``TorchAbi`` (one stable-ABI version, or one per backend);
* ``kernels-data/src/config/name.rs`` (kernel names), ``deps.rs`` (``depends`` values),
  ``kernel_deps.rs`` (``kernel-depends`` entries);
* ``docs/source/builder/writing-kernels.md`` - the documented keys; huggingface/kernel-builder
  ``build2cmake/src/config/v1.rs``/``v2.rs`` and real files (kernels-community activation,
  template, rotary; kernels-test only-torch-2.4) for how documents look in the wild.

What each edition changes (the reader's ``edition`` is 1-5; only 5 is written in the file):

1. ``[general]`` holds only ``name``. ``[torch]`` holds ``src``, ``include``, ``pyext`` and
   ``universal = true`` (pure Python: every backend). ``[kernel.X]`` has no ``backend``: a
   ``language`` (``cuda`` default, ``cuda-hipify`` = the same sources also built for ROCm as unit
   ``X_rocm``, ``metal``), ``cuda-capabilities``, ``rocm-archs``, ``depends``, ``include``, ``src``.
   The backends are those of the units. (The upstream converter turns ``metal`` units into CUDA
   ones; here a ``metal`` unit is a Metal unit.)
2. ``[general]`` gains ``universal``, ``cuda-minver``, ``cuda-maxver``, ``hub`` and
   ``python-depends`` (``einops``, ``nvidia-cutlass-dsl``); ``[torch]`` gains ``minver``/``maxver``;
   ``[kernel.X]`` is tagged by ``backend`` (cpu cuda metal rocm xpu) with per-backend keys:
   cuda ``cuda-capabilities``/``cuda-flags``/``cuda-minver``, rocm ``rocm-archs``/``hip-flags``,
   xpu ``sycl-flags``, all ``cxx-flags``.
3. ``[general] backends`` (required) replaces ``universal``; ``version`` and ``license`` appear
   (optional), with ``upstream`` and ``[general.cuda]`` (``minver``/``maxver``/``python-depends``),
   ``[general.xpu]``/``[general.neuron]`` ``python-depends``. ``[torch]`` may be left out: a
   pure-Python (noarch) kernel. (``[tvm-ffi]`` frameworks appear here; they are not torch
   extensions and are refused.)
4. ``version`` and ``license`` are required and exactly one framework table is: ``[torch]`` or
   ``[torch-noarch]`` (empty). ``[general.cuda] capabilities``, ``[general.rocm] archs`` and
   ``[torch] stable-abi`` (a torch version) are new. It is told from 3 by those new keys.
5. ``[general] edition = 5``. ``[general]`` gains ``source``, ``minver`` (kernels release) and
   ``kernel-depends`` (``{repo-id, version|revision}``, also under ``[general.cuda|xpu|neuron]``),
   ``[general.tpu]``, backend ``tpu``; ``[general.rocm]`` and ``[general.cuda] capabilities`` are
   gone (``[torch-noarch]`` takes ``pyext``, ``cuda_capabilities``, ``rocm_archs``); ``[torch]``
   gains ``cxx-flags``, and ``stable-abi`` may be a per-backend table. Torch and CUDA bounds have
   at most two components.

Names: editions 4 and 5 follow ``name.rs`` (``^[a-z][-a-z0-9]*[a-z0-9]$``); the unversioned
formats predate it, and real kernels of that time use ``_`` too, so 1-3 also allow ``_``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wheelfactory.plan.toml_model import (
    AnyOf,
    Flag,
    Integer,
    Key,
    Section,
    Sections,
    Text,
    TextList,
    Value,
)
from wheelfactory.plan.tomlsource import TomlDocument, describe

LATEST_EDITION = 5
EDITIONS = range(1, LATEST_EDITION + 1)
UNITS = "kernel"  # [kernel.NAME]: the compiled units, a table each
FRAMEWORKS = ("torch", "torch-noarch", "tvm-ffi")  # one of them at most
STABLE_ABI_FIRST = "2.10"  # the first torch with a stable ABI to target

# [general] backends, per edition (1 and 2 have none: universal means all of edition 3's).
_BACKENDS = ("cann", "cpu", "cuda", "metal", "neuron", "rocm", "xpu")
GENERAL_BACKENDS = {e: _BACKENDS if e < 5 else tuple(sorted((*_BACKENDS, "tpu"))) for e in EDITIONS}
# What a [kernel.X] unit may compile for (its ``backend`` tag): the same in every edition.
UNIT_BACKENDS = ("cpu", "cuda", "metal", "rocm", "xpu")
DEPENDENCIES = (
    *("cutlass_2_10", "cutlass_3_5", "cutlass_3_6", "cutlass_3_8", "cutlass_3_9", "cutlass_4_0"),
    *("metal-cpp", "sycl_tla", "torch"),
)
V2_PYTHON_DEPENDS = ("einops", "nvidia-cutlass-dsl")  # the only ones edition 2 knows


@dataclass(frozen=True)
class Rule(Text):
    """A string the reader refuses unless it is one of ``choices`` or matches ``pattern`` whole
    (``re.fullmatch``), with the words of the refusal: ``refusal`` (``{value!r}`` is the value) and
    ``hint``, what to write instead (for ``choices`` left without one: the nearest, or all)."""

    refusal: str = "{value!r} is not allowed"
    hint: str | None = None


@dataclass(frozen=True)
class Field(Key):
    """A required key, with the words of its refusal where it is missing: ``required_in``
    (" in edition 4", where an earlier edition left it optional) and ``missing``, what to write."""

    missing: str | None = None
    required_in: str = ""


@dataclass(frozen=True)
class Edition:
    """What one edition of build.toml holds: the keys of each table."""

    number: int
    document: Section  # the top-level tables, [kernel.*] aside
    units: Mapping[str, Section]  # a [kernel.NAME] table's keys, by its backend

    def unit(self, backend: str) -> Section:
        """Edition 1's units have no backend (a language instead): one declaration for all."""
        return self.units[backend if self.number > 1 else ""]


def _required(name: str, value: Value, description: str, missing: str, when: str = "") -> Field:
    return Field(name, value, description, required=True, missing=missing, required_in=when)


def _shaped(pattern: str, noun: str, hint: str | None = None) -> Rule:
    return Rule(pattern=pattern, refusal=f"{{value!r}} is not {noun}", hint=hint)


def _one_of(choices: tuple[str, ...], noun: str) -> Rule:
    return Rule(choices=choices, refusal=f"unknown {noun} {{value!r}}")


def _items(item: Text, *, nonempty: bool = False, unique: bool = False) -> TextList:
    # build.toml writes every list as an array
    return TextList(item=item, lone=False, nonempty=nonempty, unique=unique)


def _url(key: str) -> Rule:
    hint = f'e.g. {key} = "https://example.org/org/repo"'
    return _shaped(r"^[a-z][a-z0-9+.-]*://[^ \t\n\r\f\v]+$", "a URL", hint)


def _name(characters: str) -> Rule:
    also = " or '_'" if "_" in characters else ""
    noun = f"a kernel name: lower-case letters, digits and '-'{also}, starting with a letter, "
    noun += "ending with a letter or digit"
    return _shaped(f"^[a-z][{characters}a-z0-9]*[a-z0-9]$", noun, 'e.g. name = "flash-attention"')


# Versions: numbers and dots; torch and CUDA bounds of edition 5 at most "major.minor", the kernels
# release of [general] minver at most "major.minor.patch".
_VERSION = "a version"
ANY_VERSION = _shaped(r"^[0-9]+(\.[0-9]+)*$", _VERSION, 'write numbers and dots, e.g. "12.4"')
MAJOR_MINOR = _shaped(r"^[0-9]+(\.[0-9]+)?$", _VERSION, 'write "major.minor", e.g. "2.8"')
UP_TO_PATCH = _shaped(
    r"^[0-9]+(\.[0-9]+){0,2}$", _VERSION, 'write "major.minor.patch" at most, e.g. "0.11.0"'
)
_CAPABILITIES = _items(
    _shaped(r"^[0-9]{1,3}\.[0-9][af]?$", "a CUDA capability", 'e.g. "8.0", "9.0a", "10.0"')
)
_ARCHS = _items(
    _shaped(r"^gfx[0-9a-f]{2,5}(:[a-z]+[+-])*$", "a ROCm architecture", 'e.g. "gfx90a", "gfx942"')
)
_FLAGS = _items(  # one line each, not blank
    _shaped(r"^[^\x00\n]*[^\s\x00][^\x00\n]*$", "a compiler flag", "one flag per string")
)
_PATHS = _items(Text(examples=("torch-ext/torch_binding.cpp",)))  # relative to build.toml
_REPO_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$"
_REVISION = r"^[A-Za-z0-9][A-Za-z0-9._/-]*$"
UNIT_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"

_PYEXT = Key(
    "pyext",
    _items(_shaped(r"^[A-Za-z0-9_]+$", "a file extension", 'write it without the dot: "json"')),
    "the extensions of the package files the wheel ships",
    default="py, pyi",
)
_PYTHON_DEPENDS = Key(
    "python-depends",
    _items(_shaped(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", "a dependency name", 'e.g. "einops"')),
    "Python packages the kernel imports, by kernel-builder's names",
)
_KERNEL_DEPENDENCY = Section(
    (
        _required(
            "repo-id",
            _shaped(_REPO_ID, "a Hub repository id"),
            "the Hub repository of the kernel",
            'e.g. repo-id = "kernels-community/activation"',
        ),
        Key("version", Integer(minimum=0), "its major version"),
        Key("revision", _shaped(_REVISION, "a revision"), "its revision"),
    ),
    conflicts=(("version", "revision"),),  # and one of them is required
)
_KERNEL_DEPENDS = Key("kernel-depends", Sections(_KERNEL_DEPENDENCY), "Hub kernels it loads")
_HUB = Key(
    "hub",
    Section(
        (
            Key(
                "repo-id",
                _shaped(_REPO_ID, "a Hub repository id", 'e.g. repo-id = "my-org/activation"'),
                "the kernel's Hub repository",
            ),
            Key("branch", _shaped(_REVISION, "a branch name", 'e.g. branch = "v1"'), "its branch"),
        )
    ),
    "where the kernel is published",
)


def _bound(edition: int) -> Rule:
    return MAJOR_MINOR if edition == LATEST_EDITION else ANY_VERSION


def _bounds(edition: int, prefix: str = "") -> tuple[Key, Key]:
    """A version range; maxver is inclusive ("2.8" admits every 2.8.x)."""
    rule = _bound(edition)
    return Key(f"{prefix}minver", rule, "the oldest"), Key(f"{prefix}maxver", rule, "the newest")


def _backend_table(edition: int, backend: str) -> Key:
    """[general.<backend>]: what the builds for one backend add."""
    keys: list[Key] = [_PYTHON_DEPENDS]
    if backend == "cuda":
        keys[:0] = _bounds(edition)
        if edition == 4:
            keys.append(Key("capabilities", _CAPABILITIES, "what the units compile for"))
    if backend == "rocm":  # edition 4 only
        keys = [Key("archs", _ARCHS, "what the units compile for")]
    if edition == LATEST_EDITION and backend != "tpu":
        keys.append(_KERNEL_DEPENDS)
    return Key(backend, Section(tuple(keys)), f"what the {backend} builds add")


def _general(e: int) -> Section:
    name = _name("-_" if e < 4 else "-")
    keys: list[Key] = [_required("name", name, "torch-ext/<name>/", 'e.g. name = "activation"')]
    if e == 2:
        keys += [Key("universal", Flag(), "pure Python, for every backend"), *_bounds(e, "cuda-")]
    if e >= 2:
        keys += [_HUB, _PYTHON_DEPENDS]
    if e >= 3:
        known = GENERAL_BACKENDS[e]
        major, hub_license = "the kernel's major version", "a Hub license identifier"
        optional = e == 3  # required from edition 4 on
        keys += [
            Field(
                "version",
                Integer(minimum=0),
                major,
                required=not optional,
                missing=f"e.g. version = 1 ({major})",
                required_in=f" in edition {e}",
            ),
            Field(
                "license",
                Text(examples=("apache-2.0",)),
                hub_license,
                required=not optional,
                missing=f'e.g. license = "apache-2.0" ({hub_license})',
                required_in=f" in edition {e}",
            ),
            Key("upstream", _url("upstream"), "the project the kernel comes from"),
            _required(
                "backends",
                _items(_one_of(known, "backend"), nonempty=True, unique=True),
                "what the kernel is built for",
                f'e.g. backends = ["cuda"]; known: {", ".join(known)}',
            ),
            *(_backend_table(e, backend) for backend in ("cuda", "neuron", "xpu")),
        ]
    if e == 4:
        keys.append(_backend_table(e, "rocm"))
    if e == LATEST_EDITION:
        keys += [
            Key("edition", Integer(minimum=LATEST_EDITION), "the format's edition"),
            Key("source", _url("source"), "the kernel's source repository"),
            Key("minver", UP_TO_PATCH, "the oldest kernels release that loads it"),
            _KERNEL_DEPENDS,
            _backend_table(e, "tpu"),
        ]
    return Section(tuple(keys))


def _torch(e: int) -> Section:
    keys = [
        Key("src", _PATHS, "the bindings: sources and headers built into every variant"),
        Key("include", _PATHS, "their include directories"),
        _PYEXT,
    ]
    if e == 1:
        keys.append(Key("universal", Flag(), "pure Python, for every backend"))
    if e >= 2:
        keys += _bounds(e)
    if e >= 4:
        per_backend = Section(tuple(Key(b, MAJOR_MINOR, "") for b in GENERAL_BACKENDS[e]))
        target = MAJOR_MINOR if e == 4 else AnyOf((MAJOR_MINOR, per_backend))
        keys.append(Key("stable-abi", target, "the torch release whose stable ABI builds target"))
    if e == LATEST_EDITION:
        keys.append(Key("cxx-flags", _FLAGS, "C++ flags of the bindings"))
    return Section(tuple(keys))


def _document(e: int) -> Section:
    general = _required(
        "general", _general(e), "the kernel", 'start the file with [general] and name = "..."'
    )
    keys: list[Key] = [general, Key("torch", _torch(e), "a torch extension")]
    if e >= 3:  # not a torch extension: declared to be refused by name
        keys.append(Key("tvm-ffi", Section(()), "a tvm-ffi kernel"))
    if e >= 4:
        noarch = (
            Key("cuda_capabilities", _CAPABILITIES, "the CUDA capabilities it is for"),
            Key("rocm_archs", _ARCHS, "the ROCm archs it is for"),
        )
        noarch_keys = (_PYEXT, *noarch) if e == LATEST_EDITION else ()
        keys.append(Key("torch-noarch", Section(noarch_keys), "a pure-Python kernel"))
    return Section(tuple(keys))


# A [kernel.NAME] table: edition 1's by its language, later ones tagged by their backend.
BACKEND = _required(
    "backend",
    _one_of(UNIT_BACKENDS, "backend"),
    "what the unit compiles for",
    f"one of: {', '.join(UNIT_BACKENDS)}",
)
UNIT_TAG = Section((BACKEND,))  # what a unit of edition 2 on is read by first
_UNIT_KEYS = (
    _required(
        "src",
        _PATHS,
        "the unit's sources and headers",
        'list the unit\'s sources and headers: src = ["x/x.cu"]',
    ),
    _required(
        "depends",
        _items(_one_of(DEPENDENCIES, "dependency")),
        "what the unit builds against",
        'e.g. depends = ["torch"] (or [] for none)',
    ),
    Key("include", _PATHS, "the unit's include directories"),
)
_V1_UNIT = Section(
    (
        Key(
            "language",
            _one_of(("cuda", "cuda-hipify", "metal"), "language"),
            "cuda-hipify: the CUDA unit is built for ROCm too, as <name>_rocm",
            default="cuda",
        ),
        *_UNIT_KEYS,
        Key("cuda-capabilities", _CAPABILITIES, "what the CUDA unit compiles for"),
        Key("rocm-archs", _ARCHS, "what the ROCm unit compiles for"),
    )
)


def _unit(e: int, backend: str) -> Section:
    extra: tuple[Key, ...] = {
        "cuda": (
            Key("cuda-capabilities", _CAPABILITIES, "what the unit compiles for"),
            Key("cuda-flags", _FLAGS, "nvcc flags"),
            Key("cuda-minver", _bound(e), "the oldest CUDA that builds the unit"),
        ),
        "rocm": (
            Key("rocm-archs", _ARCHS, "what the unit compiles for"),
            Key("hip-flags", _FLAGS, "hipcc flags"),
        ),
        "xpu": (Key("sycl-flags", _FLAGS, "SYCL compiler flags"),),
    }.get(backend, ())
    return Section((BACKEND, *_UNIT_KEYS, Key("cxx-flags", _FLAGS, "C++ flags"), *extra))


EDITION = {
    e: Edition(
        e, _document(e), {"": _V1_UNIT} if e == 1 else {b: _unit(e, b) for b in UNIT_BACKENDS}
    )
    for e in EDITIONS
}


def rule_of(value: Value) -> Rule | None:
    """The rule a string is checked by (each of a list's, an AnyOf's string); None: any string."""
    if isinstance(value, AnyOf):
        return next((rule for option in value.options if (rule := rule_of(option))), None)
    item = value.item if isinstance(value, TextList) else value
    return item if isinstance(item, Rule) else None


def introduced(edition: int) -> frozenset[tuple[str, ...]]:
    """The key paths ``edition`` declares and the one before it does not: what tells an unmarked
    document of that edition."""
    return _paths(EDITION[edition].document) - _paths(EDITION[edition - 1].document)


def _paths(section: Section, above: tuple[str, ...] = ()) -> frozenset[tuple[str, ...]]:
    found = set()
    for key in section.keys:
        found.add((*above, key.name))
        if isinstance(key.value, Section):
            found |= _paths(key.value, (*above, key.name))
    return frozenset(found)


def detect_edition(doc: TomlDocument) -> int:
    """Which format a document is written in, told by the keys each edition introduces, as
    kernel-builder's try-v1-then-v2-then-v3-then-v4 order tells it; errors in the values come
    later, from the declarations of that edition, so that they name the key."""
    top = doc.root()
    general = top.table("general")
    if general.has("edition"):
        edition = general.data["edition"]
        if isinstance(edition, bool) or not isinstance(edition, int):
            general.error(
                "edition",
                f"must be an integer, got {describe(edition)}",
                f"write edition = {LATEST_EDITION}",
            )
        if edition != LATEST_EDITION:
            general.error(
                "edition",
                f"edition {edition} is not one this reader knows",
                f"editions 1-4 are unmarked; the only marked edition is {LATEST_EDITION}",
            )
        return LATEST_EDITION
    if general.has("backends"):
        return 4 if any(_holds(top.data, path) for path in introduced(4)) else 3
    # a later format missing its required backends: say that, not "unknown key"
    if _general_keys(3) & set(general.data):
        return 3
    units = top.data.get(UNITS)
    tagged = isinstance(units, dict) and any(
        isinstance(unit, dict) and BACKEND.name in unit for unit in units.values()
    )
    return 2 if tagged or _general_keys(2) & set(general.data) else 1


def _general_keys(edition: int) -> set[str]:
    return {path[1] for path in introduced(edition) if len(path) == 2 and path[0] == "general"}


def _holds(data: Any, path: tuple[str, ...]) -> bool:
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return False
        data = data[part]
    return True
