"""Hostile JIT cache entries, generated: whatever is planted in an entry (links in or out, FIFOs,
devices, modes others can write, records naming odd files), verify_entry answers at once, and it
accepts an entry only when every file it reads and loads is a private regular file of the entry
whose bytes match the record."""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wheelfactory._runtime._cache import CompletionRecord, sha256_file, verify_entry

PAYLOAD = b"\x7fELF" + b"k" * 600
# What can stand where the record or the library should be.
SHAPES = ("file", "fifo", "link-inside", "link-outside", "link-dev-zero", "directory", "missing")
LIBRARY_NAMES = ("lib.so", ".", "..", "", "sub/lib.so", "complete.json", "build.log", "other.so")


def plant(path: Path, shape: str, content: bytes, outside: Path) -> None:
    """``path`` made into ``shape``; an inside link points at a regular copy of ``content``."""
    if shape == "file":
        path.write_bytes(content)
    elif shape == "fifo":
        os.mkfifo(path)
    elif shape == "link-inside":
        twin = path.with_name(path.name + ".real")
        twin.write_bytes(content)
        path.symlink_to(twin.name)
    elif shape == "link-outside":
        target = outside / path.name
        target.write_bytes(content)
        path.symlink_to(target)
    elif shape == "link-dev-zero":
        path.symlink_to("/dev/zero")
    elif shape == "directory":
        path.mkdir()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_shape=st.sampled_from(SHAPES), library_shape=st.sampled_from(SHAPES),
       library=st.sampled_from(LIBRARY_NAMES), entry_mode=st.sampled_from([0o700, 0o755, 0o775, 0o777, 0o757]),
       file_mode=st.sampled_from([0o600, 0o644, 0o664, 0o666]), entry_is_link=st.booleans())
def test_a_hostile_entry_is_refused_at_once_and_a_sound_one_accepted(
        record_shape: str, library_shape: str, library: str, entry_mode: int, file_mode: int,
        entry_is_link: bool) -> None:
    root = Path(tempfile.mkdtemp(prefix="wf-cache-fuzz-"))
    try:
        outside = root / "outside"
        outside.mkdir()
        real = root / ("real-entry" if entry_is_link else "k")
        real.mkdir()
        entry = root / "k"
        if entry_is_link:
            entry.symlink_to(real)
        (real / "build.log").write_text("log\n")
        plain = library not in (".", "..", "", "complete.json") and "/" not in library
        if plain and library != "build.log":
            plant(real / library, library_shape, PAYLOAD, outside)
            if library_shape == "file":
                (real / library).chmod(file_mode)
        record = {"schema": 1, **CompletionRecord(library, _digest(PAYLOAD), len(PAYLOAD), "_x_jit_k", "k")._asdict()}
        plant(real / "complete.json", record_shape, json.dumps(record).encode(), outside)
        real.chmod(entry_mode)

        found: list[tuple[object, str]] = []
        worker = threading.Thread(target=lambda: found.append(verify_entry(entry, "k", "_x_jit_k")), daemon=True)
        worker.start()
        worker.join(20)
        assert not worker.is_alive(), "verify_entry blocked"
        accepted, reason = found[0]

        sound = (not entry_is_link and not entry_mode & 0o022 and record_shape == "file"
                 and plain and library != "build.log" and library_shape == "file" and not file_mode & 0o022)
        assert (accepted is not None) == sound, (reason, record_shape, library_shape, library, oct(entry_mode))
        if accepted is None:
            assert reason and "\n" not in reason
    finally:
        for path in root.rglob("*"):
            if path.is_dir() and not path.is_symlink():
                path.chmod(stat.S_IRWXU)
        shutil.rmtree(root, ignore_errors=True)


def _digest(data: bytes) -> str:
    with tempfile.NamedTemporaryFile() as handle:
        handle.write(data)
        handle.flush()
        return sha256_file(Path(handle.name))
