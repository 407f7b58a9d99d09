"""``wheelfactory new NAME``: a factory-native kernel library to start from.

``plan_scaffold`` is pure: NAME in, ``{relative path: text}`` out (kernel.toml, one op with CPU and
CUDA sources, the Python package with its reference op and sample inputs, tests run against the
built wheels, a matrix.toml and a README). ``write_scaffold`` lays the files out in a hidden
directory beside the target and moves them into place when complete, so a run that fails or is
interrupted leaves nothing that looks like a finished project, and it never writes into a
directory that holds files.

The templates below are the files, with ``@token@`` placeholders filled in from NAME.
"""

from __future__ import annotations

import errno
import keyword
import os
import re
import secrets
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from wheelfactory.errors import UsageError, WriteFailed

# kernel.toml's own [kernel].name rule
from wheelfactory.project.kernel_toml import _NAME as KERNEL_NAME

OP = "scaled_add"  # the one example op: generic, so an author renames nothing but their own code
# A distribution name starts and ends with a letter or digit (PEP 508); kernel.toml allows more.
_DISTRIBUTION = re.compile(r"^[a-z0-9](?:[a-z0-9_]*[a-z0-9])?$", re.ASCII)
# Names the package would shadow when installed, or that the runtime and tests import beside it.
_TAKEN = frozenset({"torch", "wheelfactory", "pytest", "numpy", "setuptools", "tests"})
_TOKEN = re.compile(r"@([a-z_]+)@")


class InvalidName(UsageError):
    """NAME cannot name a kernel library (exit 2)."""


@dataclass(frozen=True)
class Scaffold:
    """What ``wheelfactory new NAME`` writes: relative POSIX paths to file texts."""

    name: str
    files: Mapping[str, str]


def check_name(name: str) -> str:
    """NAME, or InvalidName saying which rule it breaks and how to pick another."""
    hint = "pick another, e.g. `wheelfactory new my_kernels`"
    if not KERNEL_NAME.fullmatch(name):
        problem = (
            "is not a lower-case Python identifier (a-z, 0-9 and _, not starting with a digit)"
        )
    elif not _DISTRIBUTION.fullmatch(name):
        problem = (
            "must start and end with a letter or digit (it is also the wheel's distribution name)"
        )
    elif keyword.iskeyword(name):
        problem = "is a Python keyword"
    elif name in sys.stdlib_module_names or name in _TAKEN:
        problem = "would shadow a module of the same name when installed"
    else:
        return name
    raise InvalidName(f"NAME {name!r} {problem}; {hint}")


def plan_scaffold(name: str) -> Scaffold:
    """The files of a new kernel library called ``name`` (pure: nothing is read or written)."""
    check_name(name)
    values = {
        "name": name,
        "prefix": name.upper(),
        "macro": f"{name.upper()}_NAMESPACE",
        "ns": f"{name}_ops",
        "op": OP,
    }
    files = {path.replace("@name@", name): _fill(text, values) for path, text in _TEMPLATES.items()}
    return Scaffold(name, files)


def write_scaffold(scaffold: Scaffold, target: Path) -> Path:
    """Write ``scaffold`` as the directory ``target`` (made, with its parents, if missing; an
    existing one must be empty). All files go into a hidden directory beside it first and move into
    place only when complete; on any failure, Ctrl-C included, what was written is removed and
    nothing of the author's is touched. Returns ``target``."""
    target = Path(os.path.abspath(target))
    _check_target(target)
    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        temp = _make_temp_dir(parent, target.name)
    except OSError as exc:
        raise _write_failed(target, exc) from None
    try:
        for relative, text in scaffold.files.items():
            path = temp / PurePosixPath(relative)
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "w", encoding="utf-8", newline="\n") as handle:
                handle.write(text)
        _move_into_place(temp, target)
    except OSError as exc:
        shutil.rmtree(temp, ignore_errors=True)
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
            _check_target(target)  # something of the author's appeared there meanwhile: say so
        raise _write_failed(target, exc) from None
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return target


