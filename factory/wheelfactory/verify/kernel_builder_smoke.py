"""The smoke check of a kernel-builder wheel, run in the clean test environment (only torch and the
wheel): what the Hub loader relies on, checked without knowing any op of the kernel.

verify/checks.py sends this file's source to the environment's interpreter with ``main(...)``
appended; only the standard library and torch are imported here. It prints one JSON line:

- the package imports (its ``__init__`` imports ``_ops``, which imports the compiled library);
- ``_ops.ops`` is the op namespace of this build (``torch.ops.<namespace>``), and
  ``add_op_namespace_prefix`` names that namespace;
- the library registers at least one op with a kernel that serves the variant's device under
  that namespace: one for the device's key (CPU for a CPU build, CUDA for CUDA and ROCm builds),
  or for a composite key, which serves every device (Hub kernels register
  ``c10::DispatchKey::CompositeExplicitAutograd`` and branch on the device inside, or use
  ``ops.impl`` without a key); the names are listed with the key each one has.
"""

from __future__ import annotations

import importlib
import json
from typing import Any


def main(request: dict[str, Any]) -> None:
    import torch

    package_name: str = request["package"]
    namespace: str = request["namespace"]
    key: str = request["dispatch_key"]
    problems: list[str] = []
    importlib.import_module(package_name)
    ops_module = importlib.import_module(f"{package_name}._ops")
    ops = getattr(ops_module, "ops", None)
    if getattr(ops, "name", None) not in (namespace, f"torch.ops.{namespace}"):
        problems.append(f"{package_name}._ops.ops is {ops!r}, expected torch.ops.{namespace}")
    prefix = getattr(ops_module, "add_op_namespace_prefix", None)
    if prefix is None or prefix("x") != f"{namespace}::x":
        problems.append(
            f"{package_name}._ops.add_op_namespace_prefix does not prefix {namespace}::"
        )
    served: dict[str, str] = {}  # op -> the first key (in this order) that serves the device
    for candidate in (key, "CompositeExplicitAutograd", "CompositeImplicitAutograd"):
        for name in torch._C._dispatch_get_registrations_for_dispatch_key(candidate):
            if name.startswith(namespace + "::"):
                served.setdefault(name.split("::", 1)[1].split(".", 1)[0], candidate)
    registered = sorted(served)
    if not registered:
        problems.append(
            f"the library registers no op with a {key} kernel, nor a composite one that serves "
            f"{key}, under {namespace}"
        )
    print(
        json.dumps(
            {
                "mode": "imported",
                "variant": None,
                "module": package_name,
                "namespace": namespace,
                "dispatch_key": key,
                "ops": registered,
                "keys": served,
                "problems": problems,
            }
        )
    )
