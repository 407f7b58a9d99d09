"""The build record shipped beside a prebuilt ``_C`` and the pure "can it load here?" decision.

The factory writes ``BuildRecord.to_json()``; ``parse_build_record`` (``BuildRecord.from_json``)
turns JSON back into the typed ``BuildRecord`` (unknown keys ignored, missing or malformed
required keys -> ``RecordError``). ``decide_prebuilt`` compares it with an ``Environment`` through
the shared fit rule (``_fit``) and returns one ``Decision``; it does no I/O, so tests feed it fake
environments.
The check runs BEFORE dlopen: a mismatched library is never mapped, so no "undefined symbol".
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from . import BUILD_RECORD_FILE, RECORD_ABSENT, RECORD_KEYS, RECORD_SCHEMA
from ._decision import Decision
from ._errors import InvalidArch, InvalidVersion, RecordError
from ._fit import FitBuild, FitEnv, check_fit, gpu_part_rank, gpu_part_serves, normalize_machine
from ._versions import BACKENDS, Backend, MajorMinor

if TYPE_CHECKING:
    from ._arch import CudaArch
    from ._env import Environment  # annotations only: the factory imports this module without torch

__all__ = [
    "BUILD_RECORD_FILE",
    "BuildRecord",
    "RecordUnavailable",
    "build_record_from_text",
    "decide_prebuilt",
    "fit_build",
    "fit_env",
    "load_record_json",
    "parse_build_record",
    "partial_record",
    "read_build_record",
    "record_member",
]

# Patterns are compiled on first use (re's cache), not at import: a source-only install never needs them.
_IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
_LIBRARY_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*\.(so|pyd|dylib)$"
_GFX = r"^gfx[0-9a-f]+(:.*)?$"
_GPU_PART = r"^(sm|ptx)[0-9]{2,3}[af]?$"  # a split build's part, as variant ids name it


class BuildRecord(NamedTuple):
    """The factory's description of the prebuilt library it shipped (``_build.json``).

    One type on both sides: the factory constructs it (every field is required, so a field added
    here must be filled there) and writes ``to_json()``; the runtime reads it back with
    ``from_json`` / ``parse_build_record``, which validates every field.

    A NamedTuple (immutable, typed) rather than a dataclass: it is defined inside the measured
    first op call, and a dataclass costs ~1 ms of code generation there.
    """

    name: str
    version: str | None  # the wheel's version, "0.1.0+cu130torch2.13"
    variant: str
    torch: MajorMinor  # a stable-ABI build: the oldest torch it serves
    built_with_torch: str | None  # the exact torch release it was compiled against
    backend: Backend
    toolkit: MajorMinor | None
    cxx11_abi: bool
    python: str  # "abi3" or "3.11"
    arch: str
    arch_list: tuple[str, ...]  # CUDA archs ("9.0a", "12.0+PTX") or ROCm gfx names
    namespace: str
    ops: tuple[str, ...]
    library: str  # a file name inside the package directory
    stable_abi: bool
    source_digest: str | None  # sha256 over the sources it was built from
    # a part of a split CUDA build ([cuda] split_archs): the tags of every part of it ("sm80",
    # "ptx120"), to name the one a GPU this part cannot serve needs; (): not split
    parts: tuple[str, ...] = ()

    @property
    def cuda_archs(self) -> tuple[CudaArch, ...]:
        from ._arch import CudaArch  # only CUDA records need it; keeps CPU loads lean

        return tuple(CudaArch.parse(a) for a in self.arch_list) if self.backend == "cuda" else ()

    def to_json(self) -> dict[str, object]:
        """The ``_build.json`` object: every field (versions as "X.Y", tuples as lists) plus the schema."""
        data: dict[str, object] = {"schema": RECORD_SCHEMA}
        for key, value in self._asdict().items():
            if isinstance(value, MajorMinor):
                data[key] = str(value)
            elif isinstance(value, tuple):
                data[key] = list(value)
            else:
                data[key] = value
        return data

    @classmethod
    def from_json(cls, data: object, source: str = BUILD_RECORD_FILE) -> BuildRecord:
        return parse_build_record(data, source)


class RecordUnavailable(NamedTuple):
    """No usable record: a source-only install, a missing library, or a corrupt/unknown file."""

    reason: str


def _field(data: Mapping[str, object], key: str, source: str) -> Any:
    """``data[key]``, or what a key left out stands for (``RECORD_ABSENT``), where it is of a type
    the schema (``RECORD_KEYS``) gives the key; RecordError naming ``source`` otherwise."""
    if key not in data and key not in RECORD_ABSENT:
        raise RecordError(f"{source}: missing required key {key!r}")
    value, kinds = data.get(key, RECORD_ABSENT.get(key)), RECORD_KEYS[key]
    # bool is an int subclass: do not let true/false pass for a number or the reverse.
    if not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool)):
        wanted = "a string or null" if type(None) in kinds else kinds[0].__name__
        raise RecordError(f"{source}: key {key!r} must be {wanted}, got {value!r}")
    return value


def str_list(value: object, key: str, source: str) -> tuple[str, ...]:
    """A JSON list of strings from a record or spec file, or RecordError naming the file and key."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RecordError(f"{source}: {key}: expected a list of strings, got {value!r}")
    return tuple(value)


