"""Which variant fits this environment: the exact pip command, or why none fits and what is nearest.

Standard library only, on purpose: ``wheelfactory index`` copies this file into the index as
``select.py``, so a user without wheelfactory runs ``curl -s URL/select.py | python -`` in the
environment they want to install into; ``wheelfactory which --python PY`` runs the same file with
that interpreter. It reads the index's ``index.json`` (a URL or a directory) and the running
torch, and applies the rule the kernel runtime applies before it loads a prebuilt library: the
runtime's own ``_fit.check_fit`` (same arch, same torch major.minor or a stable-ABI build for an
older one, same C++ ABI, the backend of this torch, a CPython the wheel serves).

Here that rule is imported from the runtime; in select.py, ``wheelfactory index`` replaces that
import statement with the source of runtime/_fit.py, so the served script stays one
standard-library file (tests/publish/test_fit_agreement.py runs it so).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import urllib.request
from pathlib import Path
from typing import NoReturn

from wheelfactory._runtime._fit import (  # select.py: runtime/_fit.py pasted here
    FitBuild,
    FitEnv,
    check_fit,
    normalize_machine,
    parse_major_minor,
)

DEFAULT_INDEX = "http://127.0.0.1:8000"  # replaced with the index's base URL in the served copy
EXIT_NO_MATCH = 1
EXIT_BAD_INDEX = 2  # index.json is corrupt or not the shape `wheelfactory index` writes


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
    return {"torch": _major_minor(version), "torch_version": version, "backend": backend,
            "toolkit": _major_minor(toolkit) if toolkit else None, "cxx11_abi": bool(torch.compiled_with_cxx11_abi()),
            "python": f"{sys.version_info.major}.{sys.version_info.minor}", "arch": normalize_machine(platform.machine())}


def _major_minor(version: str) -> str:
    major, minor = parse_major_minor(version)
    return f"{major}.{minor}"


def load_listing(index: str) -> dict[str, object]:
    """index.json from a URL (the served index) or a directory (dist/ or dist/index/), checked
    (``check_listing``): a corrupt or wrong-shaped one is one line on stderr and exit 2."""
    if index.startswith(("http://", "https://")):
        url = index.rstrip("/") + "/index.json"
        try:
            with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 (http(s) only, checked above)
                raw: bytes = response.read()
        except (OSError, ValueError) as exc:
            raise SystemExit(f"select: cannot read {url}: {exc}") from None
        return _checked(raw, url)
    root = Path(index)
    for candidate in (root / "index.json", root / "index" / "index.json"):
        if candidate.is_file():
            try:
                data = candidate.read_bytes()
            except OSError as exc:
                _bad_index(str(candidate), f"cannot read it ({exc.strerror or exc})")
            return _checked(data, str(candidate))
    raise SystemExit(f"select: no index.json under {root} (run `wheelfactory index` first)")


# Each variant's keys that the fit rule and the pip command read, with their JSON types.
_VARIANT_KEYS: dict[str, tuple[type, ...]] = {
    "id": (str,), "project": (str,), "torch": (str,), "backend": (str,), "cxx11_abi": (bool,), "python": (str,),
    "arch": (str,), "index": (str,), "toolkit": (str, type(None)), "stable_abi": (bool, type(None)),
}
_OPTIONAL_KEYS = ("toolkit", "stable_abi")


class InvalidListing(ValueError):
    """index.json is not what `wheelfactory index` writes; the message says where in it."""


def _checked(raw: bytes, where: str) -> dict[str, object]:
    try:
        return check_listing(raw)
    except InvalidListing as exc:
        _bad_index(where, str(exc))


def _bad_index(where: str, problem: str) -> NoReturn:
    """One line on stderr naming the file (and key), then exit EXIT_BAD_INDEX."""
    print(" ".join(f"select: {where}: {problem}; run `wheelfactory index` again".split()), file=sys.stderr)
    raise SystemExit(EXIT_BAD_INDEX)


def _quoted(value: object) -> str:
    try:
        text = json.dumps(value, ensure_ascii=True)
    except (ValueError, TypeError, RecursionError):
        text = type(value).__name__
    return text if len(text) <= 60 else text[:60] + "..."


def check_listing(raw: bytes) -> dict[str, object]:
    """index.json's text as a listing: an object whose ``variants`` is a list of objects with the
    keys ``choose`` reads, of the right types (versions that parse); InvalidListing otherwise."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise InvalidListing(f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InvalidListing("not a JSON object")
    variants = data.get("variants", [])
    if not isinstance(variants, list):
        raise InvalidListing("variants: expected a list")
    for number, variant in enumerate(variants):
        if not isinstance(variant, dict):
            raise InvalidListing(f"variants[{number}]: expected an object, got {_quoted(variant)}")
        for key, types in _VARIANT_KEYS.items():
            if key not in variant and key in _OPTIONAL_KEYS:
                continue
            if key not in variant:
                raise InvalidListing(f"variants[{number}]: missing key {key}")
            if not isinstance(variant[key], types):
                raise InvalidListing(f"variants[{number}]: {key}: {_quoted(variant[key])} has the wrong type")
        for key in ("torch", "toolkit", "python"):
            value = variant.get(key)
            if value is None or (key == "python" and value == "abi3"):
                continue
            try:
                parse_major_minor(str(value))
            except ValueError:
                raise InvalidListing(f"variants[{number}]: {key}: {_quoted(value)} is not a major.minor version") from None
    return data


def fit_env(env: dict[str, object]) -> FitEnv:
    """``detect()``'s environment as the runtime's fit rule reads one."""
    toolkit = env.get("toolkit")
    return FitEnv(str(env.get("torch_version") or env["torch"]), str(env["backend"]),
                  str(toolkit) if toolkit else None, bool(env["cxx11_abi"]), str(env["python"]), str(env["arch"]))


def fit_build(variant: dict[str, object]) -> FitBuild:
    """An index.json variant as the runtime's fit rule reads a build."""
    toolkit = variant.get("toolkit")
    return FitBuild(str(variant["torch"]), str(variant["backend"]), str(toolkit) if toolkit else None,
                    bool(variant["cxx11_abi"]), str(variant["python"]), str(variant["arch"]),
                    bool(variant.get("stable_abi")), str(variant.get("id", "")))


def mismatches(env: dict[str, object], variant: dict[str, object]) -> list[str]:
    """Why ``variant`` cannot load prebuilt in ``env`` (empty: it can): the runtime's own rule."""
    return list(check_fit(fit_build(variant), fit_env(env)).problems)


def choose(env: dict[str, object], variants: list[dict[str, object]]
           ) -> tuple[dict[str, object] | None, list[tuple[dict[str, object], list[str]]]]:
    """The best matching variant (exact toolkit before an older compatible one, a torch-specific
    build before a stable-ABI one), and every other one with the reasons it does not fit, nearest first."""
    scored = [(variant, mismatches(env, variant)) for variant in variants]
    fitting = [v for v, why in scored if not why]

    def preference(variant: dict[str, object]) -> tuple[bool, bool, tuple[int, int], bool]:
        toolkit = parse_major_minor(str(variant.get("toolkit") or "0.0"))
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
            print(f"  nearest: {variant['id']}: {'; '.join(why)}", file=sys.stderr)
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
