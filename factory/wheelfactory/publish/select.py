"""Which variant fits this environment: the exact pip command, or why none fits and what is nearest.

``wheelfactory index`` serves this module as the index's ``select.py``, so a user without
wheelfactory runs ``curl -s URL/select.py | python -`` in the environment they want to install
into; ``wheelfactory which --python PY`` runs the same script with that interpreter. It reads the
index's ``index.json`` (a URL or a directory; its shape: publish/index_json.py) and the running
torch, and applies the rule the kernel runtime applies before it loads a prebuilt library: the
runtime's own ``_fit.check_fit`` (same arch, same torch major.minor or a stable-ABI build for an
older one, same C++ ABI, the backend of this torch, a CPython the wheel serves).

Standard library only, on purpose: the served script is runtime/_fit.py, publish/index_json.py
and this module, one after the other as the package holds them, less their imports of each other
(publish/select_script.py; tests/publish/test_fit_agreement.py runs it with nothing else). No
``from __future__`` import here, then: the served file's is runtime/_fit.py's, at its top.
"""

import argparse
import json
import os
import platform
import re
import sys
import urllib.request
from pathlib import Path
from typing import NoReturn

from wheelfactory._runtime._fit import (
    FitBuild,
    FitEnv,
    check_fit,
    gpu_part_rank,
    gpu_part_serves,
    normalize_machine,
    parse_major_minor,
)
from wheelfactory.publish.index_json import (
    InvalidListing,
    VersionKey,
    check_listing,
    version_key,
)

DEFAULT_INDEX = "http://127.0.0.1:8000"  # replaced with the index's base URL in the served copy
DESCRIPTION = (
    "Which variant fits this environment: the exact pip command, "
    "or why none fits and what is nearest."
)
# Exit codes, as wheelfactory's table spells them (README "Exit codes"): a wrong --index is bad
# input (2), an environment without torch lacks what the answer needs (9).
EXIT_NO_MATCH = 1
EXIT_BAD_INDEX = 2  # index.json is corrupt or not the shape `wheelfactory index` writes
EXIT_NO_INDEX = 2  # nothing answers at --index, or it holds no index.json
EXIT_NO_TORCH = 9


def _fail(message: str, code: int) -> NoReturn:
    """One line on stderr, then exit ``code`` (SystemExit with a message would exit 1)."""
    print(message, file=sys.stderr)
    raise SystemExit(code)


def detect() -> dict[str, object]:
    """This interpreter's torch, as the runtime sees it."""
    try:
        import torch
    except ImportError:
        _fail(
            "select: torch is not installed in this environment; install torch first "
            "(the kernel wheel is built against it)",
            EXIT_NO_TORCH,
        )
    version = torch.__version__.split("+")[0]
    cuda = getattr(torch.version, "cuda", None)
    hip = getattr(torch.version, "hip", None)
    backend, toolkit = ("cuda", cuda) if cuda else ("rocm", hip) if hip else ("cpu", None)
    return {
        "torch": _major_minor(version),
        "torch_version": version,
        "backend": backend,
        "toolkit": _major_minor(toolkit) if toolkit else None,
        "cxx11_abi": bool(torch.compiled_with_cxx11_abi()),
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "arch": normalize_machine(platform.machine()),
        "gpus": _gpus(torch) if cuda else [],
    }


