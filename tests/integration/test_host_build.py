"""The host engine end to end: build the sample kernels, check the wheel, install and load it.

Slow tier: one C++ build (cached across runs) and venvs with real torch releases.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.testkit import REPO, processes_naming, run_build, wait_for_log_line

BUILD_TORCH = "2.13.0"  # the test interpreter's torch, which the host engine builds for
OTHER_TORCH = "2.6.0"  # another minor release, which the Docker tier's wheelhouse holds all run (shared files)

pytestmark = pytest.mark.slow

CHECK = r"""
import json, sys, warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import torch, fusedops
    from fusedops import _reference as ref
    torch.manual_seed(0)
    x = torch.randn(33, 2 * 257)
    out = fusedops.silu_and_mul(x)
    expected = torch.empty_like(out); ref.silu_and_mul(expected, x)
    torch.testing.assert_close(out, expected)
    w = torch.randn(257)
    y = torch.randn(33, 257)
    torch.testing.assert_close(fusedops.rms_norm(y, w, 1e-6), torch.nn.functional.rms_norm(y, (257,), w, 1e-6),
                               rtol=1e-5, atol=1e-5)
    info = fusedops.backend_info()
print(json.dumps({"info": info, "warnings": [str(w.message) for w in caught
                                             if "fusedops" in str(w.message).lower()]}, default=str))
