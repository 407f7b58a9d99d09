"""Rebuild cost: a cold build vs a rebuild with nothing changed vs after editing a CUDA source
(a CPU variant stays cached) vs after editing one C++ source (rebuilt; in Docker the shared
compile cache serves the files that did not change).

    python benchmarks/rebuild.py [--engine host|docker] [--base-image TAG | --debian-base SUITE] [--torch-index URL]

The sample kernels are copied to a temporary project so the edit never touches the repository.
Each step is the real `wheelfactory build` command in a subprocess. A user's alternative is
rebuilding every wheel on every run (what a hand-written CI matrix does): that costs the cold
time each run, so the ratios below are what the factory's cache saves. Timings are printed,
never asserted.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def build(workdir: Path) -> tuple[float, str]:
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "factory", "build"], cwd=workdir, capture_output=True, text=True,
                            check=False)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"build failed:\n{result.stdout[-3000:]}\n{result.stderr[-2000:]}")
    variants = json.loads((workdir / "dist" / "manifest.json").read_text())["variants"]
    notes = []
    for vid, entry in variants.items():
        log = workdir / "dist" / vid / "build.log"
        cache = [line for line in log.read_text().splitlines() if line.startswith("# compile cache")] \
            if entry["status"] == "built" and log.is_file() else []
        notes.append(entry["status"] + (f" ({cache[-1].split(': ', 1)[1]})" if cache else ""))
    return seconds, ", ".join(notes)


def edit(source: Path) -> None:
    """A real code change (a comment would be a preprocessor-level no-op for ccache)."""
    source.write_text(source.read_text() + "\nnamespace { [[maybe_unused]] int rebuild_benchmark_edit = 1; }\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=["host", "docker"], default="host")
    parser.add_argument("--base-image", help="docker: the base image (e.g. from `wheelfactory base-image`)")
    parser.add_argument("--debian-base", help="docker: make the base from this Debian suite instead (bookworm)")
    parser.add_argument("--torch-index", default=None, help="docker: where torch comes from (PyPI offline)")
    parser.add_argument("--torch", default="2.13", help="docker: the torch release to build for")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="wf-rebuild-") as tmp:
        workdir = Path(tmp)
        shutil.copytree(REPO / "kernels" / "fusedops", workdir / "fusedops",
                        ignore=shutil.ignore_patterns("__pycache__"))
        build_table = [f'engine = "{args.engine}"']
        if args.base_image:
            build_table.append(f'base_image = "{args.base_image}"')
        if args.debian_base:
            build_table.append(f'debian_base = "{args.debian_base}"')
        build_table.append(f'compile_cache = "{workdir / "ccache"}"')  # empty: the cold build is cold
        if args.torch_index:
            build_table.append(f'torch_index = "{args.torch_index}"')
        (workdir / "matrix.toml").write_text(
            '[project]\npath = "fusedops"\n[matrix]\n'
            f'torch = ["{args.torch}"]\nbackends = ["cpu"]\ncxx11_abi = true\n[build]\n' + "\n".join(build_table) + "\n")
        steps = [("cold build", *build(workdir)), ("no change", *build(workdir))]
        edit(workdir / "fusedops" / "csrc" / "cuda" / "activation.cu")
        steps.append(("CUDA source edited", *build(workdir)))
        edit(workdir / "fusedops" / "csrc" / "cpu" / "activation.cpp")
        steps.append(("one C++ source edited", *build(workdir)))

    cold, unchanged = steps[0][1], steps[1][1]
    print(f"wheelfactory rebuild benchmark, engine {args.engine}, torch {args.torch} (cpu variant)")
    print(f"{'step':<24}{'seconds':>10}{'vs cold':>10}  status")
    for name, seconds, status in steps:
        print(f"{name:<24}{seconds:>10.2f}{seconds / cold:>9.3f}x  {status}")
    print(f"no-change rebuild costs {unchanged / cold:.1%} of a cold build "
          f"(a cache-less CI matrix pays 100% every run: {cold / unchanged:.0f}x more)")


if __name__ == "__main__":
    main()
