"""Pure toolkit checks for the JIT path: nvcc vs torch's CUDA, which archs to target, compilers.

Everything here takes plain values (versions, paths found or not) and returns a verdict, so the
tables are unit-tested; ``_probe`` gathers the values (running tools, reading PATH).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from ._arch import CudaArch
from ._errors import InvalidArch, InvalidVersion, RecordError
from ._fit import same_cuda_group
from ._versions import MajorMinor

__all__ = [
    "TOOLKITS_FILE",
    "ArchSelection",
    "CudaFacts",
    "ToolCheck",
    "ToolkitFacts",
    "check_build_tools",
    "check_nvcc_version",
    "gencode_flags",
    "parse_arch_list",
    "parse_nvcc_version",
    "read_toolkit_facts",
    "select_cuda_archs",
]


class ToolCheck(NamedTuple):
    """A verdict on one tool, with how to fix a failure."""

    ok: bool
    reason: str
    fix: str = ""


# The toolkit facts come from the factory's compatibility table (factory/wheelfactory/data/compat.toml), written
# at staging as _runtime/_toolkits.json: this module keeps no table of its own.
TOOLKITS_FILE = "_toolkits.json"
TOOLKITS_SCHEMA = 1


class CudaFacts(NamedTuple):
    """One CUDA release in the compatibility table."""

    version: MajorMinor
    arch_list: str  # TORCH_CUDA_ARCH_LIST of PyTorch's own wheels for this CUDA
    min_arch: MajorMinor  # the oldest / newest compute capability this nvcc compiles for
    max_arch: MajorMinor


class ToolkitFacts(NamedTuple):
    """The toolkit facts of the factory's compatibility table that the runtime needs, for every
    toolkit the table knows (a JIT build may meet a torch other than the one the wheel was built
    for). ``shipped`` False: no table came with this runtime, ``source`` says why."""

    cuda: tuple[CudaFacts, ...]
    # CUDA minors that build for each other ("12.4", "12.6")
    cuda_groups: tuple[tuple[str, ...], ...]
    # ROCm release -> gfx targets of its wheels
    rocm: tuple[tuple[MajorMinor, tuple[str, ...]], ...]
    source: str
    shipped: bool = True

    def cuda_facts(self, version: MajorMinor) -> CudaFacts | None:
        """The entry for ``version``; else the nearest older, else the nearest newer of its major."""
        same_major = sorted(
            (c for c in self.cuda if c.version.major == version.major), key=lambda c: c.version
        )
        older = [c for c in same_major if c.version <= version]
        newer = [c for c in same_major if c.version > version]
        return older[-1] if older else newer[0] if newer else None

    def to_json(self) -> dict[str, object]:
        """``_toolkits.json`` (what the factory writes at staging)."""
        return {
            "schema": TOOLKITS_SCHEMA,
            "source": self.source,
            "cuda": {
                str(c.version): {
                    "arch_list": c.arch_list,
                    "min_arch": str(c.min_arch),
                    "max_arch": str(c.max_arch),
                }
                for c in self.cuda
            },
            "cuda_groups": [list(group) for group in self.cuda_groups],
            "rocm": {str(version): list(gfx) for version, gfx in self.rocm},
        }

    @classmethod
    def from_json(cls, data: object, source: str = TOOLKITS_FILE) -> ToolkitFacts:
        """Validate ``_toolkits.json``; RecordError naming the file and the key."""

        def table(value: object, key: str) -> Mapping[str, object]:
            if not isinstance(value, dict):
                raise RecordError(f"{source}: {key!r} must be an object, got {value!r}")
            return value

        def strings(value: object, key: str) -> tuple[str, ...]:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise RecordError(f"{source}: {key!r} must be a list of strings, got {value!r}")
            return tuple(value)

        def version(value: object, key: str) -> MajorMinor:
            try:
                return MajorMinor.parse(value)  # type: ignore[arg-type]
            except InvalidVersion as exc:
                raise RecordError(f"{source}: {key!r}: {exc}") from exc

        root = table(data, "the file")
        if root.get("schema") != TOOLKITS_SCHEMA:
            raise RecordError(f"{source}: schema {root.get('schema')!r} is not {TOOLKITS_SCHEMA}")
        cuda = []
        for name, entry in table(root.get("cuda", {}), "cuda").items():
            facts = table(entry, f"cuda.{name}")
            arch_list = facts.get("arch_list")
            if not isinstance(arch_list, str):
                raise RecordError(
                    f"{source}: 'cuda.{name}.arch_list' must be a string, got {arch_list!r}"
                )
            try:
                parse_arch_list(arch_list)
            except InvalidArch as exc:
                raise RecordError(f"{source}: 'cuda.{name}.arch_list': {exc}") from exc
            cuda.append(
                CudaFacts(
                    version(name, f"cuda.{name}"),
                    arch_list,
                    version(facts.get("min_arch"), f"cuda.{name}.min_arch"),
                    version(facts.get("max_arch"), f"cuda.{name}.max_arch"),
                )
            )
        groups = root.get("cuda_groups", [])
        if not isinstance(groups, list):
            raise RecordError(f"{source}: 'cuda_groups' must be a list, got {groups!r}")
        cuda_groups = tuple(strings(g, "cuda_groups") for g in groups)
        for group in cuda_groups:
            for member in group:
                version(member, "cuda_groups")
        rocm = tuple(
            (version(name, f"rocm.{name}"), strings(gfx, f"rocm.{name}"))
            for name, gfx in table(root.get("rocm", {}), "rocm").items()
        )
        described = root.get("source", "")
        return cls(
            tuple(cuda), cuda_groups, rocm, f"{source} ({described})" if described else source
        )


def read_toolkit_facts(directory: Path | None = None) -> ToolkitFacts:
    """``<directory>/_toolkits.json`` (default: beside this module, where staging writes it).

    Absent (a runtime used from a source checkout) or unusable: facts with ``shipped`` False and
    the reason in ``source``. The checks then trust only an exact nvcc/torch CUDA match and have
    no default arch list (TORCH_CUDA_ARCH_LIST or a visible GPU must name the archs): there is
    deliberately no second, hand-kept table to fall back on.
    """
    path = (directory if directory is not None else Path(__file__).parent) / TOOLKITS_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ToolkitFacts(
            (), (), (), f"no toolkit table ({TOOLKITS_FILE}) is shipped with this runtime", False
        )
    except OSError as exc:
        return ToolkitFacts((), (), (), f"the toolkit table {path} cannot be read ({exc})", False)
    try:
        return ToolkitFacts.from_json(json.loads(text), str(path))
    except (json.JSONDecodeError, RecordError) as exc:
        return ToolkitFacts((), (), (), f"the toolkit table is unusable ({exc})", False)


_NVCC_RELEASE = re.compile(r"release (\d+)\.(\d+)")


def parse_nvcc_version(text: str) -> MajorMinor:
    """``nvcc --version`` output -> its release (``Cuda compilation tools, release 13.0, V13.0.88``)."""
    match = _NVCC_RELEASE.search(text)
    if match is None:
        raise InvalidVersion(f"no 'release X.Y' in nvcc output: {text.strip()[-200:]!r}")
    return MajorMinor(int(match.group(1)), int(match.group(2)))


def check_nvcc_version(nvcc: MajorMinor, torch_cuda: MajorMinor, facts: ToolkitFacts) -> ToolCheck:
    """Can this nvcc build extensions for a torch built with ``torch_cuda``?

    The same major.minor always can; another minor of the same major only when the shipped
    toolkit table (``facts``) puts both in one minor-version group. Without a table (a runtime
    used from a source checkout) only an exact match is trusted.
    """
    if nvcc == torch_cuda:
        return ToolCheck(True, f"nvcc {nvcc} matches torch's CUDA {torch_cuda}")
    fix = (
        f"install CUDA {torch_cuda.major}.x matching torch (or point CUDA_HOME at one), "
        f"or install the torch build for CUDA {nvcc}"
    )
    if nvcc.major != torch_cuda.major:
        return ToolCheck(
            False,
            f"nvcc {nvcc} cannot build for torch's CUDA {torch_cuda}: major versions differ",
            fix,
        )
    if not facts.shipped:
        return ToolCheck(
            False,
            f"nvcc {nvcc} cannot build for torch's CUDA {torch_cuda}: minor versions differ and "
            f"{facts.source}, so only an exact match is trusted",
            fix,
        )
    if same_cuda_group(facts.cuda_groups, str(nvcc), str(torch_cuda)):
        return ToolCheck(
            True,
            f"nvcc {nvcc} is compatible with torch's CUDA {torch_cuda} (same minor-version group)",
        )
    return ToolCheck(
        False,
        f"nvcc {nvcc} cannot build for torch's CUDA {torch_cuda}: "
        "minor versions are not in one compatibility group",
        fix,
    )


def check_build_tools(cxx_name: str, cxx_path: str | None, ninja_path: str | None) -> ToolCheck:
    """A JIT build needs a C++ compiler and ninja (torch.utils.cpp_extension drives ninja)."""
    missing = []
    fixes = []
    if cxx_path is None:
        missing.append(f"no C++ compiler ({cxx_name!r} is not on PATH; set CXX to choose one)")
        fixes.append("install a C++ compiler (e.g. `apt install g++` or `conda install gxx`)")
    if ninja_path is None:
        missing.append("ninja is not on PATH")
        fixes.append("`pip install ninja`")
    if missing:
        return ToolCheck(
            False,
            "; ".join(missing),
            " and ".join(fixes) + " so the shipped sources can be compiled",
        )
    return ToolCheck(True, f"{cxx_name} at {cxx_path}, ninja at {ninja_path}")


_NAMED_ARCHS = {
    "Volta": "7.0",
    "Turing": "7.5",
    "Ampere": "8.0;8.6",
    "Ada": "8.9",
    "Hopper": "9.0",
    "Blackwell": "10.0;12.0",
}


def parse_arch_list(text: str) -> tuple[CudaArch, ...]:
    """``TORCH_CUDA_ARCH_LIST`` syntax: ``;`` or space separated, a few names (Ampere, Hopper)."""
    entries: list[CudaArch] = []
    for token in re.split(r"[;\s]+", text.strip()):
        if not token:
            continue
        base, plus, ptx = token.partition("+")
        if base in _NAMED_ARCHS:
            expanded = [CudaArch.parse(a) for a in _NAMED_ARCHS[base].split(";")]
            if plus:
                expanded[-1] = CudaArch.parse(f"{expanded[-1]}+{ptx}")
            entries += expanded
        else:
            entries.append(CudaArch.parse(token))
    if not entries:
        raise InvalidArch(f"empty CUDA arch list: {text!r}")
    return tuple(sorted(set(entries)))


class ArchSelection(NamedTuple):
    """The CUDA archs a JIT build targets and where that list came from."""

    archs: tuple[CudaArch, ...]
    source: str  # where the list came from, for messages and the report

    def __str__(self) -> str:
        return f"{';'.join(str(a) for a in self.archs)} (from {self.source})"


def select_cuda_archs(
    *,
    arch_list_env: str | None,
    gpu_capabilities: Sequence[MajorMinor],
    record_archs: Sequence[str],
    torch_cuda: MajorMinor,
    facts: ToolkitFacts,
) -> ArchSelection:
    """TORCH_CUDA_ARCH_LIST if set; else the GPUs present; else the record's list; else the
    default list the toolkit table (``facts``) gives for ``torch_cuda`` (InvalidArch if none).
    Archs older than that toolkit can compile are dropped, unless TORCH_CUDA_ARCH_LIST named them."""
    toolkit = facts.cuda_facts(torch_cuda)
    if arch_list_env and arch_list_env.strip().lower() != "native":
        selection = ArchSelection(parse_arch_list(arch_list_env), "TORCH_CUDA_ARCH_LIST")
    elif gpu_capabilities:
        caps = sorted(set(gpu_capabilities))
        selection = ArchSelection(
            tuple(CudaArch(c.major, c.minor) for c in caps), "the GPUs present"
        )
    elif record_archs:
        selection = ArchSelection(
            tuple(sorted({CudaArch.parse(a) for a in record_archs})), "the build record"
        )
    elif toolkit is not None:
        selection = ArchSelection(
            parse_arch_list(toolkit.arch_list), f"PyTorch's defaults for CUDA {torch_cuda}"
        )
    else:
        why = (
            facts.source
            if not facts.shipped
            else f"the shipped toolkit table ({facts.source}) has no CUDA {torch_cuda.major}.x"
        )
        raise InvalidArch(
            f"no default CUDA arch list for CUDA {torch_cuda}: {why}; set TORCH_CUDA_ARCH_LIST"
        )
    oldest = None if toolkit is None else toolkit.min_arch
    if oldest is not None and selection.source != "TORCH_CUDA_ARCH_LIST":
        kept = tuple(a for a in selection.archs if a.capability >= oldest)
        if kept and kept != selection.archs:
            selection = ArchSelection(
                kept, f"{selection.source}, without archs CUDA {torch_cuda.major} dropped"
            )
    return selection


def gencode_flags(archs: Sequence[CudaArch]) -> list[str]:
    return sorted({flag for arch in archs for flag in arch.gencode_flags()})