def _move_into_place(temp: Path, target: Path) -> None:
    """A missing ``target``: one rename of the whole tree. An existing empty one is kept (a shell
    may be in it, the author may have set its mode): each top-level entry moves in, kernel.toml
    last, so an interrupted move never looks like a project; on failure the moved ones are taken
    back out. Neither way replaces a file: rename(2) refuses a directory that has files, and files
    are hard-linked, which refuses an existing name."""
    if not os.path.lexists(target):
        os.rename(temp, target)
        return
    # recorded before each move, so an interrupt cannot lose one
    started: list[tuple[Path, Path]] = []
    try:
        for entry in sorted(temp.iterdir(), key=lambda p: (p.name == "kernel.toml", p.name)):
            destination = target / entry.name
            started.append((entry, destination))
            if entry.is_dir():
                if os.path.lexists(destination):
                    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(destination))
                os.rename(entry, destination)
            else:
                os.link(entry, destination)
                entry.unlink()
    except BaseException:
        for entry, destination in reversed(started):
            _take_back(entry, destination)
        raise
    temp.rmdir()


def _take_back(entry: Path, destination: Path) -> None:
    """Undo one move of ``_move_into_place``, whichever step it reached; never touches a name that
    is not the scaffold's own."""
    try:
        # moved: back into the temp directory (the caller removes it)
        if not os.path.lexists(entry):
            os.rename(destination, entry)
        elif (
            entry.is_file()
            and os.path.lexists(destination)
            and os.path.samefile(entry, destination)
        ):
            destination.unlink()  # linked, not yet unlinked from the temp directory
    except OSError:
        pass


def _check_target(target: Path) -> None:
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        kind = "a symlink" if target.is_symlink() else "a file"
        raise UsageError(
            f"{target} exists and is {kind}, not a directory; give --path a new or empty directory"
        )
    try:
        has_files = target.is_dir() and any(target.iterdir())
    except OSError as exc:  # a directory we may not list
        raise _write_failed(target, exc) from None
    if has_files:
        raise UsageError(
            f"{target} is not empty: wheelfactory new never writes over files; "
            "give --path a new or empty directory"
        )


def _make_temp_dir(parent: Path, name: str) -> Path:
    """A new hidden directory in ``parent`` (made with the umask's mode, as the target would be)."""
    while True:
        temp = parent / f".{name}.wheelfactory-new-{secrets.token_hex(4)}"
        try:
            temp.mkdir()
        except FileExistsError:
            continue
        return temp


def _write_failed(target: Path, exc: OSError) -> WriteFailed:
    reason = exc.strerror or str(exc)
    return WriteFailed(
        f"cannot write {target}: {reason}; nothing was written there: "
        f"make {target.parent} writable, free some space or give another --path"
    )


def _fill(text: str, values: Mapping[str, str]) -> str:
    return _TOKEN.sub(lambda match: values[match.group(1)], text)


# ---------------------------------------------------------------------------------------------
# The templates. Tokens: @name@ (the package), @prefix@ (its environment variable prefix),
# @macro@ (the namespace macro), @ns@ (the C++ namespace), @op@ (the example op).
# ---------------------------------------------------------------------------------------------

_KERNEL_TOML = """\
# The kernel's declaration: what wheelfactory reads to package, build, verify, test and JIT it.
# Paths are relative to this file. Every key is described in wheelfactory's docs,
# docs/reference/kernel-toml.md.

[kernel]
name = "@name@"
version = "0.1.0"
description = "PyTorch ops in C++ and CUDA"
# The hand-written Python package: the public API, the reference ops, the sample inputs.
python_package = "python/@name@"
# The macro the sources use as the TORCH_LIBRARY namespace. wheelfactory and the runtime define
# it per build (_@name@_<backend>_<id>), so two builds of this library load side by side.
namespace_macro = "@macro@"
# The one list of op names: the build record carries it to the runtime.
ops = ["@op@"]
# "module:function" in the Python package: small CPU inputs each built wheel's ops are run on,
# and compared with the reference ops.
sample_inputs = "_samples:sample_inputs"

[sources]
include_dirs = ["csrc"]
# A CUDA build compiles the cpu sources too, so CPU tensors keep working there.
cpu = ["csrc/registration.cpp", "csrc/cpu/@op@.cpp"]
cuda = ["csrc/cuda/@op@.cu"]

[flags]
# No -std: torch's build adds the C++ standard its own headers need.
cxx = ["-O3"]
nvcc = ["-O3", "--expt-relaxed-constexpr"]  # torch's c10 headers call constexpr host functions in device code

[test]
# Run against every built wheel, in a clean container with only torch, the wheel and `requires`
# installed; {project} is the directory there that holds a copy of `sources`.
command = "python -m pytest -q -p no:cacheprovider {project}/tests"
requires = ["pytest"]
sources = ["tests"]
"""

