"""``KernelPackage``: the lazy, once-only, thread-safe loader a kernel package's ``__init__`` uses.

Constructing one does no I/O. The first op call (or ``backend_info()``) runs ``load_package``:

    prebuilt  the build record is checked against the environment BEFORE dlopen
    jit       the shipped sources, through the hashed cache (``_jit``)
    reference the package's ``_reference`` module, with one ``ReferenceFallbackWarning``

``<PKG>_LOAD=prebuilt|jit`` forbid falling further and raise ``KernelLoadError`` with the
decision record; ``reference`` goes straight to the reference ops. In ``auto`` mode nothing
escapes: any failure becomes a rejected decision and the next candidate is tried.
"""

from __future__ import annotations

import importlib
import logging
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple

from ._decision import Decision, format_decisions
from ._env import Environment, detect_environment, with_gpus
from ._errors import JitUnavailable, KernelLoadError, ReferenceFallbackWarning
from ._record import BuildRecord, decide_prebuilt, read_build_record
from ._settings import Settings, read_settings

if TYPE_CHECKING:
    from ._jit import JitResult

__all__ = ["KernelPackage", "LoadResult", "load_package"]

logger = logging.getLogger(__name__)

OpCallable = Callable[..., Any]


class LoadResult(NamedTuple):
    """What was loaded and why: ``backend_info()`` is this, as a dict."""

    package: str
    mode: str  # "prebuilt" | "jit" | "reference"
    reason: str
    decisions: tuple[Decision, ...]
    variant: str | None = None
    library: str | None = None
    namespace: str | None = None
    version: str | None = None
    installed_variant: str | None = None
    library_backend: str | None = None  # "cpu" | "cuda" | "rocm": devices the library serves
    jit: Mapping[str, object] | None = None
    environment: Mapping[str, object] = MappingProxyType({})
    cache_dir: str | None = None
    warning: str | None = None  # the fallback warning to emit, if any


def _bind_library_ops(namespace: str, ops: Sequence[str]) -> tuple[dict[str, OpCallable], list[str]]:
    import torch

    found: dict[str, OpCallable] = {}
    missing: list[str] = []
    library_ns = getattr(torch.ops, namespace)
    for op in ops:
        try:
            packet = getattr(library_ns, op)
            found[op] = packet.default  # the overload itself skips the packet's overload lookup
        except (AttributeError, RuntimeError):
            missing.append(op)
    return found, missing


def _fallback_text(package: str, settings: Settings, decisions: Sequence[Decision], fix: str) -> str:
    why = "; ".join(str(d) for d in decisions if not d.accepted)
    how = f" To fix: {fix}." if fix else ""
    return (
        f"{package}: falling back to the slow reference PyTorch ops ({why}).{how} Installing the wheel "
        f"built for this torch also fixes it. Set {settings.load_var}=reference to choose the reference "
        f"ops and silence this warning."
    )


