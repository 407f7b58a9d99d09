"""The matrix run: for each selected variant, skip it when its key is already built, otherwise
build it with the engine, and record the result. One failing variant never stops the others;
a wheel enters the output directory only when complete (support/atomic.py: a temp name, then a
rename), and the variants' threads record their results through one ManifestRecorder."""

from __future__ import annotations

import functools
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from wheelfactory import __version__
from wheelfactory.engines import BuildResult, Engine, EngineIdentity
from wheelfactory.errors import Findings, VariantBuildError, WheelfactoryError
from wheelfactory.plan.build_config import BuildConfig
from wheelfactory.project.keys import file_sha256, git_state, json_digest, python_files, tree_digest
from wheelfactory.project.stage import Staged, Target
from wheelfactory.runner import manifest
from wheelfactory.runner.cancel import CANCEL, KILL_AFTER_S, stop_descendants
from wheelfactory.runner.provenance import BuiltWheel, provenance_path, write_provenance
from wheelfactory.support import atomic
from wheelfactory.support.outputs import FILE, FOLDER, check_output_entries
from wheelfactory.support.proc import CommandFailed, tail_of
from wheelfactory.support.progress import Listener, VariantPhase, ignore
from wheelfactory.support.resources import runtime_dir
from wheelfactory.support.timeline import Timeline
from wheelfactory.verify.strip import DEBUG_DIR
from wheelfactory.verify.wheel_size import over_limit

WORK_DIR = ".work"
LOG_NAME = "build.log"
T = TypeVar("T", bound=Target)  # what a run builds: the plan's variants, or pure-Python builds
S = TypeVar("S", bound=Staged)  # how one is staged, as its engine builds it


@dataclass(frozen=True)
class Outcome:
    variant: Target  # a compiled variant, or a pure-Python build (project/noarch.py)
    entry: manifest.Entry
    log_tail: str = ""
    # stopped by an interrupt: the manifest keeps what it had (runner/cancel.py)
    cancelled: bool = False


def cache_key(target: Target, stage: Staged, identity: EngineIdentity) -> str:
    """Everything that changes the wheel: the project (sources, generated packaging), the
    vendored runtime, the variant and the engine (interpreter or image id)."""
    return json_digest(
        {
            "factory": __version__,
            "engine": identity.key,
            "variant": target.as_dict(),
            "project": stage.key_material(),
            "source_date_epoch": stage.source_date_epoch,  # every file's time in the wheel
            "runtime": tree_digest(runtime_dir(), python_files(runtime_dir())),
        }
    )