_MATRIX_TOML = """\
# What to build: `wheelfactory plan` lists the variants (--explain: and what was left out, why).
# Every key is described in wheelfactory's docs, page docs/reference/matrix.md.

[project]
path = "."                         # kernel.toml is beside this file

[matrix]
torch = ["2.6", "2.13"]            # releases; [">=2.6"] is every release the table knows from 2.6 on
backends = ["cpu", "cuda"]         # "cuda": the CUDA builds of each torch release ([cuda] toolkits)
cxx11_abi = "both"                 # every C++ ABI each torch build ships (2.6: both; 2.7+: cxx11)
python = ["abi3"]                  # one cp39-abi3 wheel per variant, for every CPython >= 3.9
arch = ["x86_64"]

[cuda]
toolkits = "default"               # the CUDA build PyPI serves for each release; "all" for every one

[build]
engine = "docker"                  # every variant in its own container; --engine host builds the
                                   # one variant of the torch installed here
# Engines that reach no container registry: make the base image here from Debian packages (from
# the host's apt mirror), and take torch from "pypi", the index pip is configured with, which
# serves one build per release (`wheelfactory plan --format json` says which: torch_on_pypi).
# With a registry and PyTorch's indexes, delete these two lines.
debian_base = "bookworm"
torch_index = "pypi"
"""

_HEADER = """\
// Shared declarations of the @name@ kernels: the namespace macros, the argument checks every
// backend runs and the CPU entry points registered in registration.cpp.
#pragma once

#ifndef @macro@
// wheelfactory and the @name@ runtime define it per build, e.g. -D@macro@=_@name@_cpu_1a2b3c4d.
#error "@macro@ is not defined: compile with -D@macro@=<op namespace>"
#endif

#include <ATen/core/Tensor.h>

// TORCH_LIBRARY and TORCH_LIBRARY_IMPL paste their namespace argument into symbol names as a token,
// which would paste the macro's name, not its value. One more macro level expands it first.
#define @prefix@_LIBRARY_EXPAND_(ns, m) TORCH_LIBRARY(ns, m)
#define @prefix@_LIBRARY_IMPL_EXPAND_(ns, k, m) TORCH_LIBRARY_IMPL(ns, k, m)
#define @prefix@_LIBRARY(m) @prefix@_LIBRARY_EXPAND_(@macro@, m)
#define @prefix@_LIBRARY_IMPL(k, m) @prefix@_LIBRARY_IMPL_EXPAND_(@macro@, k, m)

namespace @ns@ {

// Throws c10::Error (RuntimeError in Python) naming the op and the offending argument.
void check_@op@(const char* op, const at::Tensor& out, const at::Tensor& input, const at::Tensor& other);

// out = input + alpha * other, elementwise.
void @op@_cpu(at::Tensor& out, const at::Tensor& input, const at::Tensor& other, double alpha);

}  // namespace @ns@
"""

_REGISTRATION = """\
// The op schemas, the argument checks every backend shares, and the CPU registrations.
// The CUDA kernels register themselves in csrc/cuda/*.cu.
#include "@name@.h"

#include <torch/library.h>

namespace @ns@ {

void check_@op@(const char* op, const at::Tensor& out, const at::Tensor& input, const at::Tensor& other) {
  TORCH_CHECK(
      input.device() == other.device() && input.device() == out.device(), op,
      ": out, input and other must be on one device, got ", out.device(), ", ", input.device(), " and ",
      other.device());
  const at::ScalarType dtype = input.scalar_type();
  TORCH_CHECK(
      dtype == at::ScalarType::Float || dtype == at::ScalarType::Double || dtype == at::ScalarType::Half ||
          dtype == at::ScalarType::BFloat16,
      op, ": unsupported dtype ", dtype, "; expected float32, float64, float16 or bfloat16");
  TORCH_CHECK(
      other.scalar_type() == dtype && out.scalar_type() == dtype, op,
      ": out, input and other must have the same dtype, got ", out.scalar_type(), ", ", dtype, " and ",
      other.scalar_type());
  TORCH_CHECK(
      other.sizes() == input.sizes() && out.sizes() == input.sizes(), op,
      ": out, input and other must have the same shape, got ", out.sizes(), ", ", input.sizes(), " and ",
      other.sizes());
  TORCH_CHECK(out.is_contiguous(), op, ": out must be contiguous");
}

}  // namespace @ns@

// The schema of every op, once. "Tensor(a!) out": the op writes to out (torch.compile and the
// dispatcher rely on the annotation). Each op name here is also in kernel.toml's [kernel] ops.
@prefix@_LIBRARY(m) {
  m.def("@op@(Tensor(a!) out, Tensor input, Tensor other, float alpha) -> ()");
}

@prefix@_LIBRARY_IMPL(CPU, m) {
  m.impl("@op@", &@ns@::@op@_cpu);
}
"""

