"""The smoke check of a factory-native kernel wheel, run in the clean test environment (only torch
and the wheel), knowing nothing about the kernel but what its kernel.toml declares.

verify/checks.py sends this file's source to the environment's interpreter with ``main(...)``
appended; only the standard library and torch are imported here. It prints one JSON line:
the load mode and variant, how many ops and samples it checked, and every problem found:

- the package has one ``KernelPackage`` and it loads ``prebuilt`` (checked by the caller);
- the op names agree three ways: kernel.toml, the package's ``KernelPackage``, and what ``_C``
  registers under the variant's namespace; a mismatch names the op;
- every op has a reference implementation (the fallback needs one);
- given sample inputs (kernel.toml ``sample_inputs``), each op is run on clones of each sample's
  arguments next to its reference, and every tensor argument after the call (out and in-place
  ops) and the return values are compared (``torch.testing.assert_close``: its dtype-based
  tolerances, unless a sample is ``{"args": (...), "rtol": r, "atol": a}``).
"""

from __future__ import annotations

import importlib
import json
from typing import Any


def main(request: dict[str, Any]) -> None:
    import torch

    package_name: str = request["package"]
    declared: list[str] = request["ops"]
    problems: list[str] = []
    package = importlib.import_module(package_name)
    runtime = importlib.import_module(f"{package_name}._runtime")
    loaders = [
        value for value in vars(package).values() if isinstance(value, runtime.KernelPackage)
    ]
    if len(loaders) != 1:
        problems.append(
            f"{package_name} defines {len(loaders)} KernelPackage objects at module level, "
            "expected one"
        )
        print(json.dumps({"mode": None, "variant": None, "problems": problems}))
        return
    loader = loaders[0]
    info = loader.backend_info()
    names = tuple(loader.op_names)
    for op in declared:
        if op not in names:
            problems.append(
                f"op {op!r} is in kernel.toml but not among the package's KernelPackage ops"
            )
    for op in names:
        if op not in declared:
            problems.append(
                f"op {op!r} is in the package's KernelPackage ops but not in kernel.toml"
            )

    namespace = info.get("namespace")
    if info.get("mode") == "prebuilt" and isinstance(namespace, str):
        registered = _registered(torch, namespace, declared)
        for op in declared:
            if op not in registered:
                problems.append(
                    f"op {op!r} is in kernel.toml but _C registers no {namespace}::{op}"
                )
        for op in sorted(registered - set(declared)):
            problems.append(f"_C registers {namespace}::{op}, which kernel.toml does not declare")

    reference = loader.reference()
    for op in declared:
        if not callable(getattr(reference, op, None)):
            problems.append(f"op {op!r} has no reference implementation in {reference.__name__}")

    compared = 0
    if request.get("sample_inputs") and not problems:
        module_name, function_name = request["sample_inputs"]
        samples = getattr(importlib.import_module(f"{package_name}.{module_name}"), function_name)()
        if not isinstance(samples, dict):
            problems.append(
                f"{module_name}.{function_name}() returned {type(samples).__name__}, expected "
                "a dict {op name: [argument tuples]}"
            )
            samples = {}
        for op, cases in samples.items():
            if op not in declared:
                problems.append(f"sample inputs name op {op!r}, which kernel.toml does not declare")
                continue
            for number, case in enumerate(cases, start=1):
                # a tuple of arguments, or {"args": (...), "rtol": r, "atol": a} for other tolerances
                args, tolerance = (
                    (case["args"], {k: case[k] for k in ("rtol", "atol") if k in case})
                    if isinstance(case, dict)
                    else (case, {})
                )
                problem = _compare(
                    torch, loader.op(op), getattr(reference, op), tuple(args), tolerance
                )
                compared += 1
                if problem:
                    problems.append(
                        f"op {op!r} sample {number} differs from its reference: {problem}"
                    )
    print(
        json.dumps(
            {
                "mode": info.get("mode"),
                "variant": info.get("variant"),
                "ops": len(declared),
                "samples": compared,
                "problems": problems,
            }
        )
    )


def _registered(torch: Any, namespace: str, declared: list[str]) -> set[str]:
    """The op names ``_C`` registered under ``namespace`` (overload names dropped)."""
    listing = getattr(torch._C, "_dispatch_get_registrations_for_dispatch_key", None)
    if listing is None:  # an older torch: ask for each declared op instead
        space = getattr(torch.ops, namespace)
        return {op for op in declared if _has(space, op)}
    prefix = f"{namespace}::"
    return {name[len(prefix) :].split(".")[0] for name in listing("") if name.startswith(prefix)}


def _has(space: Any, op: str) -> bool:
    try:
        getattr(space, op)
    except (AttributeError, RuntimeError):
        return False
    return True


def _compare(
    torch: Any, kernel: Any, reference: Any, args: tuple[Any, ...], tolerance: dict[str, float]
) -> str:
    def clone(value: Any) -> Any:
        return value.clone() if isinstance(value, torch.Tensor) else value

    ours, theirs = tuple(map(clone, args)), tuple(map(clone, args))
    try:
        got = kernel(*ours)
        expected = reference(*theirs)
        if got is not None or expected is not None:  # out and in-place ops return nothing
            torch.testing.assert_close(got, expected, **tolerance)
        for position, (a, b) in enumerate(zip(ours, theirs)):
            if isinstance(a, torch.Tensor):
                try:
                    torch.testing.assert_close(a, b, **tolerance)
                except AssertionError as exc:
                    raise AssertionError(f"argument {position} after the call: {exc}") from None
    except Exception as exc:  # noqa: BLE001 (any failure is the verdict, reported as one line)
        return " ".join(str(exc).split())[:300] or type(exc).__name__
    return ""