def _gpus(torch: object) -> list[str]:
    """The compute capabilities ("8.6") of the GPUs this torch sees, as the runtime asks for them
    (runtime/_gpus.visible_gpus); [] where it sees none (no GPU, no driver)."""
    try:
        cuda = torch.cuda  # type: ignore[attr-defined]
        if not cuda.is_available():
            return []
        return sorted({"%d.%d" % cuda.get_device_capability(i) for i in range(cuda.device_count())})
    except Exception:  # noqa: BLE001 (a driver that fails to initialise: no GPU to choose for)
        return []


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
            shown = url if len(url) <= 120 else url[:120] + "..."
            _fail(
                f"select: cannot read {shown}: {exc}; is `wheelfactory serve` (or the index's host) "
                "running there?",
                EXIT_NO_INDEX,
            )
        return _checked(raw, url)
    root = Path(index)
    shown = index if len(index) <= 120 else index[:120] + "..."
    for candidate in (root / "index.json", root / "index" / "index.json"):
        try:
            found = candidate.is_file()
        except OSError as exc:  # a name too long, a permission: one line, as a missing index
            _fail(
                f"select: cannot look for index.json under {shown}: {exc.strerror or exc}",
                EXIT_NO_INDEX,
            )
        if found:
            try:
                data = candidate.read_bytes()
            except OSError as exc:
                _bad_index(str(candidate), f"cannot read it ({exc.strerror or exc})")
            return _checked(data, str(candidate))
    _fail(f"select: no index.json under {shown} (run `wheelfactory index` first)", EXIT_NO_INDEX)


def _checked(raw: bytes, where: str) -> dict[str, object]:
    try:
        return check_listing(raw)
    except InvalidListing as exc:
        _bad_index(where, str(exc))


def _bad_index(where: str, problem: str) -> NoReturn:
    """One line on stderr naming the file (and key), then exit EXIT_BAD_INDEX."""
    print(
        " ".join(f"select: {where}: {problem}; run `wheelfactory index` again".split()),
        file=sys.stderr,
    )
    raise SystemExit(EXIT_BAD_INDEX)


def fit_env(env: dict[str, object]) -> FitEnv:
    """``detect()``'s environment as the runtime's fit rule reads one."""
    toolkit = env.get("toolkit")
    return FitEnv(
        str(env.get("torch_version") or env["torch"]),
        str(env["backend"]),
        str(toolkit) if toolkit else None,
        bool(env["cxx11_abi"]),
        str(env["python"]),
        str(env["arch"]),
        tuple(parse_major_minor(gpu) for gpu in env_gpus(env)),
    )


def fit_build(variant: dict[str, object]) -> FitBuild:
    """An index.json variant as the runtime's fit rule reads a build."""
    toolkit = variant.get("toolkit")
    return FitBuild(
        str(variant["torch"]),
        str(variant["backend"]),
        str(toolkit) if toolkit else None,
        bool(variant["cxx11_abi"]),
        str(variant["python"]),
        str(variant["arch"]),
        bool(variant.get("stable_abi")),
        str(variant.get("id", "")),
        str(variant.get("gpu") or ""),
    )


def mismatches(env: dict[str, object], variant: dict[str, object]) -> list[str]:
    """Why ``variant`` cannot load prebuilt in ``env`` (empty: it can): the runtime's own rule."""
    return list(check_fit(fit_build(variant), fit_env(env)).problems)


def choose(
    env: dict[str, object], variants: list[dict[str, object]]
) -> tuple[dict[str, object] | None, list[tuple[dict[str, object], list[str]]]]:
    """The best matching variant (exact toolkit before an older compatible one, a torch-specific
    build before a stable-ABI one, then the newest release), and every other one with the reasons
    it does not fit, nearest first. A listing has one entry per release of a variant: the others
    name each variant once (its newest release), since every release of it fits or fails alike."""
    scored = [(variant, mismatches(env, variant)) for variant in variants]
    fitting = [v for v, why in scored if not why]

    def preference(
        variant: dict[str, object],
    ) -> tuple[bool, bool, tuple[int, int], tuple[int, int], bool, VersionKey]:
        toolkit = parse_major_minor(str(variant.get("toolkit") or "0.0"))
        return (
            variant["backend"] == env["backend"],
            not variant.get("stable_abi"),
            toolkit,
            gpu_rank(variant),
            variant["python"] != "abi3",
            version_key(str(variant.get("version", ""))),
        )

    best = max(fitting, key=preference) if fitting else None
    newest: dict[str, tuple[dict[str, object], list[str]]] = {}
    for variant, why in scored:
        kept = newest.get(str(variant["id"]))
        if why and (
            kept is None
            or version_key(str(variant.get("version", "")))
            > version_key(str(kept[0].get("version", "")))
        ):
            newest[str(variant["id"])] = (variant, why)
    others = sorted(newest.values(), key=lambda item: (len(item[1]), str(item[0]["id"])))
    return best, others


