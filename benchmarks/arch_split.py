"""A CUDA build split by GPU architecture ([cuda] split_archs) against the fat wheel, and the two
ways of making the parts.

    python benchmarks/arch_split.py [--torch 2.13] [--backend cu130] [--archs "8.0;9.0;12.0+PTX"]
                                    [--debian-base bookworm | --base-image TAG] [--gpu 9.0]

The sample kernels (kernels/fusedops) for one torch and CUDA build, each step the real
`wheelfactory build` in a subprocess (Docker engine, the host's pip index for torch), each with a
compile cache of its own, empty at the start (so every route pays its compiles):

- fat: one variant, one wheel with every arch's SASS (and the PTX the list asks for), what a
  user's hand-written matrix ships;
- split, one compile (what the factory does): four variants, every part compiling the whole list
  alike, so the first part compiles and the others are served by the compile cache; each wheel
  then keeps its own arch's device code (verify/fatbin.py);
- split, a compile per part (the other route): each part a variant of its own arch only
  (``arch_list = "9.0"``; the PTX part as "12.0+PTX", SASS and PTX, since TORCH_CUDA_ARCH_LIST
  has no PTX-only form).

A warm-up build first makes the image, the torch wheel set and the prepared environments, which
every route shares. Then the wheels' bytes, each route's build time, and the install of the
wheel chosen for ``--gpu`` (select.py's rule, the GPU simulated) with pip and uv from the index
`wheelfactory serve` serves, fat against part. Printed with ratios, never asserted.
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
SAMPLE = REPO / "kernels" / "fusedops"


def matrix(torch: str, backend: str, archs: str, build: str, *, split: bool = False) -> str:
    return (f'[project]\npath = "{SAMPLE}"\n\n[matrix]\ntorch = ["{torch}"]\nbackends = ["{backend}"]\n\n'
            f'[cuda]\narch_list = "{archs}"\nsplit_archs = {"true" if split else "false"}\n\n{build}')


def build(work: Path, text: str) -> tuple[float, dict[str, dict[str, object]]]:
    """Seconds of one `wheelfactory build` in ``work`` (its own compile cache), and the manifest's variants."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "matrix.toml").write_text(text + f'compile_cache_dir = "{work / "sccache"}"\n')
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "wheelfactory", "build", "-q"], cwd=work, capture_output=True,
                          text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"build in {work} failed:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    variants: dict[str, dict[str, object]] = json.loads((work / "dist" / "manifest.json").read_text())["variants"]
    return seconds, variants


def wheel_sizes(work: Path, variants: dict[str, dict[str, object]]) -> dict[str, int]:
    return {vid: (work / "dist" / str(entry["wheel"])).stat().st_size for vid, entry in variants.items()}


@contextlib.contextmanager
def served(dist: Path) -> Iterator[str]:
    """`wheelfactory index` then `wheelfactory serve` of ``dist`` on a free port; its base URL."""
    subprocess.run([sys.executable, "-m", "wheelfactory", "index", "-o", str(dist)], check=True, capture_output=True)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "wheelfactory", "serve", "-o", str(dist), "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            time.sleep(0.1)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=30)


def chosen_index(base: str, gpu: str) -> tuple[str, list[str]]:
    """The --index-url select.py's rule (publish/select.py) gives a CUDA torch of the build on a GPU
    of capability ``gpu``, and why: the environment is simulated (no GPU here, no CUDA torch needed)."""
    from wheelfactory.publish import which

    listed = which.load_listing(base)["variants"]
    variants = [v for v in listed if isinstance(v, dict)] if isinstance(listed, list) else []
    first = variants[0]
    env: dict[str, object] = {"torch": first["torch"], "torch_version": f"{first['torch']}.0", "backend": "cuda",
                              "toolkit": first["toolkit"], "cxx11_abi": first["cxx11_abi"],
                              "python": f"{sys.version_info[0]}.{sys.version_info[1]}", "arch": first["arch"],
                              "gpus": [gpu]}
    best, _ = which.choose(env, variants)
    if best is None:
        sys.exit(f"no part of the split build serves a GPU of capability {gpu}")
    return f"{base}/{best['index']}".rstrip("/"), which.gpu_reasons(env, best)


