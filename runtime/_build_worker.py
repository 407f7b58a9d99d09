"""Compile one JIT build with torch.utils.cpp_extension, in a child process.

Run as a script (``python _build_worker.py <request.json>``), so it has no package imports: the
parent holds the cache lock and publishes the result; this child only compiles into the private
build directory it was given. Building in a child keeps the parent from dlopen()ing a library
from a temp path, and loading it here (``is_python_module=False`` calls torch.ops.load_library)
proves the result has no undefined symbols before anyone publishes it.
"""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: _build_worker.py REQUEST.json", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as handle:
        request = json.load(handle)
    import torch.utils.cpp_extension as cpp_extension

    try:
        library = cpp_extension.load(
            name=request["name"],
            sources=request["sources"],
            extra_cflags=request["cxx_flags"],
            extra_cuda_cflags=request["cuda_flags"],
            extra_include_paths=request["include_dirs"],
            build_directory=request["build_directory"],
            with_cuda=request["with_cuda"],
            is_python_module=False,
            verbose=True,
        )
    except Exception as exc:  # the compiler's own messages are above in the log; no traceback noise
        print(f"error: {type(exc).__name__}: {exc}", flush=True)
        return 1
    print(f"built {library}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
