"""End to end with the fixture kernel: fresh interpreters, a real compiler, real caches.

Compiles in this module (each ~10 s): the prebuilt library and the 8-process race (session
fixtures), the SIGKILL recovery and the truncated-library rebuild. Everything else copies the
race's warm cache.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest
from tests.runtime import rt_assemble as rt
from wheelfactory.project.kernel_toml import KernelSpec, load_kernel

pytestmark = pytest.mark.slow  # compiles C++ (the project's marker for that)

Result = dict[str, object]
RACE_PROCESSES = rt.RACE_PROCESSES  # conftest's jit_race starts this many
MAJOR, MINOR = rt.torch_major_minor()
RECORD_TORCH = f"{MAJOR}.{MINOR - 1}"  # what jit_parent's build record claims


def info(result: Result) -> dict[str, object]:
    assert result["error"] is None, f"{result['error']}\n{result['stderr']}"
    assert result["ok"] is True, result
    return result["info"]  # type: ignore[return-value]


def entries(cache: Path, marker: str) -> list[Path]:
    root = cache / "torch_extensions"
    return sorted(p for p in root.iterdir() if marker in p.name) if root.exists() else []


def finished_entry(cache: Path) -> Path:
    (entry,) = [
        p
        for p in (cache / "torch_extensions").iterdir()
        if p.is_dir() and "." in p.name and ".tmp-" not in p.name and ".stale-" not in p.name
    ]
    return entry


# -- prebuilt ---------------------------------------------------------------------------------


def test_prebuilt_loads_without_touching_the_cache(
    kernel: KernelSpec, prebuilt_parent: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    result = rt.run_probe(rt.child_env(kernel, prebuilt_parent, cache_dir=cache))
    details = info(result)
    assert details["mode"] == "prebuilt"
    assert details["namespace"] == rt.PREBUILT_NAMESPACE
    assert str(details["library"]).endswith(f"tinyops/{rt.LIBRARY_NAME}")
    assert details["ops"] == {"silu_and_mul": "prebuilt", "scale_add": "prebuilt"}
    assert str(details["variant"]).startswith("torch")
    assert result["loaded_at_import"] is False  # lazy: nothing happened at import
    assert rt.fallback_warnings(result) == []
    assert not cache.exists()  # no JIT attempt, so no cache directory either


def test_forced_prebuilt_with_an_incompatible_record_raises(
    kernel: KernelSpec, jit_parent: Path, tmp_path: Path
) -> None:
    result = rt.run_probe(rt.child_env(kernel, jit_parent, cache_dir=tmp_path / "cache", load="prebuilt"))
    error = str(result["error"])
    assert error.startswith("KernelLoadError: tinyops: TINYOPS_LOAD=prebuilt cannot be satisfied")
    assert f"[rejected] prebuilt: built for torch {RECORD_TORCH}, this is torch {MAJOR}.{MINOR}" in error


# -- JIT, cold cache, 8 processes at once -------------------------------------------------------


def test_concurrent_cold_cache_compiles_exactly_once(jit_race: tuple[Path, list[Result]]) -> None:
    cache, results = jit_race
    details = [info(r) for r in results]
    assert len(details) == RACE_PROCESSES
    assert all(d["mode"] == "jit" for d in details)
    caches = sorted(str(d["jit"]["cache"]) for d in details)  # type: ignore[index]
    assert caches == ["built"] + ["hit"] * (RACE_PROCESSES - 1), caches
    assert len({d["library"] for d in details}) == 1
    # exactly one compile happened: one finished entry, no leftovers, no error log
    names = [p.name for p in (cache / "torch_extensions").iterdir()]
    assert len([n for n in names if n.endswith(".lock")]) == 1
    assert [n for n in names if ".tmp-" in n or ".stale-" in n or n.endswith(".error.log")] == []
    entry = finished_entry(cache)
    assert (entry / "build.log").is_file() and (entry / "complete.json").is_file()
    assert all(rt.fallback_warnings(r) == [] for r in results)


def test_incompatible_record_is_rejected_before_dlopen_and_jit_is_used(
    jit_race: tuple[Path, list[Result]],
) -> None:
    # jit_parent ships garbage bytes as _C.abi3.so: any dlopen of it would have been recorded as a failure.
    details = info(jit_race[1][0])
    decisions = details["decisions"]
    assert decisions[0] == {  # type: ignore[index]
        "candidate": "prebuilt",
        "accepted": False,
        "reason": f"built for torch {RECORD_TORCH}, this is torch {MAJOR}.{MINOR}",
    }
    assert [d["candidate"] for d in decisions] == ["prebuilt", "jit"]  # type: ignore[union-attr, index]
    assert str(details["namespace"]).startswith("_tinyops_jit_")
    assert details["ops"] == {"silu_and_mul": "jit", "scale_add": "jit"}
    assert details["installed_variant"] is not None and details["variant"] != details["installed_variant"]


# -- JIT, warm cache ------------------------------------------------------------------------------


def test_cache_hit_needs_no_compiler(
    kernel: KernelSpec, jit_parent: Path, warm_cache: Path, empty_bin: Path
) -> None:
    details = info(
        rt.run_probe(rt.child_env(kernel, jit_parent, cache_dir=warm_cache, no_compiler=empty_bin))
    )
    assert details["mode"] == "jit" and details["jit"]["cache"] == "hit"  # type: ignore[index]


def test_forced_jit_uses_the_cache(kernel: KernelSpec, jit_parent: Path, warm_cache: Path) -> None:
    details = info(rt.run_probe(rt.child_env(kernel, jit_parent, cache_dir=warm_cache, load="jit")))
    assert details["mode"] == "jit"
    assert details["decisions"][0]["reason"] == "skipped: TINYOPS_LOAD=jit"  # type: ignore[index]


def test_truncated_cached_library_is_rebuilt_not_loaded(
    kernel: KernelSpec, jit_parent: Path, warm_cache: Path
) -> None:
    entry = finished_entry(warm_cache)
    complete = json.loads((entry / "complete.json").read_text())
    library = entry / complete["library"]
    with open(library, "r+b") as handle:
        handle.truncate(complete["size"] // 2)
    result = rt.run_probe(rt.child_env(kernel, jit_parent, cache_dir=warm_cache))
    details = info(result)
    assert details["mode"] == "jit" and details["jit"]["cache"] == "rebuilt"  # type: ignore[index]
    assert "the cached copy was rejected (the library is" in str(details["reason"])
    rebuilt = json.loads((entry / "complete.json").read_text())
    assert library.stat().st_size == rebuilt["size"] == complete["size"]
    assert entries(warm_cache, ".stale-") == [] and entries(warm_cache, ".tmp-") == []


def _fifo_record(entry: Path, complete: dict[str, object], outside: Path) -> None:
    (entry / "complete.json").unlink()
    os.mkfifo(entry / "complete.json")


def _dev_zero_record(entry: Path, complete: dict[str, object], outside: Path) -> None:
    (entry / "complete.json").unlink()
    (entry / "complete.json").symlink_to("/dev/zero")


def _outside_library(entry: Path, complete: dict[str, object], outside: Path) -> None:
    library = entry / str(complete["library"])
    shutil.copyfile(library, outside / library.name)  # the same bytes: its record matches them
    library.unlink()
    library.symlink_to(outside / library.name)


def _open_entry(entry: Path, complete: dict[str, object], outside: Path) -> None:
    entry.chmod(0o777)


def _dot_library(entry: Path, complete: dict[str, object], outside: Path) -> None:
    (entry / "complete.json").write_text(json.dumps({**complete, "library": "."}))


@pytest.mark.parametrize("plant", [_fifo_record, _dev_zero_record, _outside_library, _open_entry, _dot_library],
                         ids=lambda plant: plant.__name__.strip("_"))
def test_a_hostile_cache_entry_is_healed_by_one_rebuild(
    kernel: KernelSpec, jit_parent: Path, warm_cache: Path, tmp_path: Path, plant: object
) -> None:
    """What an attacker or a broken disk can leave in an entry is never read through, never blocks
    and is never loaded: the load rebuilds the entry once and says why."""
    entry = finished_entry(warm_cache)
    complete = json.loads((entry / "complete.json").read_text())
    outside = tmp_path / "outside"
    outside.mkdir()
    plant(entry, complete, outside)  # type: ignore[operator]
    details = info(rt.run_probe(rt.child_env(kernel, jit_parent, cache_dir=warm_cache)))
    assert details["mode"] == "jit" and details["jit"]["cache"] == "rebuilt", details  # type: ignore[index]
    assert "the cached copy was rejected (" in str(details["reason"])
    healed = entry / str(complete["library"])
    assert healed.is_file() and not healed.is_symlink() and stat.S_IMODE(entry.stat().st_mode) & 0o022 == 0


@pytest.mark.parametrize(
    ("target", "mode"),
    [("cache", 0o777), ("cache", 0o770), ("torch_extensions", 0o757)],
)
def test_group_or_world_writable_cache_is_refused(
    kernel: KernelSpec, jit_parent: Path, warm_cache: Path, target: str, mode: int
) -> None:
    unsafe = warm_cache if target == "cache" else warm_cache / "torch_extensions"
    unsafe.chmod(mode)
    result = rt.run_probe(rt.child_env(kernel, jit_parent, cache_dir=warm_cache))
    details = info(result)  # the planted-looking cache is never loaded from, even though it is warm
    assert details["mode"] == "reference"
    (warning,) = rt.fallback_warnings(result)
    assert f"refusing to use cache directory {unsafe}" in warning and f"chmod 700 {unsafe}" in warning
    forced = rt.run_probe(rt.child_env(kernel, jit_parent, cache_dir=warm_cache, load="jit"))
    assert str(forced["error"]).startswith("KernelLoadError")
    assert f"jit: refusing to use cache directory {unsafe}" in str(forced["error"])


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a directory's owner needs root")
def test_cache_owned_by_another_user_is_refused(
    kernel: KernelSpec, jit_parent: Path, warm_cache: Path
) -> None:
    os.chown(warm_cache, 12345, -1)
    result = rt.run_probe(rt.child_env(kernel, jit_parent, cache_dir=warm_cache))
    assert info(result)["mode"] == "reference"
    (warning,) = rt.fallback_warnings(result)
    assert "owned by uid 12345" in warning


# -- no compiler -------------------------------------------------------------------------------


def test_no_compiler_falls_back_to_reference_with_exactly_one_warning(
    kernel: KernelSpec, jit_parent: Path, tmp_path: Path, empty_bin: Path
) -> None:
    result = rt.run_probe(
        rt.child_env(kernel, jit_parent, cache_dir=tmp_path / "cache", no_compiler=empty_bin)
    )
    details = info(result)  # the ops still give correct results
    assert details["mode"] == "reference"
    assert details["ops"] == {"silu_and_mul": "reference", "scale_add": "reference"}
    (warning,) = rt.fallback_warnings(result)  # three op calls and backend_info(): one warning
    assert "no C++ compiler ('c++' is not on PATH" in warning and "ninja is not on PATH" in warning
    assert (
        "apt install g++" in warning
        and "pip install ninja" in warning
        and "TINYOPS_LOAD=reference" in warning
    )
    assert entries(tmp_path / "cache", ".tmp-") == []


def test_forced_jit_without_a_compiler_raises(
    kernel: KernelSpec, jit_parent: Path, tmp_path: Path, empty_bin: Path
) -> None:
    result = rt.run_probe(
        rt.child_env(kernel, jit_parent, cache_dir=tmp_path / "cache", load="jit", no_compiler=empty_bin)
    )
    assert "KernelLoadError" in str(result["error"]) and "no C++ compiler" in str(result["error"])


def test_reference_mode_is_silent(kernel: KernelSpec, jit_parent: Path, tmp_path: Path) -> None:
    result = rt.run_probe(rt.child_env(kernel, jit_parent, cache_dir=tmp_path / "cache", load="reference"))
    assert info(result)["mode"] == "reference" and rt.fallback_warnings(result) == []


# -- a compile that fails ---------------------------------------------------------------------


def test_compile_error_falls_back_with_the_log_and_forced_jit_raises(
    kernel: KernelSpec, tmp_path: Path
) -> None:
    broken_root = tmp_path / "broken-kernel"
    shutil.copytree(kernel.root, broken_root)
    source = broken_root / kernel.sources_for("cpu")[0]
    source.write_text('#error "deliberately broken"\n' + source.read_text())  # fails before any header
    broken = load_kernel(broken_root)
    parent = tmp_path / "pkg"
    parent.mkdir()
    rt.assemble(broken, parent)
    cache = tmp_path / "cache"
    result = rt.run_probe(rt.child_env(broken, parent, cache_dir=cache))
    assert info(result)["mode"] == "reference"
    (warning,) = rt.fallback_warnings(result)
    assert "jit: compiling torch" in warning and "failed (exit 1): " in warning
    assert 'error: #error "deliberately broken"' in warning  # the compiler's own error line
    assert ".error.log)" in warning
    (error_log,) = entries(cache, ".error.log")
    assert "deliberately broken" in error_log.read_text()
    assert entries(cache, ".tmp-") == []
    forced = rt.run_probe(rt.child_env(broken, parent, cache_dir=cache, load="jit"))
    assert str(forced["error"]).startswith("KernelLoadError") and "deliberately broken" in str(
        forced["error"]
    )


# -- a compile killed with SIGKILL -----------------------------------------------------------------


def wait_for_compile(cache: Path, proc: subprocess.Popen[str], timeout: float = 300) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for temp in entries(cache, ".tmp-"):
            if (temp / "build" / "build.ninja").exists():  # the compiler is about to run / running
                return temp
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("the build never started")


def test_compile_killed_by_sigkill_leaves_no_lock_and_next_load_recovers(
    kernel: KernelSpec, jit_parent: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    env = rt.child_env(kernel, jit_parent, cache_dir=cache)
    # Its own session, so the compiler children it leaves behind can be cleaned up afterwards.
    victim = subprocess.Popen(
        [rt.PYTHON, "-c", rt.PROBE],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        temp = wait_for_compile(cache, victim)
        time.sleep(1.0)
        victim.send_signal(signal.SIGKILL)  # the lock holder only: its compiler children live on
        victim.communicate(timeout=60)
        (lock_path,) = entries(cache, ".lock")
        fd = os.open(lock_path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free at once: no stale lock, children hold none
        finally:
            os.close(fd)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(victim.pid, signal.SIGKILL)  # the orphaned compiler processes
    assert temp.exists()  # the half-done build is still there

    started = time.monotonic()
    result = rt.run_probe(env, timeout=600)
    details = info(result)
    assert details["mode"] == "jit" and details["jit"]["cache"] == "built"  # type: ignore[index]
    assert details["jit"]["lock_wait_seconds"] < 1.0  # type: ignore[index]
    assert time.monotonic() - started < 300
    assert entries(cache, ".tmp-") == []  # the killed build's temp dir was cleaned
