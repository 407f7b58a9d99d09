"""Which variant fits this environment: the exact pip command, or why none fits and what is nearest.

Standard library only, on purpose: ``wheelfactory index`` copies this file into the index as
``select.py``, so a user without wheelfactory runs ``curl -s URL/select.py | python -`` in the
environment they want to install into; ``wheelfactory which --python PY`` runs the same file with
that interpreter. It reads the index's ``index.json`` (a URL or a directory) and the running
torch, and applies the rules the kernel runtime applies before it loads a prebuilt library:
same arch, same torch major.minor (a stable-ABI build: that torch or newer), same C++ ABI, the
backend of this torch (CUDA: same major, built minor <= this torch's), a CPython the wheel serves.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import urllib.request
from pathlib import Path

DEFAULT_INDEX = "http://127.0.0.1:8000"  # replaced with the index's base URL in the served copy
EXIT_NO_MATCH = 1


def detect() -> dict[str, object]:
    """This interpreter's torch, as the runtime sees it."""
    try:
        import torch
    except ImportError:
        raise SystemExit("select: torch is not installed in this environment; install torch first "
                         "(the kernel wheel is built against it)") from None
    version = torch.__version__.split("+")[0]
    cuda = getattr(torch.version, "cuda", None)
    hip = getattr(torch.version, "hip", None)
    backend, toolkit = ("cuda", cuda) if cuda else ("rocm", hip) if hip else ("cpu", None)
    return {"torch": ".".join(version.split(".")[:2]), "torch_version": version, "backend": backend,
            "toolkit": _major_minor(toolkit) if toolkit else None, "cxx11_abi": bool(torch.compiled_with_cxx11_abi()),
            "python": f"{sys.version_info.major}.{sys.version_info.minor}", "arch": platform.machine()}


def _major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def load_listing(index: str) -> dict[str, object]:
    """index.json from a URL (the served index) or a directory (dist/ or dist/index/)."""
    if index.startswith(("http://", "https://")):
        url = index.rstrip("/") + "/index.json"
        try:
            with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 (http(s) only, checked above)
                data: dict[str, object] = json.load(response)
                return data
        except OSError as exc:
            raise SystemExit(f"select: cannot read {url}: {exc}") from None
    root = Path(index)
    for candidate in (root / "index.json", root / "index" / "index.json"):
        if candidate.is_file():
            listing: dict[str, object] = json.loads(candidate.read_text(encoding="utf-8"))
            return listing
    raise SystemExit(f"select: no index.json under {root} (run `wheelfactory index` first)")


def mismatches(env: dict[str, object], variant: dict[str, object]) -> list[str]:
    """Why ``variant`` cannot load prebuilt in ``env`` (empty: it can)."""
    why = []
    if variant["arch"] != env["arch"]:
        why.append(f"arch {variant['arch']} (this machine: {env['arch']})")
    if variant.get("stable_abi"):
        if _tuple(str(env["torch"])) < _tuple(str(variant["torch"])):
            why.append(f"needs torch >= {variant['torch']} (installed: {env['torch_version']})")
    else:
        if variant["torch"] != env["torch"]:
            why.append(f"torch {variant['torch']} (installed: {env['torch_version']})")
        if variant["cxx11_abi"] != env["cxx11_abi"]:
            why.append("the " + ("cxx11" if variant["cxx11_abi"] else "pre-cxx11") + " C++ ABI (installed torch: "
                       + ("cxx11" if env["cxx11_abi"] else "pre-cxx11") + ")")
    if variant["backend"] != env["backend"] and variant["backend"] != "cpu":
        # A CPU build loads into a GPU torch too (CPU ops prebuilt, GPU tensors on the reference
        # ops): the runtime accepts it, so it fits, after any build of the torch's own backend.
        why.append(f"backend {variant['backend']} (installed torch: {env['backend']})")
    elif env["backend"] == "cuda" and variant.get("toolkit"):
        built, have = _tuple(_major_minor(str(variant["toolkit"]))), _tuple(str(env["toolkit"]))
        if built[0] != have[0] or built > have:
            why.append(f"CUDA {variant['toolkit']} (installed torch: CUDA {env['toolkit']})")
    elif env["backend"] == "rocm" and variant.get("toolkit"):
        if _major_minor(str(variant["toolkit"])) != env["toolkit"]:
            why.append(f"ROCm {variant['toolkit']} (installed torch: ROCm {env['toolkit']})")
    python = str(variant["python"])
    if python == "abi3":
        if _tuple(str(env["python"])) < (3, 9):
            why.append("CPython >= 3.9")
    elif python != env["python"]:
        why.append(f"CPython {python} (running: {env['python']})")
    return why