"""


def load_in(site: Path, venv: Path, *, env: dict[str, str] | None = None) -> dict[str, object]:
    result = subprocess.run([str(venv / "bin" / "python"), "-c", CHECK], capture_output=True, text=True,
                            timeout=900, env={**(env or os.environ), "PYTHONPATH": str(site)},
                            cwd=site)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_manifest_and_wheel(host_dist: Path, host_wheel: Path) -> None:
    data = json.loads((host_dist / "manifest.json").read_text())
    (vid,) = data["variants"]
    assert vid == "torch213-cxx11-cpu-x86_64-linux"
    entry = data["variants"][vid]
    assert set(entry) >= {"status", "wheel", "sha256", "seconds", "key", "log"}
    assert (host_dist / entry["log"]).is_file()
    assert host_wheel.name.startswith("fusedops-0.1.0+cputorch2.13-cp39-abi3-manylinux_")
    with zipfile.ZipFile(host_wheel) as archive:
        names = archive.namelist()
        record = json.loads(archive.read("fusedops/_build.json"))
        library = archive.read("fusedops/_C.abi3.so")
    # -ffile-prefix-map: __FILE__ and the debug info do not name where the build was staged, so a
    # rebuild into another output directory is the same library
    assert str(host_dist.resolve() / ".work").encode() not in library
    assert "fusedops/_C.abi3.so" in names and "fusedops/_runtime/__init__.py" in names
    assert "fusedops/_sources/jit.json" in names
    assert not [n for n in names if "libtorch" in n or "libc10" in n]
    assert record["variant"] == vid and record["built_with_torch"] == BUILD_TORCH
    assert record["torch"] == ".".join(BUILD_TORCH.split(".")[:2])
    assert record["namespace"].startswith("_fusedops_cpu_")


def test_unchanged_rebuild_is_cached(host_dist: Path) -> None:
    result = run_build(["--engine", "host", "-o", str(host_dist)], cwd=REPO, timeout=600)
    assert result.returncode == 0, result.stderr
    data = json.loads((host_dist / "manifest.json").read_text())
    assert [e["status"] for e in data["variants"].values()] == ["cached"]


def test_matching_torch_loads_prebuilt(host_wheel: Path, fresh_install: Callable[[str, Path], Path],
                                       venv_for: Callable[[str], Path], tmp_path: Path) -> None:
    site = fresh_install(BUILD_TORCH, host_wheel)
    env = {**os.environ, "FUSEDOPS_CACHE_DIR": str(tmp_path / "cache")}
    result = load_in(site, venv_for(BUILD_TORCH), env=env)
    info = result["info"]
    assert info["mode"] == "prebuilt", info  # type: ignore[index]
    assert info["variant"] == "torch213-cxx11-cpu-x86_64-linux"  # type: ignore[index]
    assert not result["warnings"]


def test_other_torch_minor_jits_then_hits_the_cache(host_wheel: Path, fresh_install: Callable[[str, Path], Path],
                                                    venv_for: Callable[[str], Path], tmp_path: Path) -> None:
    site = fresh_install(OTHER_TORCH, host_wheel)
    env = {**os.environ, "FUSEDOPS_CACHE_DIR": str(tmp_path / "cache")}
    venv = venv_for(OTHER_TORCH)
    first = load_in(site, venv, env=env)["info"]
    assert first["mode"] == "jit", first  # type: ignore[index]
    assert "2.6" in str(first["reason"])  # type: ignore[index]
    second = load_in(site, venv, env=env)["info"]
    assert second["mode"] == "jit" and second["library"] == first["library"]  # type: ignore[index]


def test_no_compiler_falls_back_to_reference(host_wheel: Path, fresh_install: Callable[[str, Path], Path],
                                             venv_for: Callable[[str], Path], tmp_path: Path) -> None:
    site = fresh_install(OTHER_TORCH, host_wheel)
    venv = venv_for(OTHER_TORCH)
    bare = tmp_path / "bin"
    bare.mkdir()
    env = {"PATH": str(bare), "HOME": str(tmp_path), "FUSEDOPS_CACHE_DIR": str(tmp_path / "cache")}
    result = load_in(site, venv, env=env)
    assert result["info"]["mode"] == "reference"  # type: ignore[index]
    assert len(result["warnings"]) == 1, result["warnings"]  # type: ignore[arg-type]


def wait_until_compiling(process: subprocess.Popen[Any], log: Path, then: str) -> None:
    """Return a few seconds into the compile (the build log shows `-m build`), at most 300 s on;
    fail if the build ended before that."""
    import time

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        if log.exists() and "-m build" in log.read_text():
            time.sleep(3)
            break
        time.sleep(0.2)
    assert process.poll() is None, f"the build ended before it could be {then}"


def test_kill_9_mid_build_then_rerun_completes(tmp_path: Path) -> None:
    """SIGKILL the whole build (process group) while it compiles: no wheel, no stale lock, and the
    rerun finishes the job."""
    import signal

    out = tmp_path / "dist"
    command = [sys.executable, "-m", "wheelfactory", "build", "--engine", "host", "-o", str(out)]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    log = out / "torch213-cxx11-cpu-x86_64-linux" / "build.log"
    try:
        wait_until_compiling(process, log, "killed")
    finally:  # also when the assertion fails: no build is left running into later tests
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
    assert not list(out.rglob("*.whl")), "a wheel appeared from a killed build"
    assert not (out / "manifest.json").exists() or "built" not in (out / "manifest.json").read_text()

    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    entry = json.loads((out / "manifest.json").read_text())["variants"]["torch213-cxx11-cpu-x86_64-linux"]
    assert entry["status"] == "built" and (out / entry["wheel"]).is_file()
    assert not list(out.rglob("*.partial")) and not list(out.rglob(".*.tmp"))


@dataclass(frozen=True)
class HostBuild:
    """The sample built with the host engine in a folder of its own, its [test] command one that
    ``matrix`` rewrites (a change re-verifies the wheel: the next build runs every phase again)."""

    root: Path
    project: Path
    out: Path
    vid: str = "torch213-cxx11-cpu-x86_64-linux"

    def matrix(self, round_: int, sleep: int = 0, command: str | None = None) -> None:
        """``command``: a TOML string for [test] command instead of the sleep that prints ``round_``."""
        command = command or f'"python -c \'import time; time.sleep({sleep}); print({round_})\'"'
        (self.root / "matrix.toml").write_text(
            f'[project]\npath = "{self.project}"\n\n[matrix]\ntorch = ["2.13"]\nbackends = ["cpu"]\n'
            f'python = ["abi3"]\n\n[build]\nengine = "host"\n\n[test]\ncommand = {command}\n')

    @property
    def command(self) -> list[str]:
        return [sys.executable, "-m", "wheelfactory", "build", "-o", str(self.out)]

    def entry(self) -> dict[str, Any]:
        return json.loads((self.out / "manifest.json").read_text())["variants"][self.vid]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def host_build(tmp_path_factory: pytest.TempPathFactory) -> HostBuild:
    """One good wheel, which the interrupt tests of this module keep (and the last rebuild replaces)."""
    import shutil

    root = tmp_path_factory.mktemp("interrupts")
    build = HostBuild(root, root / "fusedops", root / "dist")
    shutil.copytree(REPO / "kernels" / "fusedops", build.project, ignore=shutil.ignore_patterns("build", "*.so"))
    build.matrix(0)
    first = subprocess.run(build.command, cwd=root, capture_output=True, text=True, timeout=1200)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    return build


def test_an_interrupt_is_a_cancel_and_the_last_good_wheel_stays_published(host_build: HostBuild) -> None:
    """A good wheel built; a source edited; the rebuild interrupted mid-compile, once by Ctrl-C
    (SIGINT to the process group, as a terminal sends it) and once by SIGTERM to the factory alone
    (as `kill` and a CI cancel send it): each exits 130 / 143 saying so, leaves no process of the
    build running, and keeps the good wheel and its manifest entry as they were, so `index` still
    publishes it; the next run builds the edited source."""
    import signal
    import time

    tmp_path, project, out, vid = host_build.root, host_build.project, host_build.out, host_build.vid
    command = host_build.command
    good = host_build.entry()
    source = next(project.rglob("*.cpp"))
    source.write_text(source.read_text() + "\n// edited: the next build compiles again\n")
    log = out / vid / "build.log"
    # SIGINT back to its default in the child: a shell that runs the tests in the background leaves it
    # ignored, an ignored signal stays ignored across exec, and a terminal's foreground job has it.
    for signum, to_group, code in ((signal.SIGINT, True, 130), (signal.SIGTERM, False, 143)):
        process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   start_new_session=True,
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # noqa: PLW1509
        try:
            log.unlink(missing_ok=True)
            wait_until_compiling(process, log, "interrupted")
            (os.killpg if to_group else os.kill)(process.pid, signum)
            output, _ = process.communicate(timeout=120)
        finally:  # a run that did not stop (or the assertion above) leaves nothing running
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.communicate()
        assert process.returncode == code, (signum, output[-3000:])
        assert "wheelfactory: interrupted by" in output and "Traceback" not in output, output[-3000:]
        assert "# CANCELLED after" in log.read_text()
        deadline = time.monotonic() + 10
        while _build_processes(out) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _build_processes(out), (signum, _build_processes(out))
        assert json.loads((out / "manifest.json").read_text())["variants"][vid] == good, signum
        assert (out / good["wheel"]).is_file()
        listed = subprocess.run([sys.executable, "-m", "wheelfactory", "index", "-o", str(out)], cwd=tmp_path,
                                capture_output=True, text=True, timeout=300)
        assert listed.returncode == 0 and "not listed" not in listed.stdout + listed.stderr, listed.stdout
        assert list((out / "index").rglob(Path(good["wheel"]).name)), "the good wheel left the index"
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert json.loads((out / "manifest.json").read_text())["variants"][vid]["status"] == "built"


def test_an_interrupt_in_each_phase_after_the_compile_is_a_cancel(host_build: HostBuild) -> None:
    """The same claims as the compile's interrupt, for each phase after it: the repair, the smoke
    test and the project's tests (the [test] command changed each round, so the wheel is verified
    again; the tests round sleeps, as long suites do). The log names the phase it stopped."""
    import signal
    import time

    tmp_path, out, vid, command = host_build.root, host_build.out, host_build.vid, host_build.command
    good = host_build.entry()
    log = out / vid / "build.log"
    rounds = (("repair", signal.SIGTERM, False, 143), ("smoke", signal.SIGINT, True, 130),
              ("tests", signal.SIGTERM, False, 143))
    for number, (phase, signum, to_group, code) in enumerate(rounds, start=1):
        host_build.matrix(number, 120 if phase == "tests" else 0)
        log.unlink(missing_ok=True)
        process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   start_new_session=True,
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # noqa: PLW1509
        try:
            wait_for_log_line(log, f"phase {phase} started", process)
            (os.killpg if to_group else os.kill)(process.pid, signum)
            output, _ = process.communicate(timeout=120)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.communicate()
        assert process.returncode == code, (phase, output[-3000:])
        assert "Traceback" not in output, output[-3000:]
        said = log.read_text()
        assert re.search(rf"# CANCELLED after [0-9.]+ s during [a-z, ]*\b{phase}\b", said), (phase, said[-1500:])
        deadline, tests_marker = time.monotonic() + 10, f"print({number})"
        while (_build_processes(out) or processes_naming(tests_marker)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _build_processes(out) and not processes_naming(tests_marker), (phase, _build_processes(out))
        assert json.loads((out / "manifest.json").read_text())["variants"][vid] == good, phase
        listed = subprocess.run([sys.executable, "-m", "wheelfactory", "index", "-o", str(out)], cwd=tmp_path,
                                capture_output=True, text=True, timeout=300)
        assert listed.returncode == 0 and list((out / "index").rglob(Path(good["wheel"]).name)), (phase, listed.stdout)


def test_a_child_that_ignores_sigterm_holds_no_cancel(host_build: HostBuild) -> None:
    """The project's tests trap SIGTERM and SIGINT (``trap '' TERM INT``, then a sleep that keeps
    them ignored). One SIGTERM: the cancel sends SIGKILL after KILL_AFTER_S and exits 143. A second
    SIGTERM a moment after the first: exit 143 at once. Either way nothing of the run is left and
    the good entry stays."""
    import signal
    import time

    from wheelfactory.runner.cancel import KILL_AFTER_S

    tmp_path, out, vid, command = host_build.root, host_build.out, host_build.vid, host_build.command
    good = host_build.entry()
    log = out / vid / "build.log"
    for seconds, signals in ((64, 1), (65, 2)):
        marker = f"sleep {seconds}"
        host_build.matrix(0, command=f"\"sh -c 'trap \\\"\\\" TERM INT; exec {marker}'\"")
        log.unlink(missing_ok=True)
        process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   start_new_session=True)
        try:
            wait_for_log_line(log, "phase tests started", process)
            while not processes_naming(marker):
                assert process.poll() is None, "the build ended before its tests ran"
                time.sleep(0.05)
            process.send_signal(signal.SIGTERM)
            if signals == 2:
                time.sleep(1)
                second = time.monotonic()
                process.send_signal(signal.SIGTERM)
            output, _ = process.communicate(timeout=60)
            if signals == 2:
                assert time.monotonic() - second < KILL_AFTER_S / 2, "the second signal did not stop at once"
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.communicate()
        assert process.returncode == 143 and "Traceback" not in output, (signals, output[-3000:])
        deadline = time.monotonic() + 10
        while processes_naming(marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not processes_naming(marker) and not _build_processes(out), (signals, processes_naming(marker))
        assert json.loads((out / "manifest.json").read_text())["variants"][vid] == good, signals
    for page in ("README.md", "docs/commands.md"):  # the exit-code table says so
        assert f"then SIGKILL {KILL_AFTER_S:.0f} s later for one that ignores it; a second Ctrl-C stops at once" \
            in (REPO / page).read_text(), page


def test_plain_output_times_every_step_and_q_and_v_say_less_and_more(host_build: HostBuild) -> None:
    """A build whose output is a pipe (a CI log): every line about a variant starts with the
    seconds since the run started. -q: the summary and nothing of the steps. -v: the variant's
    build log streamed as it is written, each line behind the variant's id."""
    vid = host_build.vid
    runs = {}
    for number, flag in enumerate(("", "-v", "-q"), start=10):
        if flag != "-q":  # -q may find it cached: no step is shown either way
            host_build.matrix(number)  # a changed [test]: the wheel is verified again, every step runs
        done = subprocess.run([*host_build.command, *([flag] if flag else [])], cwd=host_build.root,
                              capture_output=True, text=True, timeout=1200)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        runs[flag] = done.stdout
    steps = [line for line in runs[""].splitlines() if f"{vid}: " in line and "│" not in line]
    assert len(steps) >= 8 and all(re.match(rf"\[ *\d+\.\ds\] {vid}: ", line) for line in steps), steps
    streamed = [line for line in runs["-v"].splitlines() if line.startswith(f"{vid} | ")]
    assert any("phase smoke started" in line for line in streamed) and any("-m build" in line for line in streamed)
    assert f"{vid}: " not in runs["-q"] and "Build summary" in runs["-q"], runs["-q"][-2000:]


def _build_processes(out: Path) -> list[str]:
    """Processes whose command line names the build's output directory (the build, its compiles)."""
    return processes_naming(str(out))
