"""``KernelPackage``: the runtime side of one kernel package, what its ``__init__`` creates.

The top of the runtime's layers. Its first op call goes through the lean check (``_prebuilt``);
the full loader (``_loader``), the settings layer and the error types load only where that check
does not load the library, or when ``backend_info()`` asks: a prebuilt load compiles this module
and ``_prebuilt`` and no other of the runtime. ``backend_info()`` asks the full rule when called,
so it reports what it did.
"""

from __future__ import annotations

import importlib
import os
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from ._prebuilt import Loaded, declared_ops, load_prebuilt

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from types import ModuleType

    from ._prebuilt import OpCallable
    from ._settings import Settings

__all__ = ["KernelPackage"]


class KernelPackage:
    """The runtime side of one kernel package: a lazy, once-only, thread-safe loader.

    Constructing one does no I/O. The first op call (or ``backend_info()``) loads the prebuilt
    library through the lean check, or else leaves it to the full loader (``_loader.load_full``).
    """

    def __init__(
        self,
        name: str,
        package_dir: str | Path,
        ops: Sequence[str] | None = None,
        *,
        reference_module: str = "_reference",
        environ: Mapping[str, str] | None = None,
        module: str | None = None,
    ) -> None:
        # ``name`` is the distribution's ("mykernels": MYKERNELS_LOAD, ~/.cache/mykernels);
        # ``module`` is where it was imported (another name under Hugging Face's kernels loader).
        self.name = name
        self.package_dir = Path(package_dir)
        self._op_names = None if ops is None else tuple(ops)
        self._reference_name = f"{module or name}.{reference_module}"
        self._environ = environ
        self._lock = threading.Lock()
        self._loaded: Loaded | None = None

    @property
    def op_names(self) -> tuple[str, ...]:
        """The ops given to the constructor, else the ones kernel.toml declares: the build
        record's ``ops`` (the JIT spec's in a package without a prebuilt library)."""
        if self._op_names is None:
            self._op_names = declared_ops(self.package_dir)
        return self._op_names

    def settings(self) -> Settings:
        # Here, as the full loader and the error types below: a prebuilt load imports none of them.
        from ._settings import read_settings

        return read_settings(self.name, self._environ)

    def reference(self) -> ModuleType:
        return importlib.import_module(self._reference_name)

    def op(self, name: str) -> OpCallable:
        """The callable for op ``name``: a torch.ops overload or the reference function."""
        try:
            return self._ensure_loaded().ops[name]
        except KeyError:
            raise AttributeError(
                f"{self.name} has no op {name!r} (ops: {', '.join(self.op_names)})"
            ) from None

    def backend_info(self) -> dict[str, object]:
        """``{"mode", "variant", "library", "reason", "ops", "decisions", ...}`` (``_loader``)."""
        from ._loader import backend_info  # the full rule reports, after a lean load too

        return backend_info(self, self._ensure_loaded())

    def _ensure_loaded(self) -> Loaded:
        loaded = self._loaded
        if loaded is None:
            with self._lock:
                loaded = self._loaded
                if loaded is None:
                    loaded = self._load_prebuilt()
                    if loaded is None:
                        from ._loader import load_full  # only where the lean check did not load

                        loaded = load_full(self)
                    self._loaded = loaded
                    if loaded.warning:  # once per process: the load itself happens once
                        from ._errors import ReferenceFallbackWarning  # a fallback only

                        warnings.warn(loaded.warning, ReferenceFallbackWarning, stacklevel=4)
        return loaded

    def _load_prebuilt(self) -> Loaded | None:
        return load_prebuilt(self, os.environ if self._environ is None else self._environ)