def choose(env: dict[str, object], variants: list[dict[str, object]]
           ) -> tuple[dict[str, object] | None, list[tuple[dict[str, object], list[str]]]]:
    """The best matching variant (exact toolkit before an older compatible one, a torch-specific
    build before a stable-ABI one), and every other one with the reasons it does not fit, nearest first."""
    scored = [(variant, mismatches(env, variant)) for variant in variants]
    fitting = [v for v, why in scored if not why]

    def preference(variant: dict[str, object]) -> tuple[bool, bool, tuple[int, ...], bool]:
        toolkit = _tuple(_major_minor(str(variant.get("toolkit") or "0")))
        return (variant["backend"] == env["backend"], not variant.get("stable_abi"), toolkit,
                variant["python"] != "abi3")

    best = max(fitting, key=preference) if fitting else None
    others = sorted(((v, why) for v, why in scored if why), key=lambda item: (len(item[1]), str(item[0]["id"])))
    return best, others


def describe(env: dict[str, object]) -> str:
    backend = str(env["backend"]) + (f" {env['toolkit']}" if env["toolkit"] else "")
    abi = "cxx11" if env["cxx11_abi"] else "pre-cxx11"
    return f"torch {env['torch_version']} ({backend}, {abi} ABI), CPython {env['python']}, {env['arch']}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="select", description=__doc__.splitlines()[0])
    parser.add_argument("--index", default=DEFAULT_INDEX, help="the index's URL or dist directory")
    parser.add_argument("--quiet", "-q", action="store_true", help="print only the --index-url value")
    parser.add_argument("--json", action="store_true", help="print the decision as JSON")
    args = parser.parse_args(argv)
    listing = load_listing(args.index)
    listed = listing.get("variants", [])
    variants = [v for v in listed if isinstance(v, dict)] if isinstance(listed, list) else []
    env = detect()
    best, others = choose(env, variants)
    base = args.index.rstrip("/") if args.index.startswith(("http://", "https://")) else None
    if args.json:
        print(json.dumps({"environment": env, "variant": best, "nearest": [
            {"id": v["id"], "mismatches": why} for v, why in others[:3]]}, indent=2))
        return 0 if best else EXIT_NO_MATCH
    if best is None:
        print(f"no variant of this index fits {describe(env)}.", file=sys.stderr)
        for variant, why in others[:3]:
            print(f"  nearest: {variant['id']}: built for {'; '.join(why)}", file=sys.stderr)
        if others:
            print("Installing the nearest one still works: its runtime JIT-compiles the kernels for this torch "
                  "(a C++ compiler is needed; CUDA sources need nvcc) or falls back to reference PyTorch ops.",
                  file=sys.stderr)
        return EXIT_NO_MATCH
    index_url = f"{base}/{best['index']}".rstrip("/") if base else str(best["index"])
    if args.quiet:
        print(index_url)
    else:
        print(f"# {describe(env)} -> {best['id']}")
        if best["backend"] != env["backend"]:
            print(f"# (no {env['backend']} build of this torch in the index: the CPU build's ops run prebuilt "
                  f"on CPU tensors; {env['backend']} tensors use the reference ops)")
        print(f"pip install --index-url {index_url} {best['project']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