def record_member(package: str) -> str:
    """Where a wheel holds the build record of its top-level package ``package``."""
    return f"{package}/{BUILD_RECORD_FILE}"


def load_record_json(raw: str | bytes, source: str) -> dict[str, object]:
    """The JSON object a build record's text holds (bytes: UTF-8), or RecordError naming ``source``.

    The one reader of a record's text: the runtime's (``build_record_from_text``, then the full
    rule ``parse_build_record``) and the factory's, which reads the records of wheels it indexes,
    exports and checks (``partial_record``)."""
    try:
        data = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise RecordError(
            f"{source} is not JSON ({' '.join(str(exc).split()) or type(exc).__name__})"
        ) from None
    if not isinstance(data, dict):
        raise RecordError(f"{source} is not a JSON object")
    return data


# A record the full rule accepts: what a partial record lacks is taken from it.
_STAND_INS: dict[str, object] = {
    "schema": RECORD_SCHEMA,
    "name": "_",
    "variant": "_",
    "torch": "0.0",
    "backend": "cpu",
    "toolkit": "0.0",
    "cxx11_abi": True,
    "python": "abi3",
    "arch": "x86_64",
    "namespace": "_",
    "ops": [],
    "library": "_.so",
}


def partial_record(data: dict[str, object], source: str) -> dict[str, object]:
    """``data``, a record the factory reads from any wheel, a partial one too (it lists wheels
    whatever their records lack), where each field it holds passes the full rule
    (``parse_build_record``: the schema's one home); RecordError naming ``source`` otherwise."""
    parse_build_record({**_STAND_INS, **data}, source)
    return data


def parse_build_record(data: object, source: str = BUILD_RECORD_FILE) -> BuildRecord:
    if not isinstance(data, dict):
        raise RecordError(f"{source}: expected a JSON object, got {type(data).__name__}")
    schema = _field(data, "schema", source)
    if schema != RECORD_SCHEMA:
        raise RecordError(
            f"{source}: record schema {schema} is not the one this runtime reads ({RECORD_SCHEMA})"
        )
    backend = _field(data, "backend", source)
    if backend not in BACKENDS:
        raise RecordError(f"{source}: backend {backend!r} is not one of {', '.join(BACKENDS)}")
    try:
        torch_version = MajorMinor.parse(_field(data, "torch", source))
        toolkit_raw = data.get("toolkit")
        if backend == "cpu":
            toolkit = None
        elif isinstance(toolkit_raw, str):
            toolkit = MajorMinor.parse(toolkit_raw)
        else:
            raise RecordError(
                f"{source}: backend {backend!r} needs a toolkit version, got {toolkit_raw!r}"
            )
    except InvalidVersion as exc:
        raise RecordError(f"{source}: {exc}") from exc
    python = _field(data, "python", source)
    if python != "abi3":
        try:
            MajorMinor.parse(python)
        except InvalidVersion as exc:
            raise RecordError(f"{source}: python must be 'abi3' or 'X.Y', got {python!r}") from exc
    namespace = _field(data, "namespace", source)
    if not re.match(_IDENTIFIER, namespace):
        raise RecordError(f"{source}: namespace {namespace!r} is not an identifier")
    ops = str_list(_field(data, "ops", source), "ops", source)
    bad_ops = [op for op in ops if not re.match(_IDENTIFIER, op)]
    if bad_ops:
        raise RecordError(f"{source}: op names {bad_ops!r} are not identifiers")
    library = _field(data, "library", source)
    if not re.match(_LIBRARY_NAME, library):
        # A path here could make us dlopen any file on the system: only a bare file name is allowed.
        raise RecordError(
            f"{source}: library {library!r} must be a bare file name like '_C.abi3.so'"
        )
    arch_list = str_list(data.get("arch_list", []), "arch_list", source)
    if backend == "cuda":
        from ._arch import CudaArch  # only CUDA records need it; keeps CPU loads lean

        try:
            for arch in arch_list:
                CudaArch.parse(arch)
        except InvalidArch as exc:
            raise RecordError(f"{source}: {exc}") from exc
    elif backend == "rocm":
        bad = [a for a in arch_list if not re.match(_GFX, a)]
        if bad:
            raise RecordError(f"{source}: ROCm arch_list entries {bad!r} are not gfx names")
    parts = str_list(data.get("parts", []), "parts", source)
    bad_parts = [part for part in parts if not re.match(_GPU_PART, part)]
    if bad_parts:
        raise RecordError(
            f"{source}: parts {bad_parts!r} are not GPU architecture parts like 'sm90' or 'ptx120'"
        )
    return BuildRecord(
        name=_field(data, "name", source),
        version=_field(data, "version", source),
        variant=_field(data, "variant", source),
        torch=torch_version,
        built_with_torch=_field(data, "built_with_torch", source),
        backend=backend,
        toolkit=toolkit,
        cxx11_abi=_field(data, "cxx11_abi", source),
        python=python,
        arch=normalize_machine(_field(data, "arch", source)),
        namespace=namespace,
        ops=ops,
        library=library,
        arch_list=arch_list,
        stable_abi=_field(data, "stable_abi", source),
        source_digest=_field(data, "source_digest", source),
        parts=parts,
    )


