"""Load latency of a kernel package: prebuilt (with and without bytecode caches), JIT cache hit,
cpp_extension.load cache hit, against the floor of a bare torch.ops.load_library + call.

Each run is a fresh interpreter; the time measured is from right after ``import torch`` to the
first op call returning (so it includes importing the kernel package and its runtime). Runs of
the scenarios are interleaved so machine noise spreads evenly; the median is reported.

    (a) prebuilt            import <pkg> -> lean record check -> torch.ops.load_library(_C) -> first op,
                            the package byte-compiled as pip installs it
    (b) prebuilt, no .pyc   the same package copied without __pycache__, PYTHONDONTWRITEBYTECODE=1:
                            as from a read-only site-packages that uv installed (it compiles no
                            bytecode by default), every module compiled from source in each process
    (c) JIT hit             import <pkg> -> record rejected/absent -> hash sources -> verified cache hit -> first op
    (d) cpp_ext hit         import torch.utils.cpp_extension -> load(...) on a warm build dir -> first op
    (e) bare                torch.ops.load_library(the same _C) -> first op (the floor for (a) and (b))

It uses the real kernels/fusedops sources when they compile here, else the tiny fixture kernel
of tests/runtime. Nothing is asserted: it prints a table and the ratios measured in this run.

    python benchmarks/load_latency.py [--runs 15] [--kernel auto|fusedops|fixture] [--workdir DIR]
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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the tests package: rt_assemble (no pytest)

from tests.runtime import rt_assemble as rt  # (the tests' package assembler: the factory's installed layout)
from wheelfactory.project.kernel_toml import KernelSpec, load_kernel

TIMED = r"""
import json, sys, time
import torch
x = torch.randn(8, 256)
out = torch.empty(8, 128)
t0 = time.perf_counter()
{body}
t1 = time.perf_counter()
print("TIMING " + json.dumps({{"ms": (t1 - t0) * 1e3, "import_ms": (t_import - t0) * 1e3, "mode": mode}}))
"""

PACKAGE_BODY = """
import {name}
t_import = time.perf_counter()
{name}.silu_and_mul(x, out=out)
mode = "{name}"
"""

CPP_EXTENSION_BODY = """
import torch.utils.cpp_extension as cpp_extension
t_import = time.perf_counter()
cpp_extension.load({load_args})
torch.ops.{namespace}.silu_and_mul(out, x)
mode = "cpp_extension"
"""

BARE_BODY = """
t_import = t0
torch.ops.load_library({library!r})
torch.ops.{namespace}.silu_and_mul(out, x)
mode = "bare"
"""

MODE_CHECK = (
    "import {name}, json; print('MODE', {name}.backend_info()['mode'], {name}.backend_info().get('jit'))"
)


@dataclass(frozen=True)
class Scenario:
    label: str
    code: str
    env: Mapping[str, str]
    expected_mode: str | None = None


def run_timed(scenario: Scenario) -> dict[str, float]:
    proc = rt.run_python(["-c", scenario.code], scenario.env)
    for line in proc.stdout.splitlines():
        if line.startswith("TIMING "):
            return json.loads(line[len("TIMING ") :])  # type: ignore[no-any-return]
    raise RuntimeError(
        f"{scenario.label} failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr[-3000:]}"
    )


def check_mode(name: str, env: Mapping[str, str], expected: str) -> None:
    # no time limit: the first check of the JIT package compiles it
    proc = rt.run_python(["-c", MODE_CHECK.format(name=name)], env, timeout=None)
    if f"MODE {expected}" not in proc.stdout:
        raise RuntimeError(f"expected mode {expected}, got:\n{proc.stdout}\n{proc.stderr[-3000:]}")


def compileall(package: Path) -> None:
    # pip byte-compiles a wheel at install time; do the same so runs measure loading, not compiling .py
    subprocess.run([rt.PYTHON, "-m", "compileall", "-q", str(package)], check=True, capture_output=True)


def prepare(kernel: KernelSpec, work: Path) -> list[Scenario]:
    name, namespace = kernel.name, f"_{kernel.name}_cpu_bench"
    # (c) cpp_extension.load on the same sources and flags; its build doubles as the prebuilt _C.
    cpp_build = work / "cpp_extension_build"
    cpp_build.mkdir(parents=True)
    load_args = ", ".join(
        [
            f"name={name + '_cppext'!r}",
            f"sources={[str(kernel.root / s) for s in kernel.sources_for('cpu')]!r}",
            f"extra_cflags={[*kernel.cxx_flags, f'-D{kernel.namespace_macro}={namespace}']!r}",
            f"extra_include_paths={[str(kernel.root / d) for d in kernel.include_dirs]!r}",
            f"build_directory={str(cpp_build)!r}",
            "is_python_module=False",
        ]
    )
    base_env = rt.child_env(kernel, work)
    cpp_code = TIMED.format(body=CPP_EXTENSION_BODY.format(load_args=load_args, namespace=namespace))
    print("  compiling with torch.utils.cpp_extension.load (warms its cache) ...", flush=True)
    started = time.monotonic()
    run_timed(Scenario("cpp_extension warm-up", cpp_code, base_env))
    print(f"  ... {time.monotonic() - started:.0f} s")
    library = cpp_build / f"{name}_cppext.so"

    # (a) the prebuilt layout, with a build record matching this environment
    prebuilt_parent = work / "prebuilt"
    prebuilt_parent.mkdir()
    rt.assemble(kernel, prebuilt_parent, record=rt.current_record(kernel, namespace), library=library)
    compileall(prebuilt_parent / name)
    prebuilt_env = rt.child_env(kernel, prebuilt_parent, cache_dir=work / "unused-cache")

    # (b) the same package without bytecode caches, and none written while it runs
    source_only_parent = work / "prebuilt-no-bytecode"
    shutil.copytree(prebuilt_parent, source_only_parent, ignore=shutil.ignore_patterns("__pycache__"))
    source_only_env = {
        **rt.child_env(kernel, source_only_parent, cache_dir=work / "unused-cache"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }

    # (c) a source-only install and a JIT cache, warmed by one load
    jit_parent = work / "jit"
    jit_parent.mkdir()
    rt.assemble(kernel, jit_parent)
    compileall(jit_parent / name)
    jit_env = rt.child_env(kernel, jit_parent, cache_dir=work / "jit-cache")
    print(f"  compiling through the runtime's JIT (warms {work / 'jit-cache'}) ...", flush=True)
    started = time.monotonic()
    check_mode(name, jit_env, "jit")
    print(f"  ... {time.monotonic() - started:.0f} s")
    check_mode(name, prebuilt_env, "prebuilt")
    check_mode(name, source_only_env, "prebuilt")

    package_code = TIMED.format(body=PACKAGE_BODY.format(name=name))
    bare_code = TIMED.format(
        body=BARE_BODY.format(library=str(prebuilt_parent / name / rt.LIBRARY_NAME), namespace=namespace)
    )
    return [
        Scenario("(a) prebuilt", package_code, prebuilt_env),
        Scenario("(b) prebuilt, no bytecode caches", package_code, source_only_env),
        Scenario("(c) JIT cache hit", package_code, jit_env),
        Scenario("(d) cpp_extension.load cache hit", cpp_code, base_env),
        Scenario("(e) bare load_library + call", bare_code, base_env),
    ]


def bytecode_caches(parent: Path) -> list[Path]:
    return sorted(parent.rglob("__pycache__"))


def choose_kernel(choice: str) -> list[KernelSpec]:
    fusedops_ready = (rt.FUSEDOPS_KERNEL / "csrc").is_dir() and (
        rt.FUSEDOPS_KERNEL / "python" / "fusedops" / "_reference.py"
    ).is_file()
    if choice == "fusedops" or (choice == "auto" and fusedops_ready):
        # auto: fall back to the fixture if the real sources do not compile (yet)
        return [load_kernel(rt.FUSEDOPS_KERNEL)] + (
            [load_kernel(rt.FIXTURE_KERNEL)] if choice == "auto" else []
        )
    return [load_kernel(rt.FIXTURE_KERNEL)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--runs", type=int, default=15, help="fresh processes per scenario (>= 10 recommended)"
    )
    parser.add_argument("--kernel", choices=["auto", "fusedops", "fixture"], default="auto")
    parser.add_argument(
        "--workdir", type=Path, help="keep the builds here (default: a temp dir, removed after)"
    )
    args = parser.parse_args()

    import torch

    work_root = args.workdir or Path(tempfile.mkdtemp(prefix="load-latency-"))
    scenarios: list[Scenario] | None = None
    kernel = None
    try:
        for candidate in choose_kernel(args.kernel):
            work = work_root / candidate.name
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            sources = len(candidate.sources_for("cpu"))
            print(
                f"preparing kernel {candidate.name!r} ({sources} CPU source files) in {work}",
                flush=True,
            )
            try:
                scenarios, kernel = prepare(candidate, work), candidate
                break
            except RuntimeError as exc:
                print(
                    f"  {candidate.name} does not build here, trying the next kernel:\n{str(exc)[-1500:]}",
                    flush=True,
                )
        if scenarios is None or kernel is None:
            print("no kernel could be built", file=sys.stderr)
            return 1

        samples: dict[str, list[dict[str, float]]] = {s.label: [] for s in scenarios}
        for index in range(args.runs):
            for scenario in scenarios:  # interleaved
                samples[scenario.label].append(run_timed(scenario))
            print(f"\r  run {index + 1}/{args.runs}", end="", flush=True)
        print()
        written = bytecode_caches(work_root / kernel.name / "prebuilt-no-bytecode")
        if written:  # (b) would have measured cached loads after its first run
            print(f"bytecode caches appeared in the no-bytecode package: {written}", file=sys.stderr)
            return 1
    finally:
        if args.workdir is None:
            shutil.rmtree(work_root, ignore_errors=True)

    medians = {label: statistics.median(s["ms"] for s in runs) for label, runs in samples.items()}
    print()
    print("Load latency: from after `import torch` to the first op call returning (fresh process per run)")
    print(
        f"kernel {kernel.name} ({len(kernel.sources_for('cpu'))} CPU sources), torch {torch.__version__}, "
        f"Python {sys.version.split()[0]}, {args.runs} runs per scenario, interleaved"
    )
    print()
    header = f"{'scenario':<36} {'median ms':>10} {'min ms':>8} {'max ms':>8} {'import ms':>10}"
    print(header)
    print("-" * len(header))
    for label, runs in samples.items():
        values = [s["ms"] for s in runs]
        print(
            f"{label:<36} {medians[label]:>10.2f} {min(values):>8.2f} {max(values):>8.2f} "
            f"{statistics.median(s['import_ms'] for s in runs):>10.2f}"
        )
    print()
    pre, source_only, jit, cpp, bare = (medians[s.label] for s in scenarios)
    print(f"prebuilt / bare load_library + call              : {pre / bare:6.1f}x ({pre - bare:+.2f} ms)")
    print(
        f"prebuilt, no bytecode caches / bare              : {source_only / bare:6.1f}x "
        f"({source_only - bare:+.2f} ms)"
    )
    print(f"prebuilt, no bytecode caches / with them         : {source_only / pre:6.1f}x")
    print(f"cpp_extension.load cache hit / our JIT cache hit : {cpp / jit:6.1f}x")
    print(f"cpp_extension.load cache hit / our prebuilt load : {cpp / pre:6.1f}x")
    print(f"JIT cache hit overhead over bare load_library    : {jit - bare:+6.2f} ms")
    print("('import ms' is the part spent importing the package, or torch.utils.cpp_extension for (d))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