def load_package(package: str, package_dir: Path, ops: Sequence[str], settings: Settings) -> LoadResult:
    """Decide and load (dlopen) the best backend; returns which, with the decision record."""
    import torch

    decisions: list[Decision] = []
    mode = settings.load_mode
    cache_dir = str(settings.cache_dir)
    if mode == "reference":
        decisions.append(Decision("reference", True, f"{settings.load_var}=reference"))
        return LoadResult(
            mode="reference",
            reason=str(decisions[-1]),
            decisions=tuple(decisions),
            package=package,
            cache_dir=cache_dir,
        )

    env: Environment = detect_environment()
    record = read_build_record(package_dir)
    installed = record.variant if isinstance(record, BuildRecord) else None
    version = record.version if isinstance(record, BuildRecord) else None

    def failed(candidate: str) -> KernelLoadError:
        return KernelLoadError(
            f"{package}: {settings.load_var}={mode} cannot be satisfied ({candidate} unavailable).\n"
            f"Decision record:\n{format_decisions(decisions)}"
        )

    if mode in ("auto", "prebuilt"):
        if isinstance(record, BuildRecord) and record.backend != "cpu" and record.backend == env.backend:
            env = with_gpus(env)  # the arch check needs the present GPUs
        decision = decide_prebuilt(env, record)
        decisions.append(decision)
        if decision.accepted:
            assert isinstance(record, BuildRecord)
            library = package_dir / record.library
            try:
                torch.ops.load_library(str(library))  # type: ignore[no-untyped-call]
                return LoadResult(
                    mode="prebuilt",
                    reason=str(decision),
                    decisions=tuple(decisions),
                    variant=record.variant,
                    library=str(library),
                    namespace=record.namespace,
                    version=version,
                    installed_variant=installed,
                    library_backend=record.backend,
                    environment=env.summary(),
                    package=package,
                    cache_dir=cache_dir,
                )
            except (OSError, RuntimeError) as exc:  # dlopen or op registration failed despite the record
                decisions.append(Decision("prebuilt", False, f"loading {library} failed: {exc}"))
        if mode == "prebuilt":
            raise failed("prebuilt")
    else:
        decisions.append(Decision("prebuilt", False, f"skipped: {settings.load_var}=jit"))

    fix = ""
    try:
        # Imported here: a prebuilt load never needs the JIT machinery (its import is part of the
        # measured first-call latency).
        from ._jit import ensure_jit_library

        record_archs = (
            record.arch_list if isinstance(record, BuildRecord) and record.backend == "cuda" else ()
        )
        jit: JitResult = ensure_jit_library(package, package_dir, env, settings, record_archs)
        decisions.append(jit.decision)
        torch.ops.load_library(str(jit.library))  # type: ignore[no-untyped-call]
        jit_info = {
            "key": jit.key,
            "entry": str(jit.entry),
            "cache": jit.cache,
            "lock_wait_seconds": jit.lock_wait_seconds,
            "build_seconds": jit.build_seconds,
        }
        return LoadResult(
            mode="jit",
            reason="; ".join(str(d) for d in decisions),
            decisions=tuple(decisions),
            variant=jit.key,
            library=str(jit.library),
            namespace=jit.namespace,
            version=version or jit.version,
            installed_variant=installed,
            library_backend=env.backend,
            jit=jit_info,
            environment=env.summary(),
            package=package,
            cache_dir=cache_dir,
        )
    except JitUnavailable as exc:
        decisions.append(Decision("jit", False, exc.reason))
        fix = exc.fix
    except Exception as exc:  # auto mode must not crash on the first op call: record it and fall back
        if mode == "jit":
            decisions.append(Decision("jit", False, f"unexpected {type(exc).__name__}: {exc}"))
            raise failed("jit") from exc
        logger.debug("JIT load failed", exc_info=True)
        decisions.append(Decision("jit", False, f"unexpected {type(exc).__name__}: {exc}"))
    if mode == "jit":
        raise failed("jit")

    decisions.append(Decision("reference", True, "fallback: the reference PyTorch ops"))
    text = _fallback_text(package, settings, decisions, fix)
    return LoadResult(
        mode="reference",
        reason="; ".join(str(d) for d in decisions[:-1]),
        decisions=tuple(decisions),
        version=version,
        installed_variant=installed,
        environment=env.summary(),
        warning=text,
        package=package,
        cache_dir=cache_dir,
    )


class _Loaded(NamedTuple):
    result: LoadResult
    ops: Mapping[str, OpCallable]
    op_modes: Mapping[str, str]


