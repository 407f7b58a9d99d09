"""Rebuild cost: a cold build vs a rebuild with nothing changed vs a rebuild after a one-file edit.

    python benchmarks/rebuild.py [--engine host|docker] [--base-image TAG] [--torch-index URL]

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


def build(workdir: Path) -> tuple[float, dict[str, str]]:
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "factory", "build"], cwd=workdir, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"build failed:\n{result.stdout[-3000:]}\n{result.stderr[-2000:]}")
    variants = json.loads((workdir / "dist" / "manifest.json").read_text())["variants"]
    return seconds, {vid: entry["status"] for vid, entry in variants.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=["host", "docker"], default="host")
    parser.add_argument("--base-image", help="docker: the base image (e.g. from `wheelfactory base-image`)")
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
        if args.torch_index:
            build_table.append(f'torch_index = "{args.torch_index}"')
        (workdir / "matrix.toml").write_text(
            '[project]\npath = "fusedops"\n[matrix]\n'
            f'torch = ["{args.torch}"]\nbackends = ["cpu"]\ncxx11_abi = true\n[build]\n' + "\n".join(build_table) + "\n")
        cold, cold_status = build(workdir)
        unchanged, unchanged_status = build(workdir)
        source = workdir / "fusedops" / "csrc" / "cpu" / "activation.cpp"
        source.write_text(source.read_text() + "\n// an edit\n")
        edited, edited_status = build(workdir)

    print(f"wheelfactory rebuild benchmark, engine {args.engine}, torch {args.torch} (cpu)")
    print(f"{'step':<28}{'seconds':>10}{'vs cold':>10}  statuses")
    for name, seconds, status in (("cold build", cold, cold_status), ("no change", unchanged, unchanged_status),
                                  ("one source file edited", edited, edited_status)):
        print(f"{name:<28}{seconds:>10.2f}{seconds / cold:>9.3f}x  {', '.join(sorted(set(status.values())))}")
    print(f"no-change rebuild costs {unchanged / cold:.1%} of a cold build "
          f"(a cache-less CI matrix pays 100% every run: {cold / unchanged:.0f}x more)")


if __name__ == "__main__":
    main()
