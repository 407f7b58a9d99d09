"""The full loader: what a kernel package's first op call runs when the lean check does not load.

``KernelPackage`` (``_package``) loads a prebuilt library that fits through the lean check
(``_prebuilt``); every other case comes here, to ``load_full`` and ``load_package``:

    prebuilt  the build record is checked against the environment BEFORE dlopen
    jit       the shipped sources, through the hashed cache (``_jit``)
    reference the package's ``_reference`` module, with one ``ReferenceFallbackWarning``

``<PKG>_LOAD=prebuilt|jit`` forbid falling further and raise ``KernelLoadError`` with the
decision record; ``reference`` goes straight to the reference ops. In ``auto`` mode nothing
escapes: any failure becomes a rejected decision and the next candidate is tried.
``backend_info`` reports either; after a lean load ``prebuilt_result`` makes its ``LoadResult``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from ._decision import Decision, format_decisions
from ._env import Environment, detect_environment, with_gpus
from ._errors import JitUnavailable, KernelLoadError, RuntimeLoaderError
from ._prebuilt import Loaded, bind_ops, reference_ops
from ._record import (
    BuildRecord,
    RecordUnavailable,
    build_record_from_text,
    decide_prebuilt,
    read_build_record,
)
from ._settings import Settings

if TYPE_CHECKING:
    from ._jit import JitResult
    from ._package import KernelPackage
    from ._prebuilt import OpCallable

__all__ = [
    "LoadResult",
    "backend_info",
    "load_full",
    "load_package",
    "prebuilt_result",
]

logger = logging.getLogger(__name__)


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


def _fallback_text(
    package: str, settings: Settings, decisions: Sequence[Decision], fix: str
) -> str:
    why = "; ".join(str(d) for d in decisions if not d.accepted)
    how = f" To fix: {fix}." if fix else ""
    return (
        f"{package}: falling back to the slow reference PyTorch ops ({why}).{how} Installing the wheel "
        f"built for this torch also fixes it. Set {settings.load_var}=reference to choose the reference "
        f"ops and silence this warning."
    )


def _with_gpus_for(env: Environment, record: BuildRecord | RecordUnavailable) -> Environment:
    if (
        isinstance(record, BuildRecord)
        and record.backend != "cpu"
        and record.backend == env.backend
    ):
        return with_gpus(env)  # the arch check needs the present GPUs
    return env


def _prebuilt_loaded(
    package: str,
    settings: Settings,
    decisions: Sequence[Decision],
    record: BuildRecord,
    library: Path,
    env: Environment,
    warning: str | None = None,
) -> LoadResult:
    return LoadResult(
        mode="prebuilt",
        reason=str(decisions[-1]),
        decisions=tuple(decisions),
        variant=record.variant,
        library=str(library),
        namespace=record.namespace,
        version=record.version,
        installed_variant=record.variant,
        library_backend=record.backend,
        environment=env.summary(),
        package=package,
        cache_dir=str(settings.cache_dir),
        warning=warning,
    )


def load_package(
    package: str, package_dir: Path, ops: Sequence[str], settings: Settings
) -> LoadResult:
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
        env = _with_gpus_for(env, record)
        decision = decide_prebuilt(env, record)
        decisions.append(decision)
        if decision.accepted:
            assert isinstance(record, BuildRecord)
            library = package_dir / record.library
            try:
                torch.ops.load_library(str(library))  # type: ignore[no-untyped-call]
                return _prebuilt_loaded(package, settings, decisions, record, library, env)
            # dlopen or op registration failed despite the record
            except (OSError, RuntimeError) as exc:
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
    # auto mode must not crash on the first op call: record it and fall back
    except Exception as exc:
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


def load_full(package: KernelPackage) -> Loaded:
    """The load the lean check left to us: ``load_package``, auto mode's safety net, the ops."""
    settings = package.settings()
    try:
        result = load_package(package.name, package.package_dir, package.op_names, settings)
    except KernelLoadError:
        raise
    except Exception as exc:
        if settings.load_mode != "auto":
            raise
        # The one safety net of auto mode: a bug or an odd environment must not break the
        # user's first op call. It is recorded and warned about, never silent.
        logger.debug("loading %s failed", package.name, exc_info=True)
        decisions = (
            Decision("prebuilt", False, f"unexpected {type(exc).__name__}: {exc}"),
            Decision("reference", True, "fallback: the reference PyTorch ops"),
        )
        result = LoadResult(
            package=package.name,
            mode="reference",
            reason=str(decisions[0]),
            decisions=decisions,
            cache_dir=str(settings.cache_dir),
            warning=_fallback_text(package.name, settings, decisions, ""),
        )
    if result.mode == "reference":
        modes = dict.fromkeys(package.op_names, "reference")
        return Loaded(reference_ops(package, package.op_names), modes, result.warning, result)
    assert result.namespace is not None and result.library is not None
    loaded = bind_ops(package, result.mode, result.library, result.namespace)
    if result.library_backend == "cpu" and (
        result.environment.get("cuda") or result.environment.get("hip")
    ):
        references = reference_ops(package, package.op_names)
        loaded.ops = {
            op: kernel
            if loaded.op_modes[op] == "reference"
            else _cpu_or_reference(kernel, references[op])
            for op, kernel in loaded.ops.items()
        }
    result = result if loaded.warning is None else _replace_warning(result, loaded.warning)
    loaded.warning, loaded.result = result.warning, result
    return loaded


def prebuilt_result(package: KernelPackage, record_text: str, warning: str | None) -> LoadResult:
    """The ``LoadResult`` of a library the lean check loaded, as ``load_package`` makes it: the
    full rule decides again on the same record, and gives the reason in its words."""
    settings = package.settings()
    record = build_record_from_text(package.package_dir, record_text)
    env = _with_gpus_for(detect_environment(), record)
    decision = decide_prebuilt(env, record)
    if not (decision.accepted and isinstance(record, BuildRecord)):
        raise RuntimeLoaderError(
            f"{package.name}: the lean prebuilt check loaded this package's library but the full rule "
            f"rejects it ({decision.reason}): a bug in the runtime, please report it"
        )
    return _prebuilt_loaded(
        package.name,
        settings,
        [decision],
        record,
        package.package_dir / record.library,
        env,
        warning,
    )


def backend_info(package: KernelPackage, loaded: Loaded) -> dict[str, object]:
    """``KernelPackage.backend_info()``: the ``LoadResult`` as a dict, with each op's mode."""
    if isinstance(loaded.result, str):  # a lean load: the full rule gives the reasons now
        loaded.result = prebuilt_result(package, loaded.result, loaded.warning)
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
