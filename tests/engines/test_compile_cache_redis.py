"""The shared compile cache on Redis, for real: Debian's redis-server on 127.0.0.1, sccache in
the build containers (which keep --network none: the connection goes through the factory's
socket relay). A second build of the same variant, in a fresh container with no local cache at
all, gets its objects from Redis.

Slow: two builds of one CPU variant (~1.5 min each here).
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.docker.docker_helpers import REPO, REQUIRED, build, manifest
from wheelfactory.plan.compile_cache_settings import parse_redis

pytestmark = [pytest.mark.docker, pytest.mark.slow]
VARIANT = "torch213-cxx11-cpu-x86_64-linux"
SUMMARY = re.compile(r"^# compile cache \(sccache on (?P<where>\S+)\): (?P<hits>\d+) hits?, (?P<misses>\d+) miss")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = shutil.which("redis-server")
    if server is None:
        message = "redis-server is not installed (Debian: apt-get install redis-server)"
        if REQUIRED:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    port = free_port()
    workdir = tmp_path_factory.mktemp("redis")
    process = subprocess.Popen([server, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly",
                                "no", "--dir", str(workdir)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"redis://127.0.0.1:{port}/0"
    endpoint = parse_redis(url)
    assert endpoint is not None
    from wheelfactory.engines.cache_relay import RedisUnreachable, ping

    deadline = time.monotonic() + 20
    while True:
        try:
            ping(endpoint)
            break
        except RedisUnreachable:
            assert process.poll() is None and time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.2)
    yield url
    process.terminate()
    process.wait(timeout=20)


def compile_cache_line(workdir: Path) -> re.Match[str]:
    entry = manifest(workdir / "dist")[VARIANT]
    assert entry["status"] == "built", entry
    log = (workdir / "dist" / str(entry["log"])).read_text()
    found = [m for m in map(SUMMARY.match, log.splitlines()) if m]
    assert found, "no compile cache summary in the build log"
    return found[-1]


def test_a_fresh_container_with_no_local_cache_gets_its_objects_from_redis(
        redis_url: str, offline_build_tables: str, tmp_path: Path) -> None:
    tables = re.sub(r'^compile_cache_dir = .*$', f'compile_cache_redis = "{redis_url}"', offline_build_tables,
                    flags=re.MULTILINE)
    assert "compile_cache_redis" in tables
    matrix = f"""
[project]
path = "{REPO / 'kernels' / 'fusedops'}"

[matrix]
torch = ["2.13"]
backends = ["cpu"]
{tables}"""
    runs = []
    for name in ("first", "second"):  # separate output directories: the second is not a manifest hit
        workdir = tmp_path / name
        workdir.mkdir()
        (workdir / "matrix.toml").write_text(matrix)
        result = build(workdir)
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
        runs.append(compile_cache_line(workdir))
    first, second = runs
    assert first["where"] == second["where"] == redis_url
    assert int(first["misses"]) > 0  # an empty Redis: everything compiled, and stored
    hits, misses = int(second["hits"]), int(second["misses"])
    assert hits / (hits + misses) >= 0.9, second.group(0)
    # Nothing of the cache is on the host but Redis: the store directory was never used.
    assert "SCCACHE_DIR" not in (tmp_path / "second" / "dist" / VARIANT / "build.log").read_text()
