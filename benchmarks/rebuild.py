"""Rebuild cost: a cold build vs a rebuild with nothing changed vs after editing a CUDA source
(a CPU variant stays cached) vs after editing one C++ source (rebuilt; in Docker the shared
compile cache serves the files that did not change). With --redis, the compile cache lives in a
Redis server (Debian's redis-server, started here on 127.0.0.1) and one more step builds the
same variant into another output directory, as a second CI runner would: a fresh container
with no local cache, served from Redis.

    python benchmarks/rebuild.py [--engine host|docker] [--base-image TAG | --debian-base SUITE] [--torch-index URL]
                                 [--redis]

The sample kernels are copied to a temporary project so the edit never touches the repository.
Each step is the real `wheelfactory build` command in a subprocess. A user's alternative is
rebuilding every wheel on every run (what a hand-written CI matrix does): that costs the cold
time each run, so the ratios below are what the factory's cache saves. Timings are printed,
never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


ONCE: dict[str, float] = {}  # output -> seconds of what only a torch build's first variant pays


def build(workdir: Path, out: str = "dist") -> tuple[float, str]:
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "wheelfactory", "build", "-o", out], cwd=workdir, capture_output=True,
                            text=True, check=False)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"build failed:\n{result.stdout[-3000:]}\n{result.stderr[-2000:]}")
    variants = json.loads((workdir / out / "manifest.json").read_text())["variants"]
    notes = []
    first = out not in ONCE
    for vid, entry in variants.items():
        phases = entry.get("phases") or {}
        if first:
            ONCE[out] = ONCE.get(out, 0.0) + phases.get("wheelhouse", 0.0) + phases.get("environment", 0.0)
        log = workdir / out / vid / "build.log"
        cache = [line for line in log.read_text().splitlines() if line.startswith("# compile cache")] \
            if entry["status"] == "built" and log.is_file() else []
        notes.append(entry["status"] + (f" ({cache[-1].split(': ', 1)[1]})" if cache else ""))
    return seconds, ", ".join(notes)


@contextlib.contextmanager
def redis_server(directory: Path) -> Iterator[str]:
    """Debian's redis-server on a free loopback port, empty, for the length of the benchmark."""
    server = shutil.which("redis-server")
    if server is None:
        sys.exit("--redis needs redis-server (Debian: apt-get install redis-server)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([server, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly",
                                "no", "--dir", str(directory)], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait()


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
    parser.add_argument("--redis", action="store_true", help="docker: the compile cache on a local Redis server")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="wf-rebuild-") as tmp, contextlib.ExitStack() as stack:
        workdir = Path(tmp)
        redis = stack.enter_context(redis_server(workdir)) if args.redis else None
        shutil.copytree(REPO / "kernels" / "fusedops", workdir / "fusedops",
                        ignore=shutil.ignore_patterns("__pycache__"))
        build_table = [f'engine = "{args.engine}"']
        if args.base_image:
            build_table.append(f'base_image = "{args.base_image}"')
        if args.debian_base:
            build_table.append(f'debian_base = "{args.debian_base}"')
        build_table.append(f'compile_cache_dir = "{workdir / "sccache"}"')  # empty: the cold build is cold
        if redis:
            build_table.append(f'compile_cache_redis = "{redis}"')  # empty too
        if args.torch_index:
            build_table.append(f'torch_index = "{args.torch_index}"')
        (workdir / "matrix.toml").write_text(
            '[project]\npath = "fusedops"\n[matrix]\n'
            f'torch = ["{args.torch}"]\nbackends = ["cpu"]\ncxx11_abi = true\n[build]\n' + "\n".join(build_table) + "\n")
        steps = [("cold build", *build(workdir))]
        if redis:  # another runner: its own output directory, a fresh container, no local cache
            steps.append(("2nd runner, Redis", *build(workdir, out="dist-runner2")))
        steps.append(("no change", *build(workdir)))
        edit(workdir / "fusedops" / "csrc" / "cuda" / "launchers.cu")
        steps.append(("CUDA source edited", *build(workdir)))
        edit(workdir / "fusedops" / "csrc" / "cpu" / "activation.cpp")
        steps.append(("one C++ source edited", *build(workdir)))

    cold, unchanged = steps[0][1], next(seconds for name, seconds, _ in steps if name == "no change")
    where = ", compile cache on Redis" if redis else ""
    print(f"wheelfactory rebuild benchmark, engine {args.engine}, torch {args.torch} (cpu variant){where}")
    print(f"{'step':<24}{'seconds':>10}{'vs cold':>10}  status")
    for name, seconds, status in steps:
        print(f"{name:<24}{seconds:>10.2f}{seconds / cold:>9.3f}x  {status}")
    print(f"no-change rebuild costs {unchanged / cold:.1%} of a cold build "
          f"(a cache-less CI matrix pays 100% every run: {cold / unchanged:.0f}x more)")
    if redis:
        runner2 = next(seconds for name, seconds, _ in steps if name == "2nd runner, Redis")
        print(f"a second runner with an empty local cache builds in {runner2 / cold:.2f}x the cold time "
              f"({cold / runner2:.2f}x faster), its compiles served from Redis")
        once = ONCE.get("dist", 0.0)
        if once:  # the cold build downloaded torch / made its prepared environment: the runner reused them
            print(f"  without the {once:.1f} s the cold build spent on what a torch build's first variant pays "
                  f"(wheels, prepared environment): {(cold - once) / runner2:.2f}x faster")


if __name__ == "__main__":
    main()
