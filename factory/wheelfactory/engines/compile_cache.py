"""The compile cache build containers share: sccache by default (it understands nvcc), ccache
as the alternative, with a local directory or, for sccache, a Redis server as the store.

Pure: from the ``[build]`` settings to what a container needs (mounts, variables, the shell
lines that put the cache in front of the compilers, and the line that saves its statistics),
and from those statistics to a summary. The Docker engine applies it; ``cacherelay`` carries a
Redis connection into a container that has no network.

How the cache sits in front of the compilers: torch's extension build runs ``c++`` (or $CXX)
through ninja, setuptools without ninja runs the interpreter's configured CC (``gcc``, or
``x86_64-linux-gnu-gcc`` with Debian's Python), and nvcc runs from $PYTORCH_NVCC when set. Shims
named after each of those come first on PATH and exec the cache with the real compiler's
absolute path; torch's own wrapper (which would put ccache in front a second time where the
image has it) is turned off.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from wheelfactory.plan.compile_cache_settings import CompileCache, Tool

SHIMS = "/tmp/wheelfactory-cc"  # inside the container
STORE = "/wf-cache/store"  # the local directory, mounted
STATS = "/wf-cache/stats"  # where the statistics are written, mounted
SETUP_SCRIPT = "cache-setup.sh"  # written into the stats directory, run before the build
RELAY = "/wf-cache/redis"  # the relay's socket directory (cacherelay), mounted
RELAY_SOCKET = "redis.sock"
# the in-container half of the relay (factory/wheelfactory/engines/socketpipe.py)
RELAY_SCRIPT = "socketpipe.py"
RELAY_PORT = 6379  # on the container's own loopback, which --network none keeps
ALWAYS = ("cc", "c++")  # what torch's ninja build calls (unless $CXX says otherwise)
NVCC_HOST = ("gcc", "g++")  # what nvcc runs as its host compiler


@dataclass(frozen=True)
class Wiring:
    """What one build container needs for the cache."""

    mounts: tuple[tuple[Path, str], ...]  # (host path, container path)
    env: dict[str, str] = field(default_factory=dict)
    path_prefix: str = SHIMS
    setup: str = ""  # a sh script (written to the stats directory, run before the build): the shims
    save_stats: str = ""  # shell, after the build (cibuildwheel's repair step): statistics to STATS


def stats_name(cache: CompileCache, variant_id: str) -> str:
    """The statistics file a build leaves in its stats directory."""
    return f"{variant_id}.{'json' if cache.tool == 'sccache' else 'log'}"


# The compilers a build actually calls, by name, found inside the container (the compile cache's
# shims and the -march=native shims of engines/cpu_baseline.py are both made for these): cc and c++ (torch's
# ninja build), the interpreter's configured CC and CXX (what setuptools' own compiler runs
# without ninja: "gcc" on manylinux, "x86_64-linux-gnu-gcc" on Debian), and $CC/$CXX when the
# project's settings name one. Each is resolved to its real path before any shim exists.
COMPILER_NAMES = r"""
names="{always}"
for w in $(python -c 'import sysconfig
for v in ("CC", "CXX"):
    print((sysconfig.get_config_var(v) or "").split(" ")[0])') ${{CC%% *}} ${{CXX%% *}}; do
  case "$w" in */*) continue ;; esac
  case " {skip} " in *" $w "*) continue ;; esac
  case " $names " in *" $w "*) ;; *) names="$names $w" ;; esac
done
resolved=""
for c in $names; do r="$(command -v "$c")" && resolved="$resolved $c=$r" || true; done
mkdir -p {shims}
"""


def wiring(
    cache: CompileCache,
    variant_id: str,
    *,
    stats_dir: Path,
    relay_dir: Path | None,
    nvcc: bool = False,
) -> Wiring:
    """``nvcc``: the build may run nvcc, whose host compiler (gcc/g++ on PATH) must stay the real
    one for sccache (through a shim, sccache's probe of nvcc fails; Debian's CUDA 12.4 pins an
    older g++ than the suite's default). ccache is transparent to nvcc: it fronts gcc/g++ too."""
    stats_file = f"{STATS}/{stats_name(cache, variant_id)}"
    env = {"TORCH_NO_COMPILER_WRAPPER": "1"}  # torch >= 2.10 would put ccache in front of our shims
    if cache.tool == "ccache":
        # Paths relative to the project (CCACHE_BASEDIR), so the staged copy's place does not matter.
        env.update(
            {
                "CCACHE_DIR": STORE,
                "CCACHE_BASEDIR": "/project",
                "CCACHE_NOHASHDIR": "true",
                "CCACHE_COMPILERCHECK": "content",
                "CCACHE_STATSLOG": stats_file,
            }
        )
        names = COMPILER_NAMES.format(always=" ".join((*ALWAYS, *NVCC_HOST)), skip="", shims=SHIMS)
        setup = (
            f'set -e\n{names}C="$(command -v ccache)"\n'
            f'for pair in $resolved; do ln -sf "$C" {SHIMS}/"${{pair%%=*}}"; done\n'
        )
        return Wiring(mounts=((cache.directory, STORE), (stats_dir, STATS)), env=env, setup=setup)
    mounts = [(stats_dir, STATS)]
    if cache.redis is not None:
        if relay_dir is None:
            raise ValueError("a Redis store needs the relay's socket directory")
        mounts.append((relay_dir, RELAY))
        # sccache 0.16 refuses unix:// endpoints: it talks TCP to the container's loopback, where
        # socketpipe.py (started below) carries the connection to the mounted socket.
        env["SCCACHE_REDIS_ENDPOINT"] = f"redis://127.0.0.1:{RELAY_PORT}"
    else:
        mounts.append((cache.directory, STORE))
        env["SCCACHE_DIR"] = STORE
    env.update(
        {
            "SCCACHE_IDLE_TIMEOUT": "0",  # the server lives as long as the container
            "SCCACHE_ERROR_LOG": f"{STATS}/{variant_id}.server.log",
            "PYTORCH_NVCC": f"{SHIMS}/sccache nvcc",  # torch >= 2.1 runs nvcc through this
            "TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES": "1",  # sccache does not take nvcc's -MD
        }
    )
    relay = ""
    if cache.redis is not None:  # returns once listening, serves from a detached child
        relay = (
            f"python {RELAY}/{RELAY_SCRIPT} --listen tcp:127.0.0.1:{RELAY_PORT} "
            f"--to unix:{RELAY}/{RELAY_SOCKET} --background\n"
        )
    always = ALWAYS if nvcc else (*ALWAYS, *NVCC_HOST)
    names = COMPILER_NAMES.format(
        always=" ".join(always), skip=" ".join(NVCC_HOST) if nvcc else "", shims=SHIMS
    )
    # sccache comes from the prepared tools environment (on PATH); each shim holds the real
    # compiler's absolute path.
    setup = (
        f'set -e\n{relay}{names}ln -sf "$(command -v sccache)" {SHIMS}/sccache\n'
        f"for pair in $resolved; do\n"
        f'  printf \'#!/bin/sh\\nexec {SHIMS}/sccache %s "$@"\\n\' "${{pair#*=}}" > {SHIMS}/"${{pair%%=*}}"\n'
        f'  chmod +x {SHIMS}/"${{pair%%=*}}"\n'
        f"done\n{SHIMS}/sccache --start-server\n"
    )
    # Stopping the server waits for its pending writes, so the store holds this build's objects.
    save = (
        f"{SHIMS}/sccache --show-stats --stats-format=json > {stats_file} 2>/dev/null; "
        f"{SHIMS}/sccache --stop-server > /dev/null 2>&1; true"
    )
    return Wiring(mounts=tuple(mounts), env=env, setup=setup, save_stats=save)


@dataclass(frozen=True)
class CacheStats:
    hits: int
    misses: int
    errors: int = 0
    by_language: tuple[tuple[str, int, int], ...] = ()  # (language, hits, misses)

    @property
    def hit_rate(self) -> float | None:
        total = self.hits + self.misses
        return self.hits / total if total else None

    def describe(self) -> str:
        text = f"{self.hits} hit{'s' * (self.hits != 1)}, {self.misses} miss{'es' * (self.misses != 1)}"
        if self.hit_rate is not None:
            text += f" (hit rate {self.hit_rate:.0%})"
        if self.errors:
            text += f", {self.errors} error(s)"
        if len(self.by_language) > 1:
            text += "; " + ", ".join(f"{lang} {h}/{h + m}" for lang, h, m in self.by_language)
        return text


def read_stats(tool: Tool, path: Path) -> CacheStats | None:
    """The statistics a build saved (None: nothing was saved: the build stopped before)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    if tool == "ccache":  # CCACHE_STATSLOG: one result per compile
        lines = [line.strip() for line in text.splitlines()]
        return CacheStats(
            sum(line.endswith("cache_hit") for line in lines),
            sum(line == "cache_miss" for line in lines),
        )
    try:
        stats = json.loads(text)["stats"]
    except (ValueError, KeyError, TypeError):
        return None

    def counts(name: str) -> dict[str, int]:
        value = stats.get(name, {})
        return {
            str(k): int(v)
            for k, v in (value.get("counts", {}) if isinstance(value, dict) else {}).items()
        }

    hits, misses = counts("cache_hits"), counts("cache_misses")
    languages = tuple(
        (lang, hits.get(lang, 0), misses.get(lang, 0)) for lang in sorted(set(hits) | set(misses))
    )
    errors = sum(counts("cache_errors").values())
    return CacheStats(sum(hits.values()), sum(misses.values()), errors, languages)
