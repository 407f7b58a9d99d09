"""The matrix run's bookkeeping with a fake engine: cache hits, failures, and Ctrl-C."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.testkit import REPO, FakeStage
from wheelfactory.engines import BuildInputs, BuildResult, EngineIdentity
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.expand import expand
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.matrix import parse_matrix
from wheelfactory.plan.tomlsource import TomlDocument
from wheelfactory.project.stage import Stage
from wheelfactory.runner import manifest
from wheelfactory.runner.run import run_matrix
from wheelfactory.support.timeline import Timeline


@pytest.fixture(scope="module")
def variants() -> tuple[Variant, ...]:
    table = load_table()
    text = '[matrix]\ntorch = ["2.6", "2.12", "2.13"]\ncxx11_abi = true\n'
    return expand(parse_matrix(TomlDocument.from_text(text, "m.toml"), table, base_dir=REPO), table).variants


INPUTS = BuildInputs("fake", "cp311-cp311", "sha256:" + "ab" * 32, "fake:tag",
                     (("torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl", "cd" * 32),))


class FakeEngine:
    name = "fake"

    def __init__(self, interrupt_on: str | None = None, fail_on: str | None = None) -> None:
        self.built: list[str] = []
        self.interrupt_on = interrupt_on
        self.fail_on = fail_on

    def identity(self, stage: Stage) -> EngineIdentity:
        return EngineIdentity("fake")

    def reclaim(self) -> list[str]:
        return []

    def build(self, stage: Stage, workdir: Path, log: Path, timeline: Timeline) -> BuildResult:
        vid = stage.variant.id
        self.built.append(vid)
        timeline.add("compile", 1.25)
        if vid == self.interrupt_on:
            os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C does to the factory's main thread
            time.sleep(0.5)
        if vid == self.fail_on:
            raise ValueError("bad flag")
        workdir.mkdir(parents=True, exist_ok=True)
        wheel = workdir / f"fake-0.1-{vid}.whl"
        wheel.write_bytes(vid.encode())
        return BuildResult(wheel, INPUTS)


def test_unchanged_rerun_is_cached_and_failure_is_recorded(tmp_path: Path, variants: tuple[Variant, ...]) -> None:
    engine = FakeEngine(fail_on=variants[1].id)
    outcomes = run_matrix(FakeStage, variants, engine, tmp_path)  # type: ignore[arg-type]
    assert [o.entry.status for o in outcomes] == ["built", "failed", "built"]
    again = FakeEngine()
    outcomes = run_matrix(FakeStage, variants, again, tmp_path)  # type: ignore[arg-type]
    assert [o.entry.status for o in outcomes] == ["cached", "built", "cached"]
    assert again.built == [variants[1].id]  # only the failed one was built again
    phases = [o.entry.phases for o in outcomes]
    assert phases[0] is None and phases[2] is None  # cached: nothing ran in this run
    assert phases[1] is not None and phases[1]["compile"] == 1.25 and "publish" in phases[1]
    assert manifest.read(tmp_path)[variants[1].id].phases == phases[1]
    log = (tmp_path / variants[1].id / "build.log").read_text()
    assert "phase compile: 1.2 s" in log and "# phases: image 0.0 s, compile 1.2 s" in log


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """Python raises KeyboardInterrupt on SIGINT only if SIGINT was not ignored when it started, and a
    shell that runs the tests in the background ignores it: install the handler for this test."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_starts_nothing_more_and_the_rerun_builds_the_rest(tmp_path: Path, variants: tuple[Variant, ...],
                                                                   ctrl_c_raises: None) -> None:
    engine = FakeEngine(interrupt_on=variants[0].id)
    with pytest.raises(KeyboardInterrupt):
        run_matrix(FakeStage, variants, engine, tmp_path, jobs=1)  # type: ignore[arg-type]
    assert engine.built == [variants[0].id]  # the queued variants never started
    assert set(manifest.read(tmp_path)) == {variants[0].id}  # the one under way finished and was recorded
    rerun = FakeEngine()
    outcomes = run_matrix(FakeStage, variants, rerun, tmp_path)  # type: ignore[arg-type]  # the lock was released
    assert rerun.built == [v.id for v in variants[1:]] and outcomes[0].entry.status == "cached"