def env_gpus(env: dict[str, object]) -> list[str]:
    """The compute capabilities ("9.0") an environment is chosen for: its GPUs, or --gpu's."""
    gpus = env.get("gpus")
    return [str(gpu) for gpu in gpus] if isinstance(gpus, list) else []


def gpu_rank(variant: dict[str, object]) -> tuple[int, int]:
    """A listed variant's preference among those serving the GPUs (runtime/_fit.gpu_part_rank)."""
    return gpu_part_rank(str(variant.get("gpu") or ""))


def gpu_reasons(env: dict[str, object], variant: dict[str, object]) -> list[str]:
    """Why a part of a split build serves each GPU of ``env`` (``sm_86 -> sm_80 wheel: ...``)."""
    part = str(variant.get("gpu") or "")
    reasons = (
        [gpu_part_serves(part, parse_major_minor(gpu)) for gpu in env_gpus(env)] if part else []
    )
    return [reason for reason in reasons if reason]


def _sm(capability: object) -> str:
    """``"8.6"`` -> ``"sm_86"``."""
    return "sm_" + str(capability).replace(".", "")


def _parts(variants: list[dict[str, object]]) -> list[str]:
    return sorted(
        {str(v.get("gpu")) for v in variants if v.get("gpu")}, key=lambda p: gpu_rank({"gpu": p})
    )


def describe(env: dict[str, object]) -> str:
    backend = str(env["backend"]) + (f" {env['toolkit']}" if env["toolkit"] else "")
    abi = "cxx11" if env["cxx11_abi"] else "pre-cxx11"
    gpus = env_gpus(env)
    shown = f", GPU {' '.join(_sm(g) for g in gpus)}" if gpus else ""
    return f"torch {env['torch_version']} ({backend}, {abi} ABI), CPython {env['python']}, {env['arch']}{shown}"