def install_seconds(tool: str, index_url: str, scratch: Path) -> float:
    """One install of fusedops alone (--no-deps: torch is the same for both) into an empty target."""
    target = scratch / f"target-{time.monotonic_ns()}"
    if tool == "pip":
        command = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-cache-dir", "--index-url",
                   index_url, "--target", str(target), "fusedops"]
    else:
        command = ["uv", "pip", "install", "-q", "--no-deps", "--no-cache", "--index-url", index_url, "--target",
                   str(target), "fusedops"]
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    seconds = time.perf_counter() - start
    shutil.rmtree(target, ignore_errors=True)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch", default="2.13")
    parser.add_argument("--backend", default="cu130")
    parser.add_argument("--archs", default="8.0;9.0;12.0+PTX")
    parser.add_argument("--debian-base", default="bookworm")
    parser.add_argument("--base-image", default=None)
    parser.add_argument("--gpu", default="9.0", help="the GPU the install step chooses for")
    parser.add_argument("--installs", type=int, default=3, help="installs of each wheel with each tool")
    parser.add_argument("--work", type=Path, default=None, help="keep the builds here (default: a temp directory)")
    args = parser.parse_args()
    from wheelfactory.plan.identity import split_arch_list

    base = f'base_image = "{args.base_image}"' if args.base_image else f'debian_base = "{args.debian_base}"'
    build_table = f'[build]\nengine = "docker"\n{base}\ntorch_index = "pypi"\n'
    work = args.work or Path(tempfile.mkdtemp(prefix="wf-arch-split-"))
    parts = split_arch_list(tuple(a for a in args.archs.split(";") if a))
    print(f"torch {args.torch} {args.backend}, archs {args.archs}: {len(parts)} parts "
          f"({', '.join(p.tag for p in parts)}); work in {work}")

    warm, _ = build(work / "warm-up", matrix(args.torch, args.backend, args.archs, build_table))
    print(f"warm-up (image, wheel set, environments, one fat compile): {warm:.0f} s")
    fat_s, fat = build(work / "fat", matrix(args.torch, args.backend, args.archs, build_table))
    one_s, split = build(work / "split-one-compile", matrix(args.torch, args.backend, args.archs, build_table,
                                                            split=True))
    per_part_s = 0.0
    per_part_sizes: dict[str, int] = {}
    for part in parts:
        own = f"{part.arch}+PTX" if part.ptx else part.arch
        seconds, variants = build(work / f"part-{part.tag}", matrix(args.torch, args.backend, own, build_table))
        per_part_s += seconds
        per_part_sizes[part.tag] = sum(wheel_sizes(work / f"part-{part.tag}", variants).values())

    (fat_size,) = wheel_sizes(work / "fat", fat).values()
    split_sizes = wheel_sizes(work / "split-one-compile", split)
    print(f"\n{'wheel':<48} {'bytes':>12} {'of fat':>8} {'own-compile route':>18}")
    print(f"{'fat (' + args.archs + ')':<48} {fat_size:>12} {1:>8.2f}")
    for vid, size in split_sizes.items():
        tag = next(p.tag for p in parts if f"-{p.tag}-" in vid)
        print(f"{vid:<48} {size:>12} {size / fat_size:>8.2f} {per_part_sizes[tag]:>18}")
    print(f"\nbuild time (cold compile cache each): fat {fat_s:.0f} s; split, one compile {one_s:.0f} s "
          f"({one_s / fat_s:.2f}x fat); split, a compile per part {per_part_s:.0f} s ({per_part_s / fat_s:.2f}x fat, "
          f"{per_part_s / one_s:.2f}x the one-compile route)")

    scratch = work / "installs"
    scratch.mkdir(exist_ok=True)
    rows = []
    with served(work / "fat" / "dist") as fat_base, served(work / "split-one-compile" / "dist") as split_base:
        fat_url = f"{fat_base}/{next(iter(fat))}/simple"
        split_url, why = chosen_index(split_base, args.gpu)
        for tool in ("pip", "uv"):
            if tool == "uv" and shutil.which("uv") is None:
                continue
            fat_t = min(install_seconds(tool, fat_url, scratch) for _ in range(args.installs))
            part_t = min(install_seconds(tool, split_url, scratch) for _ in range(args.installs))
            rows.append((tool, fat_t, part_t))
    print(f"\ninstall of the wheel for --gpu {args.gpu} ({split_url.rsplit('/', 2)[-2]}: {'; '.join(why)}), "
          f"best of {args.installs}:")
    for tool, fat_t, part_t in rows:
        print(f"  {tool}: fat {fat_t:.2f} s, part {part_t:.2f} s ({part_t / fat_t:.2f}x)")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
