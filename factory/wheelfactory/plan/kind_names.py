"""The project kinds' names, one home: each kind's name, and what matrix.toml's ``[project] kind``
may say and which kinds each value asks for. The kinds themselves (how each reads, plans and stages
its project) are the table in project/kinds.py; their names are here because the matrix parser
checks them (plan/matrix.py) and planning imports nothing from project/.
"""

from __future__ import annotations

from typing import Literal

# One name per kind: the CLI, the manifest and provenance ``project_kind``, the code and the README.
KindName = Literal["native", "kernel-builder", "kernel-builder-noarch", "bring-your-own"]
NATIVE: KindName = "native"
KERNEL_BUILDER: KindName = "kernel-builder"
KERNEL_BUILDER_NOARCH: KindName = "kernel-builder-noarch"
BRING_YOUR_OWN: KindName = "bring-your-own"

AUTO = "auto"  # the first kind whose project is there, in the table's order
OLD_SPELLINGS = {"setuptools": BRING_YOUR_OWN}  # accepted in matrix.toml, never suggested
# [project] kind: each value and the kinds it asks for, the first whose project is there taken
# ("kernel-builder": the noarch kind where build.toml compiles nothing).
REQUESTS: dict[str, tuple[KindName, ...]] = {
    NATIVE: (NATIVE,),
    KERNEL_BUILDER: (KERNEL_BUILDER_NOARCH, KERNEL_BUILDER),
    BRING_YOUR_OWN: (BRING_YOUR_OWN,),
    **{old: (kind,) for old, kind in OLD_SPELLINGS.items()},
}
PROJECT_KINDS = (AUTO, *(value for value in REQUESTS if value not in OLD_SPELLINGS))
OLD_PROJECT_KINDS = tuple(OLD_SPELLINGS)