class TogetherEngine(FakeEngine):
    """Builds finish in groups: each build waits at a barrier until ``group`` builds are done, so
    that many threads copy their wheels and record their results at the same moment."""

    def __init__(self, group: int) -> None:
        super().__init__()
        self.barrier = threading.Barrier(group, timeout=10)
        self._lock = threading.Lock()

    def build(self, stage: Stage, workdir: Path, log: Path, phase: object = None) -> BuildResult:
        with self._lock:
            self.built.append(stage.variant.id)
        workdir.mkdir(parents=True, exist_ok=True)
        wheel = workdir / f"fake-0.1-{stage.variant.id}.whl"
        wheel.write_bytes(stage.variant.id.encode() * 1000)
        self.barrier.wait()
        return BuildResult(wheel, INPUTS)


def test_parallel_builds_that_finish_together_are_all_recorded(tmp_path: Path) -> None:
    """jobs=4 over 20 variants (12 at least), four finishing at once, ten times: no variant fails and the manifest
    holds every one (the old shared per-process manifest temp name lost the race here)."""
    table = load_table()
    text = '[matrix]\ntorch = [">=2.6"]\ncxx11_abi = "both"\narch = ["x86_64", "aarch64"]\n'
    many = expand(parse_matrix(TomlDocument.from_text(text, "m.toml"), table, base_dir=REPO), table).variants
    many = many[:len(many) // 4 * 4]  # whole groups: no build waits at the barrier alone
    assert len(many) >= 12
    for attempt in range(10):
        out = tmp_path / f"dist{attempt}"
        engine = TogetherEngine(group=4)
        outcomes = run_matrix(FakeStage, many, engine, out, jobs=4)  # type: ignore[arg-type]
        failed = {o.variant.id: o.entry.error for o in outcomes if o.entry.status != "built"}
        assert failed == {}, f"attempt {attempt}: {failed}"
        assert sorted(engine.built) == sorted(v.id for v in many)
        recorded = manifest.read(out)
        assert set(recorded) == {v.id for v in many}, f"attempt {attempt}"
        for variant in many:
            entry = recorded[variant.id]
            assert entry.status == "built" and entry.wheel is not None
            assert (out / entry.wheel).read_bytes() == variant.id.encode() * 1000
        assert not [p for p in out.rglob(".*.tmp")] and not [p for p in out.rglob("*.partial")]


class CancelledEngine(FakeEngine):
    """Its build of ``cancel_on`` dies as a compile does when Ctrl-C or SIGTERM reaches it: the
    cancel is set (runner/cancel.py's handler) and the command fails with the signal."""

    def __init__(self, cancel_on: str) -> None:
        super().__init__()
        self.cancel_on = cancel_on

    def build(self, stage: Stage, workdir: Path, log: Path, timeline: Timeline) -> BuildResult:
        if stage.variant.id == self.cancel_on:
            from wheelfactory.runner.cancel import CANCEL
            from wheelfactory.support.proc import CommandFailed

            CANCEL.event.set()
            raise CommandFailed(["python", "-m", "build"], -signal.SIGTERM, "", None)
        return super().build(stage, workdir, log, timeline)


def test_a_cancelled_rebuild_keeps_the_last_good_entry_and_records_nothing_new(
        tmp_path: Path, variants: tuple[Variant, ...]) -> None:
    from wheelfactory.runner.cancel import CANCEL

    first = run_matrix(FakeStage, variants[:1], FakeEngine(), tmp_path)  # type: ignore[arg-type]
    good = manifest.read(tmp_path)[variants[0].id]
    assert first[0].entry.status == "built"

    class Changed(FakeStage):  # a source edit: a new key, so the variant builds again
        def key_material(self) -> object:
            return f"{self.variant.id} edited"

    try:
        outcomes = run_matrix(Changed, variants[:2], CancelledEngine(variants[0].id), tmp_path, jobs=1)  # type: ignore[arg-type]
    finally:
        CANCEL.event.clear()
    assert [o.cancelled for o in outcomes] == [True, True]  # the second never started: cancelled too
    recorded = manifest.read(tmp_path)
    assert recorded[variants[0].id] == good and (tmp_path / str(good.wheel)).is_file()
    assert variants[1].id not in recorded  # nothing was built for it: nothing is recorded
    assert "# CANCELLED after" in (tmp_path / variants[0].id / "build.log").read_text()


@pytest.mark.parametrize("planted", ["build.log link", "variant folder link", ".work link", "manifest fifo",
                                     "lock link", "build.log fifo"])
def test_a_link_or_special_file_planted_in_the_output_is_refused_before_anything_is_written(
        tmp_path: Path, variants: tuple[Variant, ...], planted: str) -> None:
    """A dist copied from elsewhere (a CI artifact) holding a link where a build writes: the build
    would have truncated what build.log names, written its wheels where the variant's folder
    points, or removed the scratch folder a `.work` link names. Exit 2 (UsageError) naming the
    path; nothing outside changes and nothing is built."""
    from wheelfactory.errors import UsageError

    out, outside = tmp_path / "dist", tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("kept\n")
    (outside / variants[0].id).mkdir()
    (outside / variants[0].id / "keep.txt").write_text("kept\n")
    out.mkdir()
    vid = variants[0].id
    named = {"build.log link": out / vid / "build.log", "variant folder link": out / vid, ".work link": out / ".work",
             "manifest fifo": out / "manifest.json", "lock link": out / ".wheelfactory.lock",
             "build.log fifo": out / vid / "build.log"}[planted]
    named.parent.mkdir(parents=True, exist_ok=True)
    if planted.endswith("fifo"):
        os.mkfifo(named)
    elif planted == "build.log link" or planted == "lock link":
        os.symlink(outside / "precious.txt", named)
    else:
        os.symlink(outside, named)
    before = sorted((p.relative_to(outside), p.read_bytes() if p.is_file() else b"") for p in outside.rglob("*"))
    engine = FakeEngine()
    with pytest.raises(UsageError, match=str(named).replace(".", r"\.")):
        run_matrix(FakeStage, variants, engine, out)  # type: ignore[arg-type]
    assert engine.built == []
    assert sorted((p.relative_to(outside), p.read_bytes() if p.is_file() else b"") for p in outside.rglob("*")) == before


def test_a_reclaim_that_fails_while_a_run_stops_is_said_and_the_stop_goes_on(
        tmp_path: Path, variants: tuple[Variant, ...], ctrl_c_raises: None) -> None:
    """The Docker engine's reclaim met a container whose removal was already under way (409) while a
    Ctrl-C stopped the run, and its traceback replaced the interrupt (exit 1, not 130)."""
    from wheelfactory.support.progress import VariantPhase

    class StuckEngine(FakeEngine):
        calls = 0

        def reclaim(self) -> list[str]:
            StuckEngine.calls += 1
            if StuckEngine.calls > 1:  # the first is the run's start; the others are the stop's
                raise RuntimeError("removal of container c3 is already in progress")
            return []

    said: list[VariantPhase] = []
    with pytest.raises(KeyboardInterrupt):
        run_matrix(FakeStage, variants, StuckEngine(interrupt_on=variants[0].id), tmp_path, jobs=1,  # type: ignore[arg-type]
                   progress=lambda event: said.append(event))  # type: ignore[arg-type,arg-type]
    assert any(e.phase == "not reclaimed" and "already in progress" in e.detail for e in said), said


def test_a_wheel_over_the_size_limit_fails_with_its_size_the_limit_and_what_fits(
        tmp_path: Path, variants: tuple[Variant, ...]) -> None:
    wheel_bytes = len(variants[0].id)  # FakeEngine's wheel holds its variant id
    outcomes = run_matrix(FakeStage, variants[:1], FakeEngine(), tmp_path, wheel_size_limit=wheel_bytes - 1)
    entry = outcomes[0].entry
    assert entry.status == "failed" and entry.error is not None
    assert entry.error.startswith(f"{variants[0].id}: the wheel is {wheel_bytes} bytes ({wheel_bytes} bytes), over "
                                  f"[build] wheel_size_limit {wheel_bytes - 1} bytes")
    assert "what would fit" in entry.error and outcomes[0].log_tail == ""  # the message says it all
    assert not list(tmp_path.glob("*/*.whl"))  # nothing over the limit lands in dist/
    assert run_matrix(FakeStage, variants[:1], FakeEngine(), tmp_path,
                      wheel_size_limit=wheel_bytes)[0].entry.status == "built"  # at the limit fits