def read_build_record(package_dir: Path) -> BuildRecord | RecordUnavailable:
    """Read ``<package_dir>/_build.json``; every problem becomes a ``RecordUnavailable`` reason."""
    path = package_dir / BUILD_RECORD_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return RecordUnavailable(f"no build record ({BUILD_RECORD_FILE}): a source-only install")
    except OSError as exc:
        return RecordUnavailable(f"cannot read build record {path}: {exc}")
    return build_record_from_text(package_dir, text)


def build_record_from_text(package_dir: Path, text: str) -> BuildRecord | RecordUnavailable:
    """``read_build_record`` for the text already read from ``<package_dir>/_build.json``."""
    path = package_dir / BUILD_RECORD_FILE
    try:
        data = load_record_json(text, str(path))
    except RecordError as exc:
        return RecordUnavailable(f"build record is corrupt: {exc}")
    try:
        record = parse_build_record(data, source=str(path))
    except RecordError as exc:
        return RecordUnavailable(f"build record unusable: {exc}")
    if not (package_dir / record.library).is_file():
        return RecordUnavailable(
            f"build record names {record.library}, which is missing from {package_dir}"
        )
    return record


def _gpu_problems(env: Environment, record: BuildRecord, notes: list[str]) -> list[str]:
    if record.backend == "cuda" and env.backend == "cuda":
        archs = record.cuda_archs
        if not archs:
            notes.append("the record lists no CUDA archs, GPU support not checked")
            return []
        problems = []
        for cap in env.gpu_capabilities:
            if not any(a.serves(cap) for a in archs):
                problems.append(
                    f"arch_list {';'.join(record.arch_list)} has no kernel for the GPU's "
                    f"compute capability {cap} (sm_{cap.major}{cap.minor}){_other_part(record, cap)}"
                )
        return problems
    if record.backend == "rocm" and env.backend == "rocm" and record.arch_list:
        names = {a.split(":", 1)[0] for a in record.arch_list}
        return [
            f"arch_list {';'.join(record.arch_list)} has no code for the GPU's {gfx}"
            for gfx in env.gpu_archs
            if gfx not in names
        ]
    return []


def _other_part(record: BuildRecord, cap: MajorMinor) -> str:
    """For a part of a split build: the variant of the same build to install for this GPU, and why."""
    own = record.variant.split("-")
    at = next((i for i, piece in enumerate(own) if re.match(_GPU_PART, piece)), None)
    if not record.parts or at is None:
        return ""
    serving = [(part, gpu_part_serves(part, (cap.major, cap.minor))) for part in record.parts]
    fitting = [(part, why) for part, why in serving if why]
    if not fitting:
        return (
            f"; no part of this split build ({', '.join(record.parts)}) serves it: build one with {cap} in "
            "[cuda] arch_list"
        )
    part, why = max(fitting, key=lambda item: gpu_part_rank(item[0]))
    return f"; install {'-'.join([*own[:at], part, *own[at + 1 :]])}, the part of this build for it ({why})"


def fit_build(record: BuildRecord) -> FitBuild:
    """The record as the shared fit rule (``_fit``) reads a build."""
    return FitBuild(
        str(record.torch),
        record.backend,
        None if record.toolkit is None else str(record.toolkit),
        record.cxx11_abi,
        record.python,
        record.arch,
        record.stable_abi,
        record.variant,
    )


def fit_env(env: Environment) -> FitEnv:
    """The environment as the shared fit rule (``_fit``) reads one."""
    toolkit = env.toolkit
    return FitEnv(
        env.torch_version,
        env.backend,
        None if toolkit is None else str(toolkit),
        env.cxx11_abi,
        str(env.python),
        env.machine,
    )


def decide_prebuilt(env: Environment, record: BuildRecord | RecordUnavailable) -> Decision:
    """Pure: can the prebuilt library described by ``record`` be loaded into ``env``?

    The variant-level rule is ``_fit.check_fit`` (the one ``wheelfactory which`` and the index's
    select.py apply); the runtime adds what only it can see: the GPUs present vs ``arch_list``.
    """
    if isinstance(record, RecordUnavailable):
        return Decision("prebuilt", False, record.reason)
    fit = check_fit(fit_build(record), fit_env(env))
    notes = list(fit.notes)
    problems = list(fit.problems) or _gpu_problems(env, record, notes)
    if problems:
        return Decision("prebuilt", False, "; ".join(problems))
    detail = f" ({'; '.join(notes)})" if notes else ""
    return Decision("prebuilt", True, f"{record.variant} matches this environment{detail}")