class KernelPackage:
    """The runtime side of one kernel package; see the module docstring."""

    def __init__(
        self,
        name: str,
        package_dir: str | Path,
        ops: Sequence[str],
        *,
        reference_module: str = "_reference",
        environ: Mapping[str, str] | None = None,
        module: str | None = None,
    ) -> None:
        # No I/O here: importing the kernel package must stay cheap and side-effect free.
        # ``name`` is the distribution's ("fusedops": FUSEDOPS_LOAD, ~/.cache/fusedops);
        # ``module`` is where it was imported (another name under Hugging Face's kernels loader,
        # which imports each build under its op namespace).
        self.name = name
        self.package_dir = Path(package_dir)
        self.op_names = tuple(ops)
        self._reference_name = f"{module or name}.{reference_module}"
        self._environ = environ
        self._lock = threading.Lock()
        self._loaded: _Loaded | None = None

    def settings(self) -> Settings:
        return read_settings(self.name, self._environ)

    def reference(self) -> ModuleType:
        return importlib.import_module(self._reference_name)

    def _load(self) -> _Loaded:
        settings = self.settings()
        try:
            result = load_package(self.name, self.package_dir, self.op_names, settings)
        except KernelLoadError:
            raise
        except Exception as exc:
            if settings.load_mode != "auto":
                raise
            # The one safety net of auto mode: a bug or an odd environment must not break the
            # user's first op call. It is recorded and warned about, never silent.
            logger.debug("loading %s failed", self.name, exc_info=True)
            decisions = (
                Decision("prebuilt", False, f"unexpected {type(exc).__name__}: {exc}"),
                Decision("reference", True, "fallback: the reference PyTorch ops"),
            )
            result = LoadResult(
                package=self.name,
                mode="reference",
                reason=str(decisions[0]),
                decisions=decisions,
                cache_dir=str(settings.cache_dir),
                warning=_fallback_text(self.name, settings, decisions, ""),
            )
        if result.mode == "reference":
            return _Loaded(
                result, self._reference_ops(self.op_names), {op: "reference" for op in self.op_names}
            )
        assert result.namespace is not None
        found, missing = _bind_library_ops(result.namespace, self.op_names)
        modes = {op: result.mode if op in found else "reference" for op in self.op_names}
        ops: dict[str, OpCallable] = dict(self._reference_ops(missing))
        gpu_torch = result.environment.get("cuda") or result.environment.get("hip")
        for op, kernel in found.items():
            if result.library_backend == "cpu" and gpu_torch:
                ops[op] = _cpu_or_reference(kernel, self._reference_op(op))
            else:
                ops[op] = kernel
        if missing:
            text = (
                f"{self.name}: the {result.mode} library {result.library} lacks ops {missing}: "
                "they use the reference ops"
            )
            result = _replace_warning(result, text)
        return _Loaded(result, ops, modes)

    def _reference_op(self, op: str) -> OpCallable:
        def call(*args: Any, **kwargs: Any) -> Any:
            return getattr(self.reference(), op)(*args, **kwargs)

        return call

    def _reference_ops(self, names: Sequence[str]) -> dict[str, OpCallable]:
        return {op: self._reference_op(op) for op in names}

    def _ensure_loaded(self) -> _Loaded:
        loaded = self._loaded
        if loaded is None:
            with self._lock:
                loaded = self._loaded
                if loaded is None:
                    loaded = self._load()
                    self._loaded = loaded
                    if loaded.result.warning:
                        # Once per process: the load itself happens once.
                        warnings.warn(loaded.result.warning, ReferenceFallbackWarning, stacklevel=4)
        return loaded

    def op(self, name: str) -> OpCallable:
        """The callable for op ``name``: a torch.ops overload or the reference function."""
        try:
            return self._ensure_loaded().ops[name]
        except KeyError:
            raise AttributeError(
                f"{self.name} has no op {name!r} (ops: {', '.join(self.op_names)})"
            ) from None

    def backend_info(self) -> dict[str, object]:
        loaded = self._ensure_loaded()
        r = loaded.result
        return {
            "package": r.package,
            "version": r.version,
            "mode": r.mode,
            "variant": r.variant,
            "installed_variant": r.installed_variant,
            "library": r.library,
            "namespace": r.namespace,
            "reason": r.reason,
            "ops": dict(loaded.op_modes),
            "decisions": [d.as_dict() for d in r.decisions],
            "jit": None if r.jit is None else dict(r.jit),
            "cache_dir": r.cache_dir,
            "environment": dict(r.environment),
        }


def _replace_warning(result: LoadResult, text: str) -> LoadResult:
    return result._replace(warning=text if not result.warning else f"{result.warning}\n{text}")


def _cpu_or_reference(kernel: OpCallable, reference: OpCallable) -> OpCallable:
    """A CPU-only library in a GPU torch: GPU tensors go to the reference ops."""

    def call(*args: Any) -> Any:
        for arg in args:
            device = getattr(arg, "device", None)
            if device is not None:
                return kernel(*args) if device.type == "cpu" else reference(*args)
        return kernel(*args)

    return call
