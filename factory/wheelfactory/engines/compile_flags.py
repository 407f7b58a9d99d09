"""Compiler flags every engine adds to a build's environment, whatever the project's build system.

Debug info. setuptools compiles with the flags the interpreter was built with (sysconfig's
CFLAGS: ``-g`` in CPython's own builds, manylinux's and Debian's alike), so a torch extension's
objects carry full DWARF for every torch header they include: a translation unit of
``<torch/extension.h>`` compiles about a third slower and its object grows from ~0.3 MB to ~16 MB
(benchmarks/debug_info.py). Released wheels ship without it, as torch's own do, unless
``[build] debug_info = true``. The ``-g0`` goes into CPPFLAGS, which setuptools appends after
Python's flags (CFLAGS from the environment *replaces* them in today's setuptools, so it must not
go there) and torch's ninja build copies; a project's own ``-g`` in its ``extra_compile_args``
comes later and still wins. CMake and Meson ignore CPPFLAGS or add no ``-g`` in their release
build types: their projects are left as their authors set them.
"""

from __future__ import annotations

from collections.abc import Mapping

from wheelfactory.plan.identity import Variant

NO_DEBUG_INFO = "-g0"


def with_compile_flags(variant: Variant, env: Mapping[str, str]) -> dict[str, str]:
    """``env`` (the build's variables, the project's and the matrix's included) with the factory's
    flags appended: after whatever CPPFLAGS the project set, so both apply."""
    merged = dict(env)
    if not variant.settings.debug_info:
        merged["CPPFLAGS"] = f"{merged.get('CPPFLAGS', '')} {NO_DEBUG_INFO}".strip()
    return merged