def run_matrix(
    stage_for: Callable[[T], S],
    variants: Sequence[T],
    engine: Engine[S],
    out: Path,
    *,
    jobs: int = 1,
    progress: Listener = ignore,
    wheel_size_limit: int = BuildConfig().wheel_size_limit,
) -> list[Outcome]:
    """Build each of ``variants`` (planned variants, or a project's pure-Python builds) with
    ``engine`` into ``out``, ``jobs`` at a time; their outcomes, in order."""
    out = out.resolve()
    check_output_entries(
        out,
        {
            manifest.LOCK: FILE,
            manifest.MANIFEST: FILE,
            WORK_DIR: FOLDER,
            **{variant.id: FOLDER for variant in variants},
            **{f"{variant.id}/{LOG_NAME}": FILE for variant in variants},
            **{f"{variant.id}/{DEBUG_DIR}": FOLDER for variant in variants},
        },
    )
    with manifest.locked(out):
        recorder = manifest.ManifestRecorder(out)
        _clean_partials(out)
        for name in engine.reclaim():  # the lock is ours: whatever a killed run left is stale
            progress(VariantPhase("*", "reclaimed", name))

        def one(variant: T) -> Outcome:
            if CANCEL.event.is_set():  # a thread the interrupt did not stop in time starts nothing
                previous = recorder.get(variant.id)
                return Outcome(variant, previous or _cancelled_entry(engine), cancelled=True)
            outcome = _build_one(
                stage_for,
                variant,
                engine,
                out,
                recorder.get(variant.id),
                progress,
                wheel_size_limit,
            )
            if not outcome.cancelled:  # a cancelled attempt never replaces what the manifest had
                # after each variant: a killed run keeps what finished
                recorder.record(variant.id, outcome.entry)
            return outcome

        prefix = f"wheelfactory-build-{os.getpid()}-{time.monotonic_ns()}"
        pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix=prefix)
        try:
            futures = [pool.submit(one, variant) for variant in variants]
            # The main thread wakes every 0.1 s: a signal the kernel delivered to a build thread
            # runs its Python handler (the cancel) only when this thread runs bytecode, and a wait
            # without a timeout would hold it until the builds ended (as failures, not a cancel).
            while wait(futures, timeout=0.1).not_done:
                pass
            return [future.result() for future in futures]
        except BaseException:
            # Ctrl-C or SIGTERM (KeyboardInterrupt lands here, in the main thread; runner/cancel.py):
            # start nothing more; the builds under way see their commands stopped and end as
            # cancelled, the manifest keeping what it had for them. The
            # pool's threads are joined by name: one whose start the interrupt cut short is not
            # in the pool's own list, and shutdown(wait=True) would not wait for it.
            pool.shutdown(wait=False, cancel_futures=True)
            # The run's containers go first: a smoke test or the project's tests running in one
            # (through the Docker API, no child process to stop) ends with it, and so does a
            # container whose cibuildwheel the cancel stopped.
            reclaimed = _reclaim_during_a_stop(engine, progress)
            stopping = time.monotonic()
            for thread in threading.enumerate():
                while thread.name.startswith(prefix) and thread.is_alive():
                    thread.join(0.1)  # as above: a second Ctrl-C must reach its handler
                    if CANCEL.event.is_set() and time.monotonic() - stopping > KILL_AFTER_S:
                        # a child that ignores SIGTERM holds no cancel
                        stop_descendants(signal.SIGKILL)
            if CANCEL.event.is_set():
                CANCEL.sweep()
            for name in sorted({*reclaimed, *_reclaim_during_a_stop(engine, progress)}):
                progress(VariantPhase("*", "reclaimed", name))
            raise
        finally:
            pool.shutdown(wait=True)


def _reclaim_during_a_stop(engine: Engine[S], progress: Listener) -> list[str]:
    """``engine.reclaim()`` while a run stops (an interrupt, a failure): what it could not remove
    is said, and the stop goes on to its own error, which a failure here must not replace."""
    try:
        return engine.reclaim()
    except Exception as exc:  # noqa: BLE001 (the engine's own client errors, whatever they are)
        progress(
            VariantPhase(
                "*", "not reclaimed", f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            )
        )
        return []