_CPU = """\
// CPU @op@: out = input + alpha * other, computed in float32 for float16 and bfloat16 (the
// reference op's numerics), in parallel over chunks of elements.
#include "@name@.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

namespace @ns@ {

void @op@_cpu(at::Tensor& out, const at::Tensor& input, const at::Tensor& other, double alpha) {
  check_@op@("@name@::@op@", out, input, other);
  const at::Tensor a = input.contiguous();
  const at::Tensor b = other.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::ScalarType::Half, at::ScalarType::BFloat16, out.scalar_type(), "@op@_cpu", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const scalar_t* x = a.const_data_ptr<scalar_t>();
    const scalar_t* y = b.const_data_ptr<scalar_t>();
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    const opmath_t scale = static_cast<opmath_t>(alpha);
    at::parallel_for(0, out.numel(), 32768, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        o[i] = static_cast<scalar_t>(static_cast<opmath_t>(x[i]) + scale * static_cast<opmath_t>(y[i]));
      }
    });
  });
}

}  // namespace @ns@
"""

_CUDA = """\
// CUDA @op@: out = input + alpha * other; a grid-stride loop, math in float32 for float16 and
// bfloat16. Registered here for the CUDA dispatch key; the schema is in registration.cpp.
#include "@name@.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>

namespace @ns@ {
namespace {

template <typename scalar_t>
__global__ void @op@_kernel(
    scalar_t* out, const scalar_t* input, const scalar_t* other, at::opmath_type<scalar_t> alpha, int64_t n) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    out[i] = static_cast<scalar_t>(static_cast<opmath_t>(input[i]) + alpha * static_cast<opmath_t>(other[i]));
  }
}

void @op@_cuda(at::Tensor& out, const at::Tensor& input, const at::Tensor& other, double alpha) {
  check_@op@("@name@::@op@", out, input, other);
  const int64_t n = out.numel();
  if (n == 0) {
    return;
  }
  const c10::cuda::CUDAGuard device_guard(out.device());
  const at::Tensor a = input.contiguous();
  const at::Tensor b = other.contiguous();
  constexpr int threads = 256;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((n + threads - 1) / threads, 65535));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::ScalarType::Half, at::ScalarType::BFloat16, out.scalar_type(), "@op@_cuda", [&] {
    @op@_kernel<scalar_t><<<blocks, threads, 0, stream>>>(
        out.mutable_data_ptr<scalar_t>(), a.const_data_ptr<scalar_t>(), b.const_data_ptr<scalar_t>(),
        static_cast<at::opmath_type<scalar_t>>(alpha), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace
}  // namespace @ns@

@prefix@_LIBRARY_IMPL(CUDA, m) {
  m.impl("@op@", &@ns@::@op@_cuda);
}
"""

