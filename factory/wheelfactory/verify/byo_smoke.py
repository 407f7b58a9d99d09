"""The smoke test of a bring-your-own wheel: import the package, then every compiled module the
wheel holds, with only torch and the wheel installed.

A project may ship several extension modules (``pkg._ops_a``, ``pkg._ops_b``; torch_scatter ships
one per op and device) and import only some of them in its ``__init__`` (the rest lazily, or by
the user): importing the package alone would miss an undefined symbol in the others. A compiled
library that is not a Python module (no ``PyInit_``: an op library meant for
``torch.ops.load_library``) is loaded that way instead. Libraries auditwheel grafted
(``<pkg>.libs/``) are dependencies, loaded by the modules that need them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

# <dotted path>.<ABI tag>.so as CPython names extension modules: .cpython-311-x86_64-linux-gnu.so,
# .abi3.so, or plain .so.
_MODULE = re.compile(
    r"^(?P<path>[A-Za-z_][A-Za-z0-9_]*(?:/[A-Za-z_][A-Za-z0-9_]*)*)"
    r"(?P<tag>\.(?:cpython-[0-9a-z_-]+|abi3))?\.so$",
    re.ASCII,
)


def extension_modules(names: Iterable[str]) -> tuple[str, ...]:
    """The dotted names of the compiled modules among a wheel's file names, sorted: package
    members only (nothing under ``*.libs/``, ``*.data/`` or ``*.dist-info/``, no untagged
    ``lib*.so`` helper that another module links against)."""
    found = set()
    for name in names:
        if name.split("/", 1)[0].endswith((".libs", ".data", ".dist-info")):
            continue
        m = _MODULE.match(name)
        if m and (m.group("tag") or not name.rsplit("/", 1)[-1].startswith("lib")):
            found.add(m.group("path").replace("/", "."))
    return tuple(sorted(found))


SMOKE = r"""
import importlib, importlib.util, json, torch
package = importlib.import_module(REQUEST["package"])
loaded = {}
for name in REQUEST["modules"]:
    try:
        importlib.import_module(name)
        loaded[name] = "imported"
    except ImportError as exc:
        if "module export function" not in str(exc):
            raise
        torch.ops.load_library(importlib.util.find_spec(name).origin)
        loaded[name] = "load_library"
print(json.dumps({"mode": "imported", "variant": None, "module": package.__name__, "extensions": loaded}))
"""


def smoke_code(package: str, modules: Iterable[str]) -> str:
    """Python code that imports ``package`` and then each of ``modules`` (see the module docstring);
    its last line of output is JSON: ``{"mode": "imported", ..., "extensions": {name: how}}``."""
    request = {"package": package, "modules": list(modules)}
    return f"REQUEST = {json.dumps(request)}\n{SMOKE}"