def _build_one(
    stage_for: Callable[[T], S],
    variant: T,
    engine: Engine[S],
    out: Path,
    previous: manifest.Entry | None,
    progress: Listener,
    wheel_size_limit: int,
) -> Outcome:
    start = time.monotonic()
    variant_dir = out / variant.id
    variant_dir.mkdir(parents=True, exist_ok=True)
    log = variant_dir / LOG_NAME
    timeline = Timeline(None, lambda phase: progress(VariantPhase(variant.id, phase)))
    try:
        stage = stage_for(variant)
        with timeline.phase("image"):
            identity = engine.identity(stage)  # may build the variant's image
            key = cache_key(variant, stage, identity)
    except WheelfactoryError as exc:
        if CANCEL.caused(exc):  # stopped while its image was made
            progress(VariantPhase(variant.id, "cancelled", ""))
            return Outcome(variant, previous or _cancelled_entry(engine), cancelled=True)
        progress(VariantPhase(variant.id, "failed", str(exc)))
        seconds = round(time.monotonic() - start, 1)
        failed = _failed(variant, engine, exc, seconds, key="", log=None)
        return Outcome(variant, failed, getattr(exc, "tail", "") or "")
    cached = _cached(variant, previous, key, identity, out, start)
    if cached is not None:
        progress(VariantPhase(variant.id, "cached", str(cached.wheel)))
        return Outcome(variant, cached)
    # The log is a stream the build appends to (and a reader may follow), not a finished file:
    # written plainly, not through support/atomic.py.
    log.write_text(f"# wheelfactory {__version__}: {variant.id} with engine {engine.name}\n")
    workdir = out / WORK_DIR / variant.id
    started = time.time()
    progress(VariantPhase(variant.id, "building", ""))
    timeline.attach(log)
    try:
        result = engine.build(stage, workdir, log, timeline)
        refusal = over_limit(variant, result.wheel.stat().st_size, wheel_size_limit)
        if refusal is not None:
            raise VariantBuildError(refusal, explained=True, found=result.found)
        with timeline.phase("publish"):
            final, sha256 = _publish(variant, stage, result, key, variant_dir, workdir, started)
    except (WheelfactoryError, OSError, ValueError) as exc:
        seconds = round(time.monotonic() - start, 1)
        if CANCEL.caused(exc):
            return _cancelled(variant, previous, engine, log, seconds, timeline, progress)
        with log.open("a") as sink:
            sink.write(
                f"\n# FAILED after {seconds} s: {exc}\n{_phase_line(seconds, timeline.phases)}"
            )
        progress(VariantPhase(variant.id, "failed", str(exc)))
        tail = (
            exc.tail
            if isinstance(exc, CommandFailed)
            else ""
            if isinstance(exc, VariantBuildError) and exc.explained
            else tail_of(log)
        )
        failed = _failed(variant, engine, exc, seconds, key=key, log=str(log.relative_to(out)))
        return Outcome(
            variant, replace(failed, phases=timeline.phases, hub_metadata=stage.hub_metadata), tail
        )
    seconds = round(time.monotonic() - start, 1)
    with log.open("a") as sink:
        sink.write(f"\n# built in {seconds} s\n{_phase_line(seconds, timeline.phases)}")
    progress(VariantPhase(variant.id, "built", final.name))
    found = result.found
    return Outcome(
        variant,
        manifest.Entry(
            status="built",
            wheel=str(final.relative_to(out)),
            sha256=sha256,
            seconds=seconds,
            key=key,
            log=str(log.relative_to(out)),
            engine=engine.name,
            image=identity.image,
            torch_version=variant.torch_version,
            toolkit=variant.toolkit,
            size=final.stat().st_size,
            phases=timeline.phases,
            tests=found.tests,
            warnings=list(found.warnings) or None,
            gate=found.gate,
            hub_metadata=stage.hub_metadata,
        ),
    )


def _cached(
    variant: Target,
    previous: manifest.Entry | None,
    key: str,
    identity: EngineIdentity,
    out: Path,
    start: float,
) -> manifest.Entry | None:
    """The entry of a variant whose key is unchanged and whose wheel is still the one recorded:
    nothing to build. None: it builds."""
    if not (
        previous
        and previous.status in ("built", "cached")
        and previous.key == key
        and previous.wheel
    ):
        return None
    wheel = out / previous.wheel
    if not wheel.is_file() or file_sha256(wheel) != previous.sha256:
        return None
    return replace(
        previous,
        status="cached",
        seconds=round(time.monotonic() - start, 3),
        image=identity.image,
        torch_version=variant.torch_version,
        toolkit=variant.toolkit,
        size=wheel.stat().st_size,
        phases=None,
    )


def _publish(
    variant: Target,
    stage: Staged,
    result: BuildResult,
    key: str,
    variant_dir: Path,
    workdir: Path,
    started: float,
) -> tuple[Path, str]:
    """The wheel into the output directory, whole (a temp name, then a rename), with its
    provenance record where the build consumed something besides the project; the stale wheels
    and the scratch directory removed. The wheel's path and sha256."""
    final = variant_dir / result.wheel.name
    with atomic.replacing(final, what="the wheel") as partial:
        shutil.copyfile(result.wheel, partial)
    sha256 = file_sha256(final)
    if result.inputs is not None:
        built = BuiltWheel(
            variant,
            final,
            sha256,
            stage.kind.name,
            stage.package,
            json_digest(stage.key_material()),
            stage.source_date_epoch,
            key,
            started,
            time.time(),
            _source_git(stage.source_root),
            stage.kernel_depends,
        )
        write_provenance(built, result.inputs)
    for stale in variant_dir.glob("*.whl"):
        if stale != final:
            stale.unlink()
            provenance_path(stale).unlink(missing_ok=True)
    _keep_debug_files(workdir / DEBUG_DIR, variant_dir / DEBUG_DIR)
    shutil.rmtree(workdir, ignore_errors=True)
    return final, sha256