def _canonical(name: str) -> str:
    """A project name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="select", description=DESCRIPTION)
    parser.add_argument("--index", default=DEFAULT_INDEX, help="the index's URL or dist directory")
    parser.add_argument(
        "--quiet", "-q", action="store_true", help="print only the --index-url value"
    )
    parser.add_argument("--json", action="store_true", help="print the decision as JSON")
    parser.add_argument("--project", help="the project the index must serve (another's is refused)")
    parser.add_argument(
        "--gpu",
        action="append",
        default=[],
        metavar="M.m",
        help="choose for a GPU of this compute capability (9.0) instead of this machine's; "
        "repeat it for a cluster with several kinds",
    )
    args = parser.parse_args(argv)
    for gpu in args.gpu:
        if not re.fullmatch(r"\d{1,2}\.\d", gpu):
            _fail(
                f"select: --gpu {gpu[:20]!r} is not a compute capability: give it as major.minor, e.g. "
                "--gpu 9.0 (H100), --gpu 8.6 (RTX 30xx)",
                EXIT_BAD_INDEX,
            )
    listing = load_listing(args.index)
    listed = listing.get("variants", [])
    variants = [v for v in listed if isinstance(v, dict)] if isinstance(listed, list) else []
    served = sorted({str(v.get("project")) for v in variants})
    if args.project and _canonical(args.project) not in {_canonical(name) for name in served}:
        shown = args.index if len(args.index) <= 120 else args.index[:120] + "..."
        _fail(
            f"select: the index at {shown} serves {', '.join(served) or 'no project'}, not {args.project}: is "
            "another project's index (or `wheelfactory serve`) there? Name this project's with --index",
            EXIT_NO_INDEX,
        )
    env = detect()
    if args.gpu:
        env["gpus"] = sorted(set(args.gpu), key=parse_major_minor)
    best, others = choose(env, variants)
    parts = _parts(variants)
    if best is not None and best.get("gpu") and not env_gpus(env):
        # every part "fits" a machine whose GPU is not known; which one runs is the GPU's call
        print(
            f"this index splits its CUDA builds by GPU architecture ({', '.join(parts)}) and no GPU is seen "
            f"here ({describe(env)}): name the GPU to install for with --gpu, e.g. --gpu 9.0",
            file=sys.stderr,
        )
        return EXIT_NO_MATCH
    base = args.index.rstrip("/") if args.index.startswith(("http://", "https://")) else None
    if args.json:
        print(
            json.dumps(
                {
                    "environment": env,
                    "variant": best,
                    "why": gpu_reasons(env, best) if best else [],
                    "nearest": [{"id": v["id"], "mismatches": why} for v, why in others[:3]],
                },
                indent=2,
            )
        )
        return 0 if best else EXIT_NO_MATCH
    if best is None:
        print(f"no variant of this index fits {describe(env)}.", file=sys.stderr)
        for variant, why in others[:3]:
            print(f"  nearest: {variant['id']}: {'; '.join(why)}", file=sys.stderr)
        # A wheel of another arch or Python does not install here at all; one of another torch does.
        installable = [
            v
            for v, _ in others
            if v.get("arch") == env["arch"] and v.get("python") in ("abi3", env["python"])
        ]
        gpu_misses = [
            v for v, why in others if v.get("gpu") and all("does not run on" in w for w in why)
        ]
        if gpu_misses:
            unserved = [
                g
                for g in env_gpus(env)
                if not any(
                    gpu_part_serves(str(v.get("gpu")), parse_major_minor(g)) for v in gpu_misses
                )
            ]
            print(
                f"No part of this split build ({', '.join(parts)}) runs on "
                f"{', '.join(_sm(g) for g in unserved) or 'all of these GPUs at once'}"
                f": an arch_list with {' and '.join(str(g) for g in unserved) or 'a PTX arch at or below the oldest'}"
                " in [cuda] would build one that does.",
                file=sys.stderr,
            )
        elif installable:
            print(
                f"Installing {installable[0]['id']} still works: its runtime JIT-compiles the kernels for this "
                "torch (a C++ compiler is needed; CUDA sources need nvcc) or falls back to reference PyTorch ops.",
                file=sys.stderr,
            )
        elif others:
            print(
                f"None of them installs here: they are built for another arch or Python than this "
                f"{env['arch']} CPython {env['python']}.",
                file=sys.stderr,
            )
        return EXIT_NO_MATCH
    index_url = f"{base}/{best['index']}".rstrip("/") if base else str(best["index"])
    if args.quiet:
        print(index_url)
    else:
        print(f"# {describe(env)} -> {best['id']}")
        for reason in gpu_reasons(env, best):
            print(f"# {reason}")
        if best["backend"] != env["backend"]:
            print(
                f"# (no {env['backend']} build of this torch in the index: the CPU build's ops run prebuilt "
                f"on CPU tensors; {env['backend']} tensors use the reference ops)"
            )
        print(f"pip install --index-url {index_url} {best['project']}")
    return 0


EXIT_CLOSED_PIPE = 141  # 128 + SIGPIPE, as a Unix tool whose reader went away
EXIT_WRITE_FAILED = 9  # standard output could not be written (a full disk, /dev/full)


def run() -> int:
    """``main`` with its output's failures said in one line, never a traceback: a reader that
    went away (``| head``) ends it quietly, a full device is one line on stderr."""
    try:
        code = main()
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_CLOSED_PIPE
    except OSError as exc:
        if exc.errno is None or exc.filename is not None:
            raise
        _silence_stdout()
        print(f"select: cannot write standard output: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_WRITE_FAILED


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush at exit fails no more."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(run())
