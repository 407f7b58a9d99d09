"""Where a release engineer's time goes on a CPU matrix: per-variant wall time against the
compiler's share, an edit-rebuild against the cold build, and what -j 2 gains over -j 1.

    python benchmarks/matrix.py [--torch 2.6 2.12 2.13 2.14] [--base-image TAG | --debian-base SUITE]
                                [--torch-index pypi] [--wheelhouse DIR] [--widen N] [--skip-parallel]

Run it after README command 1 (the build images exist; torch 2.6 and 2.13 are in the
wheelhouse). The sample kernels are copied to a temporary project; every step is the real
`wheelfactory build` in a subprocess, with an empty compile cache where it says "cold":

1. cold: every variant built once (-j 1, so no variant's time is another's), per variant: wall,
   compile (the manifest's `compile` phase: the build backend's run), overhead = wall - compile,
   and of that what only the first build for a torch build pays, like an image: the `wheelhouse`
   (downloading torch) and `environment` (making its prepared environment) phases;
2. one C++ source edited: every variant rebuilt, its compile served by the compile cache for the
   files that did not change (hit rate from build.log); the edit-rebuild / cold ratio;
3. parallel: the first four variants cold, at -j 1 and at -j 2, into fresh outputs with fresh
   compile caches, after an untimed warm-up build that makes their wheel sets and prepared
   environments. Two baselines: -j 1 as the factory runs it (each build gets every core as
   MAX_JOBS) and -j 1 with one compile job per build (the serial work -j 2 splits in two, which
   parallel efficiency is measured against).

The sample compiles 3 C++ files for a CPU variant, so an edit recompiles a third of it; kernel
libraries often have dozens. ``--widen N`` adds N more translation units to the copy (each
includes the sample's header and ATen, as a kernel's sources do) to show a wider project.

The alternative a user would pick is a hand-written CI matrix that builds each wheel from
scratch with cibuildwheel, pip-installing torch in each build: the cold figures are that
baseline's upper bound. Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from wheelfactory.plan.versions import major_minor

REPO = Path(__file__).resolve().parents[1]
EDITED = Path("csrc") / "cpu" / "activation.cpp"


@dataclass(frozen=True)
class Built:
    variant: str
    status: str
    wall: float
    phases: dict[str, float]
    cache: str  # the build.log's compile-cache line ("3 hits, 0 misses (hit rate 100%)")

    @property
    def compile(self) -> float:
        return self.phases.get("compile", 0.0)

    @property
    def overhead(self) -> float:
        return self.wall - self.compile

    @property
    def once(self) -> float:
        """What only the first build for a torch build pays: downloading its wheels and making
        its prepared environment (like building an image)."""
        return self.phases.get("wheelhouse", 0.0) + self.phases.get("environment", 0.0)

    def hits(self) -> tuple[int, int]:
        words = self.cache.replace(",", "").split()
        try:
            return int(words[words.index("hits") - 1] if "hits" in words else words[words.index("hit") - 1]), int(
                words[words.index("misses") - 1] if "misses" in words else words[words.index("miss") - 1])
        except (ValueError, IndexError):
            return 0, 0


def widen(project: Path, count: int) -> None:
    """``count`` more C++ translation units in the project's CPU sources."""
    kernel = project / "kernel.toml"
    names = []
    for n in range(count):
        name = f"csrc/cpu/extra_{n}.cpp"
        (project / name).write_text(f'#include "fusedops.h"\n#include <ATen/Parallel.h>\n\n'
                                    f"namespace {{\n[[maybe_unused]] at::Tensor extra_{n}(const at::Tensor& x) "
                                    f"{{ return x.mul({n + 2}); }}\n}}  // namespace\n")
        names.append(f'"{name}"')
    text = kernel.read_text()
    old = 'cpu = ["csrc/registration.cpp", '
    if count and old not in text:
        sys.exit("--widen: the sample's kernel.toml changed; update benchmarks/matrix.py")
    kernel.write_text(text.replace(old, f'cpu = [{", ".join(names)}, "csrc/registration.cpp", ', 1) if count else text)


def matrix_toml(project: Path, torch: list[str], args: argparse.Namespace, cache: Path, serial_compiles: bool) -> str:
    build = ['engine = "docker"', f'compile_cache_dir = "{cache}"', f'torch_index = "{args.torch_index}"']
    if args.base_image:
        build.append(f'base_image = "{args.base_image}"')
    else:
        build.append(f'debian_base = "{args.debian_base}"')
    if args.wheelhouse:
        build.append(f'wheelhouse = "{args.wheelhouse}"')
    versions = ", ".join(f'"{t}"' for t in torch)
    # One variant per release: the ABI its PyPI build has (pre-cxx11 before torch 2.7).
    text = (f'[project]\npath = "{project}"\n[matrix]\ntorch = [{versions}]\nbackends = ["cpu"]\ncxx11_abi = "both"\n'
            f'python = ["abi3"]\n[build]\n' + "\n".join(build) + "\n")
    text += "".join(f'[[exclude]]\ntorch = "{t}"\ncxx11_abi = {str(pre_cxx11(t)).lower()}\n' for t in torch)
    if serial_compiles:  # one compile job per build, for every variant
        text += "".join(f'[[include]]\ntorch = "{t}"\nbackend = "cpu"\ncxx11_abi = {str(not pre_cxx11(t)).lower()}\n'
                        f'env = {{ MAX_JOBS = "1" }}\n' for t in torch)
    return text


def pre_cxx11(torch: str) -> bool:
    return major_minor(torch) < (2, 7)


