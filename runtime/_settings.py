"""Every environment variable the runtime honours is read here, and only here.

``read_settings`` takes the environment as a mapping so tests pass a plain dict; the loader
calls it once, at load time (never at import). The one exception is ``<PKG>_LOAD`` on the
prebuilt hot path, which ``_prebuilt.load_mode`` reads; ``read_settings`` reads it through that
same function.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from ._errors import SettingsError
from ._prebuilt import env_prefix, load_mode

__all__ = ["LOAD_MODES", "Settings", "read_settings"]

LOAD_MODES: tuple[str, ...] = ("auto", "prebuilt", "jit", "reference")


class Settings(NamedTuple):
    """The runtime's configuration, from environment variables (immutable; a NamedTuple because
    defining it is ~10x cheaper than a dataclass, and it is defined inside a measured first call)."""

    package: str
    prefix: str
    load_mode: str
    cache_dir: Path
    cache_dir_from_env: bool
    # Toolchain inputs. They change what a JIT build produces, so they feed its hash.
    cxx: str | None
    path: str | None
    cuda_home: str | None
    rocm_home: str | None
    torch_cuda_arch_list: str | None
    pytorch_rocm_arch: str | None
    # why there is no usable cache directory (the JIT refuses, saying it)
    cache_problem: str | None = None

    @property
    def load_var(self) -> str:
        return f"{self.prefix}_LOAD"

    @property
    def cache_var(self) -> str:
        return f"{self.prefix}_CACHE_DIR"


def _nonempty(environ: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = environ.get(name, "").strip()
        if value:
            return value
    return None


def read_settings(package: str, environ: Mapping[str, str] | None = None) -> Settings:
    """Read ``<PKG>_LOAD``, ``<PKG>_CACHE_DIR`` and the toolchain variables."""
    env = os.environ if environ is None else environ
    prefix = env_prefix(package)
    mode = load_mode(package, env)
    if mode not in LOAD_MODES:
        raise SettingsError(
            f"{prefix}_LOAD={env.get(f'{prefix}_LOAD')!r} is not one of {', '.join(LOAD_MODES)}"
        )
    custom_cache = _nonempty(env, f"{prefix}_CACHE_DIR")
    cache_dir, cache_problem = _cache_dir(package, prefix, custom_cache, _nonempty(env, "HOME"))
    return Settings(
        package=package,
        prefix=prefix,
        load_mode=mode,
        cache_dir=cache_dir,
        cache_dir_from_env=custom_cache is not None,
        cxx=_nonempty(env, "CXX"),
        path=env.get("PATH"),
        cuda_home=_nonempty(env, "CUDA_HOME", "CUDA_PATH"),
        rocm_home=_nonempty(env, "ROCM_HOME", "ROCM_PATH"),
        torch_cuda_arch_list=_nonempty(env, "TORCH_CUDA_ARCH_LIST"),
        pytorch_rocm_arch=_nonempty(env, "PYTORCH_ROCM_ARCH"),
        cache_problem=cache_problem,
    )


def _cache_dir(
    package: str, prefix: str, custom: str | None, home_var: str | None
) -> tuple[Path, str | None]:
    """The JIT cache's directory, absolute, and None; or a placeholder and why there is none: a
    cache that would follow the current directory (a relative path, a relative HOME) or a ``~user``
    that names nobody is refused, in one line, when the JIT needs it (a prebuilt load never does)."""
    var = f"{prefix}_CACHE_DIR"
    if (
        custom is not None
        and custom.startswith("~")
        and not (custom == "~" or custom.startswith("~/"))
    ):
        expanded = os.path.expanduser(custom)
        if expanded == custom:
            return Path(
                custom
            ), f"{var}={custom!r} names a user this machine does not know. Fix: an absolute path"
        custom = expanded
    if custom is not None and not (custom == "~" or custom.startswith("~/")):
        if not os.path.isabs(custom):
            return Path(custom), (
                f"{var}={custom!r} is relative: the cache would move with the current "
                "directory. Fix: an absolute path (or ~/...)"
            )
        return Path(os.path.abspath(custom)), None
    if home_var is not None and not os.path.isabs(home_var):
        return Path(home_var), (
            f"HOME={home_var!r} is not absolute: the cache would move with the current "
            f"directory. Fix: set HOME to an absolute path, or {var}"
        )
    home = Path(home_var) if home_var else Path.home()
    below = custom[2:] if custom is not None else os.path.join(".cache", package)
    return Path(os.path.abspath(home / below)), None
