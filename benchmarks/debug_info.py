"""Debug info in a torch extension: what Python's own -g costs a build and its wheel.

    python benchmarks/debug_info.py [--runs 3] [--units 2]

A setuptools project of ``--units`` translation units, each including <torch/extension.h> (as
real extensions do) and registering one op, built side by side with this interpreter's torch:

- as ``python -m build`` / cibuildwheel build it: Python's compile flags (sysconfig CFLAGS,
  ``-g`` in CPython's own builds, manylinux's and Debian's alike);
- as the factory builds it by default (engines/compile_flags.py): the same flags, then ``-g0``
  (CPPFLAGS), the way torch's own wheels ship.

Each build is ``setup.py build_ext`` into an empty directory, one job, --runs times; the median
compile time and the size of the library are printed with their ratios, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

UNIT = """#include <torch/extension.h>
at::Tensor scaled_add_{n}(const at::Tensor& a, const at::Tensor& b, double alpha) {{
  TORCH_CHECK(a.sizes() == b.sizes(), "shapes differ");
  return a + b * alpha;
}}
TORCH_LIBRARY_FRAGMENT(bench_debug_info, m) {{ m.def("scaled_add_{n}", &scaled_add_{n}); }}
"""
SETUP = """from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension
setup(name="bench_debug_info", ext_modules=[CppExtension("bench_debug_info._C", {sources!r})],
      cmdclass={{"build_ext": BuildExtension}})
"""


def build(project: Path, extra_env: dict[str, str]) -> tuple[float, int]:
    """(seconds, size of the built library) of one clean build_ext."""
    env = {**os.environ, "MAX_JOBS": "1", **extra_env}
    started = time.perf_counter()
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--build-temp", "tmp", "--build-lib", "lib"],
                   cwd=project, env=env, check=True, capture_output=True)
    seconds = time.perf_counter() - started
    (library,) = (project / "lib" / "bench_debug_info").glob("_C*.so")
    return seconds, library.stat().st_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--units", type=int, default=2, help="translation units (default: %(default)s)")
    args = parser.parse_args()
    import sysconfig

    import torch

    print(f"torch {torch.__version__}, Python {sys.version.split()[0]}, CFLAGS {sysconfig.get_config_var('CFLAGS')!r}")
    ways = {"Python's flags (-g)": {}, "factory default (-g0)": {"CPPFLAGS": "-g0"}}
    results: dict[str, list[tuple[float, int]]] = {way: [] for way in ways}
    with tempfile.TemporaryDirectory(prefix="bench-debug-info-") as scratch:
        for run in range(args.runs):
            for way, extra in ways.items():  # interleaved: a slow moment of the machine hits both
                project = Path(scratch) / f"{run}-{len(results[way])}-{way[:6]}"
                (project / "csrc").mkdir(parents=True)
                sources = []
                for n in range(args.units):
                    (project / "csrc" / f"unit{n}.cpp").write_text(UNIT.format(n=n))
                    sources.append(f"csrc/unit{n}.cpp")
                (project / "setup.py").write_text(SETUP.format(sources=sources))
                results[way].append(build(project, extra))
    print(f"{'build':24} {'compile s':>10} {'library MB':>11}")
    medians = {}
    for way, runs in results.items():
        seconds, size = statistics.median(s for s, _ in runs), statistics.median(b for _, b in runs)
        medians[way] = (seconds, size)
        print(f"{way:24} {seconds:10.1f} {size / 1e6:11.2f}")
    (slow, big), (fast, small) = medians.values()
    print(f"factory default: {slow / fast:.2f}x faster to compile, library {big / small:.0f}x smaller "
          f"(median of {args.runs}, {args.units} units, one job)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