def build(workdir: Path, out: str, *extra: str) -> tuple[float, dict[str, Built]]:
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "wheelfactory", "build", "-o", out, *extra], cwd=workdir,
                            capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"build failed:\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}")
    built = {}
    for vid, entry in json.loads((workdir / out / "manifest.json").read_text())["variants"].items():
        log = workdir / out / vid / "build.log"
        lines = [ln for ln in log.read_text().splitlines() if ln.startswith("# compile cache")] if log.is_file() else []
        built[vid] = Built(vid, entry["status"], entry["seconds"], entry.get("phases") or {},
                           lines[-1].split("): ", 1)[-1] if lines else "")
    return seconds, built


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--torch", nargs="+", default=["2.6", "2.12", "2.13", "2.14"],
                        help="torch releases (CPU variants; 2.6 builds its pre-cxx11 variant from PyPI)")
    parser.add_argument("--base-image", help="the base image (default: made from Debian, --debian-base)")
    parser.add_argument("--debian-base", default="bookworm", help="the Debian suite of the base (as matrix.toml)")
    parser.add_argument("--torch-index", default="pypi", help="where torch comes from (as matrix.toml)")
    parser.add_argument("--wheelhouse", default=None, help="the wheelhouse (default: wheelfactory's own)")
    parser.add_argument("--widen", type=int, default=0, metavar="N", help="add N C++ files to the sample's copy")
    parser.add_argument("--skip-parallel", action="store_true", help="only the cold and edit-rebuild steps")
    parser.add_argument("--parallel-only", action="store_true", help="only the -j 1 / -j 2 step")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="wf-matrix-") as tmp:
        work = Path(tmp)
        project = Path(shutil.copytree(REPO / "kernels" / "fusedops", work / "fusedops",
                                       ignore=shutil.ignore_patterns("__pycache__")))
        widen(project, args.widen)
        (work / "matrix.toml").write_text(matrix_toml(project, args.torch, args, work / "cache-main", False))
        cold_total, edit_total = 0.0, 0.0
        cold: dict[str, Built] = {}
        edited: dict[str, Built] = {}
        if not args.parallel_only:
            cold_total, cold = build(work, "dist", "-j", "1")
            source = project / EDITED
            source.write_text(source.read_text() + "\nnamespace { [[maybe_unused]] int matrix_benchmark_edit = 1; }\n")
            edit_total, edited = build(work, "dist", "-j", "1")

        parallel: dict[str, float] = {}
        four = args.torch[:4]
        if not args.skip_parallel:
            # Warm-up, not timed: the wheel sets and prepared environments of the four torch builds
            # exist before the timed runs, so that no run pays what only the first one would.
            warm = work / "parallel-warm-up"
            warm.mkdir()
            (warm / "matrix.toml").write_text(matrix_toml(project, four, args, warm / "cache", False))
            build(warm, "dist", "-j", "2")
            for name, jobs, serial in (("-j 1 (MAX_JOBS = cores)", "1", False), ("-j 1 (MAX_JOBS = 1)", "1", True),
                                       ("-j 2", "2", False)):
                run_dir = work / f"parallel-{len(parallel)}"
                run_dir.mkdir()
                (run_dir / "matrix.toml").write_text(
                    matrix_toml(project, four, args, run_dir / "cache", serial))  # an empty compile cache
                parallel[name] = build(run_dir, "dist", "-j", jobs)[0]

    files = 3 + args.widen
    if cold:
        print(f"wheelfactory matrix benchmark: {len(cold)} CPU variant(s) of the sample kernels ({files} C++ files), "
              "engine docker, images already made")
        print(f"{'variant':<36}{'cold s':>8}{'compile':>9}{'overhead':>10}{'(once)':>8}{'edit s':>8}{'edit/cold':>10}"
              f"  cache after edit")
    for vid, first in sorted(cold.items()):
        again = edited[vid]
        print(f"{vid:<36}{first.wall:>8.1f}{first.compile:>9.1f}{first.overhead:>10.1f}{first.once:>8.1f}"
              f"{again.wall:>8.1f}{again.wall / first.wall:>9.0%}  {again.cache}")
    built = [b for b in cold.values() if b.status == "built"]
    if built:
        overhead = statistics.median(b.overhead for b in built)
        warm = statistics.median(b.overhead - b.once for b in built)
        ratio = statistics.median(edited[b.variant].wall / b.wall for b in built)
        ratio_warm = statistics.median(edited[b.variant].wall / (b.wall - b.once) for b in built)
        hits = [edited[b.variant].hits() for b in built]
        rate = sum(h for h, _ in hits) / max(1, sum(h + m for h, m in hits))
        print(f"median per-variant overhead (wall - compile): {overhead:.1f} s; "
              f"{warm:.1f} s without what only a torch build's first variant pays (wheels download, prepared "
              "environment)")
        print(f"median compile share of a cold variant: {statistics.median(b.compile / b.wall for b in built):.0%}")
        print(f"one C++ source edited, rebuilt: median {ratio:.0%} of the cold build "
              f"({ratio_warm:.0%} of a cold build whose wheels and environment existed); compile-cache hit rate {rate:.0%}")
        print(f"whole matrix: cold {cold_total:.1f} s, after the edit {edit_total:.1f} s ({edit_total / cold_total:.0%})")
    if parallel:
        one_job, default, two = (parallel["-j 1 (MAX_JOBS = 1)"], parallel["-j 1 (MAX_JOBS = cores)"], parallel["-j 2"])
        print(f"parallel, {len(four)} variants of the sample ({files} C++ files) cold: " + ", ".join(f"{k} {v:.1f} s" for k, v in parallel.items()))
        print(f"parallel efficiency at -j 2: {one_job / (2 * two):.0%} (against -j 1 with one compile job per build); "
              f"-j 2 vs -j 1 as the factory runs it: {default / two:.2f}x faster")


if __name__ == "__main__":
    main()
