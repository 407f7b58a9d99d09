"""The index's ``select.py``: the selector (publish/select.py) as one standard-library file.

The file is the modules the selector needs, in the order they need each other, each read as the
package holds it (``importlib.resources``): the runtime's fit rule (runtime/_fit.py), the listing's
shape (publish/index_json.py), the selector. Left out of each are only its imports of the ones
above it (``from wheelfactory.... import``), whose names are then defined in the same file;
``DEFAULT_INDEX`` names the index's base URL. Nothing is parsed: the modules are written to be
read so (standard library only; no ``from __future__`` but the first module's).
"""

from __future__ import annotations

import re
from importlib import resources

from wheelfactory.errors import IndexBuildError
from wheelfactory.publish import select

# (package, module file): each may import from the ones above it, and from the standard library
MODULES = (
    ("wheelfactory._runtime", "_fit.py"),
    ("wheelfactory.publish", "index_json.py"),
    ("wheelfactory.publish", "select.py"),
)
DEFAULT_BASE_URL = select.DEFAULT_INDEX  # the URL `serve` binds unless told
_DEFAULT_LINE = f'DEFAULT_INDEX = "{DEFAULT_BASE_URL}"'
# a top-level import from the package, on one line or in parentheses
_OWN_IMPORT = re.compile(r"^from wheelfactory\.[\w.]+ import (?:\([^)]*\)|[^\n]*)\n", re.M)
_ANY_OWN_IMPORT = re.compile(r"^\s*(?:from|import) wheelfactory\b", re.M)


def select_script(base_url: str) -> str:
    """select.py for the index at ``base_url``: the selector's modules, one after the other."""
    parts = []
    for package, name in MODULES:
        source = resources.files(package).joinpath(name).read_text(encoding="utf-8")
        shown = f"{package.removeprefix('wheelfactory.')}/{name}"
        parts.append(f"# ---- {shown} ----\n{_OWN_IMPORT.sub('', source)}")
    script = "\n\n".join(parts)
    if script.count(_DEFAULT_LINE) != 1 or _ANY_OWN_IMPORT.search(script):
        raise IndexBuildError(
            f"select.py cannot be made: publish/select.py must say {_DEFAULT_LINE} once, and "
            "its modules import nothing of the package but each other at their top"
        )
    return script.replace(_DEFAULT_LINE, f"DEFAULT_INDEX = {base_url!r}", 1)