_INIT = '''\
"""@name@: PyTorch ops in C++ and CUDA.

The ops run the prebuilt library when it matches the installed torch, else a JIT build of the
shipped sources, else the reference PyTorch ops (with one warning); ``backend_info()`` says which
and why, ``python -m @name@ report`` prints the details. ``@prefix@_LOAD=auto|prebuilt|jit|reference``
and ``@prefix@_CACHE_DIR`` control the choice and the JIT cache. Nothing is loaded until the
first op call.
"""

from __future__ import annotations

import os

import torch

# Not in the source tree: wheelfactory vendors its runtime into the package as _runtime when it
# builds a wheel. So this package is used (and tested) installed from a wheel, never from here.
from ._runtime import KernelPackage

__all__ = ["@op@", "backend_info"]

# The op names are kernel.toml's [kernel] ops, which the build record (_build.json) carries.
_package = KernelPackage("@name@", os.path.dirname(os.path.abspath(__file__)), module=__name__)


def @op@(
    input: torch.Tensor, other: torch.Tensor, alpha: float = 1.0, out: torch.Tensor | None = None
) -> torch.Tensor:
    """input + alpha * other, elementwise (same shape, dtype and device); written to ``out`` when given."""
    out = torch.empty(input.shape, dtype=input.dtype, device=input.device) if out is None else out
    _package.op("@op@")(out, input, other, alpha)
    return out


def backend_info() -> dict[str, object]:
    """{"mode": "prebuilt"|"jit"|"reference", "variant", "library", "reason", "ops", "decisions", ...}."""
    return _package.backend_info()
'''

_MAIN = '''\
"""``python -m @name@ report``: versions, the loaded backend and why, toolchain checks."""

import sys

from . import _package
from ._runtime import main

if __name__ == "__main__":
    sys.exit(main(_package))
'''

_REFERENCE = '''\
"""The @name@ ops in plain PyTorch: what the runtime calls when no compiled library can be loaded,
and what the tests and wheelfactory's verification compare the compiled ops with.

Each function has the op's name and the signature of its schema (csrc/registration.cpp):
out-parameters first, returning None, and the same numerics (float16 and bfloat16 computed in
float32, rounded once when written).
"""

from __future__ import annotations

import torch

__all__ = ["@op@"]


def @op@(out: torch.Tensor, input: torch.Tensor, other: torch.Tensor, alpha: float) -> None:
    """out = input + alpha * other."""
    compute = torch.float64 if input.dtype == torch.float64 else torch.float32
    out.copy_(input.to(compute) + alpha * other.to(compute))
'''

_SAMPLES = '''\
"""Sample inputs (kernel.toml: sample_inputs = "_samples:sample_inputs"). wheelfactory runs each
built wheel's ops on clones of these next to the reference ops, and compares every tensor argument
after the call and the return values.
"""

from __future__ import annotations

import torch


def sample_inputs() -> dict[str, list[tuple[object, ...]]]:
    """{op name: [the op's arguments in schema order, ...]}: small CPU tensors, the same on every call."""
    generator = torch.Generator().manual_seed(0)

    def randn(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.randn(*shape, generator=generator).to(dtype)

    @op@ = [(torch.zeros(4, 33, dtype=dtype), randn(4, 33, dtype=dtype), randn(4, 33, dtype=dtype), 0.5)
            for dtype in (torch.float32, torch.float16, torch.bfloat16)]
    @op@.append((torch.zeros(4, 33), randn(33, 4).t(), randn(4, 33), -2.0))  # a strided input
    @op@.append((torch.zeros(0, 8), torch.zeros(0, 8), torch.zeros(0, 8), 1.0))  # no elements
    return {"@op@": @op@}
'''

_TEST = '''\
"""@name@ against its reference ops. wheelfactory runs these against every built wheel (kernel.toml
[test]); they import the installed package, never the source tree (python/ is not on sys.path).
The CUDA cases run only where torch sees a GPU.
"""

from __future__ import annotations

import pytest
import torch

import @name@
from @name@ import _reference

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
DEVICES = ["cpu", pytest.param("cuda", marks=CUDA)]
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def randn(*shape: int, device: str, dtype: torch.dtype, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator).to(device=device, dtype=dtype)


def test_the_ops_are_compiled_code() -> None:
    # In reference mode the tests below would compare the reference ops with themselves.
    info = @name@.backend_info()
    assert info["mode"] in ("prebuilt", "jit"), info["reason"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_@op@_matches_the_reference(device: str, dtype: torch.dtype) -> None:
    x = randn(7, 129, device=device, dtype=dtype, seed=1)
    y = randn(7, 129, device=device, dtype=dtype, seed=2)
    expected = torch.empty_like(x)
    _reference.@op@(expected, x, y, 0.75)
    torch.testing.assert_close(@name@.@op@(x, y, alpha=0.75), expected)


@pytest.mark.parametrize("device", DEVICES)
def test_@op@_writes_out_and_reads_strided_inputs(device: str) -> None:
    x = randn(65, 16, device=device, dtype=torch.float32, seed=3).t()  # not contiguous
    y = randn(16, 65, device=device, dtype=torch.float32, seed=4)
    out = torch.full((16, 65), float("nan"), device=device)
    assert @name@.@op@(x, y, alpha=-1.5, out=out) is out
    torch.testing.assert_close(out, x + -1.5 * y)


def test_@op@_names_the_bad_argument() -> None:
    with pytest.raises(RuntimeError, match="same shape"):
        @name@.@op@(torch.zeros(2, 3), torch.zeros(3, 2))
'''