def _cancelled(
    variant: Target,
    previous: manifest.Entry | None,
    engine: Engine[S],
    log: Path,
    seconds: float,
    timeline: Timeline,
    progress: Listener,
) -> Outcome:
    """A build the cancel stopped: said in its log; the manifest keeps what it had."""
    kept = (
        "the last good wheel and its manifest entry are kept"
        if previous and previous.status in ("built", "cached")
        else "nothing is recorded for it"
    )
    during = f" during {', '.join(timeline.stopped_in)}" if timeline.stopped_in else ""
    with log.open("a") as sink:
        sink.write(f"\n# CANCELLED after {seconds} s{during} by {CANCEL.described}: {kept}\n")
    progress(VariantPhase(variant.id, "cancelled", kept))
    return Outcome(variant, previous or _cancelled_entry(engine), cancelled=True)


def _failed(
    variant: Target,
    engine: Engine[S],
    exc: Exception,
    seconds: float,
    *,
    key: str,
    log: str | None,
) -> manifest.Entry:
    """A failed variant's entry, with what the build had found when it failed."""
    found = exc.found if isinstance(exc, VariantBuildError) else Findings()
    return manifest.Entry(
        status="failed",
        wheel=None,
        sha256=None,
        seconds=seconds,
        key=key,
        log=log,
        error=str(exc),
        engine=engine.name,
        torch_version=variant.torch_version,
        toolkit=variant.toolkit,
        tests=found.tests,
        gate=found.gate,
        warnings=list(found.warnings) or None,
    )


_source_git = functools.cache(git_state)  # one look per checkout and run (two git calls)


def _keep_debug_files(built: Path, kept: Path) -> None:
    """The new wheel's debug files (verify/strip.py) replace the last wheel's, beside it in dist."""
    if kept.is_symlink() or kept.is_file():
        kept.unlink()
    shutil.rmtree(kept, ignore_errors=True)
    if built.is_dir():
        shutil.move(str(built), str(kept))


def _cancelled_entry(engine: Engine[S]) -> manifest.Entry:
    """What a cancelled variant's outcome carries where the manifest had nothing (never recorded)."""
    return manifest.Entry(
        status="failed",
        wheel=None,
        sha256=None,
        seconds=0.0,
        key="",
        log=None,
        error="cancelled",
        engine=engine.name,
    )


def _phase_line(seconds: float, phases: dict[str, float]) -> str:
    """The log's last line: where the time went, and the compile's share of it."""
    if not phases:
        return ""
    parts = ", ".join(f"{name} {value:.1f} s" for name, value in phases.items())
    share = (
        f" (compile {phases['compile'] / seconds:.0%} of {seconds:.1f} s)"
        if "compile" in phases and seconds
        else ""
    )
    return f"# phases: {parts}{share}\n"


def _clean_partials(out: Path) -> None:
    """Leftovers of a killed run (we hold the lock): temp wheel copies and manifest temp files are
    never valid. ``.partial`` is the name older versions gave a wheel's temp copy."""
    # never through a symlink: what a link out of the output directory points at is not ours
    for directory in (
        out,
        *(d for d in out.iterdir() if d.is_dir() and not d.is_symlink() and d.name != WORK_DIR),
    ):
        for leftover in atomic.leftovers(directory):
            leftover.unlink(missing_ok=True)
    for partial in out.glob("*/.*.partial"):
        partial.unlink(missing_ok=True)