_README = """\
# @name@

PyTorch ops in C++ (CPU) and CUDA, built by wheelfactory into one wheel per torch release,
backend and C++ ABI. Each wheel loads its prebuilt library when it matches the installed torch,
else compiles the shipped sources once (JIT), else runs the reference ops in `_reference.py`.

## Layout

```
kernel.toml          the declaration wheelfactory reads: name, version, ops, sources, flags,
                     sample inputs, tests
matrix.toml          what to build: torch releases, backends, ABIs (`wheelfactory plan` lists them)
csrc/@name@.h        the namespace macros and shared declarations
csrc/registration.cpp  the op schemas (TORCH_LIBRARY), argument checks, CPU registrations
csrc/cpu/, csrc/cuda/  the kernels; the CUDA ones register for the CUDA dispatch key
python/@name@/       the package: __init__.py (public API), _reference.py (the ops in plain
                     PyTorch), _samples.py (inputs verification runs every op on)
tests/               pytest, run against every built wheel in a clean container
```

`python/@name@/__init__.py` imports `._runtime`, which is not in this tree: wheelfactory vendors
its runtime into the package when it builds a wheel. Use and test the package installed from a
wheel, not from here.

## Build and test

```bash
wheelfactory plan --explain                          # the variants, and what was left out and why
wheelfactory build --only 'torch213-cxx11-cpu-*'     # one variant, in Docker
wheelfactory build --engine host --only 'torch213-cxx11-cpu-*'   # with the torch installed here
```

Wheels land in `dist/<variant>/`; `dist/manifest.json` records each variant's build and its test
run (`[test]` in kernel.toml). To run the tests yourself, install a wheel and run
`pytest tests` from this directory.

## Adding an op

1. kernel.toml: its name in `[kernel] ops`, new source files in `[sources]`.
2. csrc/registration.cpp: its schema (`m.def`) and its CPU kernel (`m.impl` in the
   `@prefix@_LIBRARY_IMPL(CPU, m)` block); csrc/cuda/: its CUDA kernel, registered in a
   `@prefix@_LIBRARY_IMPL(CUDA, m)` block.
3. python/@name@/_reference.py: a function with the op's name and schema signature, in plain
   PyTorch. The runtime falls back to it; verification and the tests compare with it.
4. python/@name@/__init__.py: the public function, calling `_package.op("name")(...)`.
5. python/@name@/_samples.py: a few small CPU inputs for it.
6. tests/: compare it with the reference.

## At run time

`@prefix@_LOAD=auto|prebuilt|jit|reference` forces a mode, `@prefix@_CACHE_DIR` moves the JIT
cache (default `~/.cache/@name@`), `@name@.backend_info()` says which mode loaded and why, and
`python -m @name@ report` prints the details.
"""

_GITIGNORE = """\
dist/
__pycache__/
"""

_TEMPLATES: dict[str, str] = {
    "README.md": _README,
    ".gitignore": _GITIGNORE,
    "kernel.toml": _KERNEL_TOML,
    "matrix.toml": _MATRIX_TOML,
    "csrc/@name@.h": _HEADER,
    "csrc/registration.cpp": _REGISTRATION,
    f"csrc/cpu/{OP}.cpp": _CPU,
    f"csrc/cuda/{OP}.cu": _CUDA,
    "python/@name@/__init__.py": _INIT,
    "python/@name@/__main__.py": _MAIN,
    "python/@name@/_reference.py": _REFERENCE,
    "python/@name@/_samples.py": _SAMPLES,
    f"tests/test_{OP}.py": _TEST,
}
