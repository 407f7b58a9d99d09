"""Environment variables are read in one place, from a mapping tests can pass."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from wheelfactory._runtime._errors import SettingsError
from wheelfactory._runtime._prebuilt import env_prefix
from wheelfactory._runtime._settings import read_settings


def test_defaults() -> None:
    settings = read_settings("fusedops", {"HOME": "/home/alice", "PATH": "/usr/bin"})
    assert settings.load_mode == "auto"
    assert settings.cache_dir == Path("/home/alice/.cache/fusedops")
    assert not settings.cache_dir_from_env
    assert (settings.load_var, settings.cache_var) == ("FUSEDOPS_LOAD", "FUSEDOPS_CACHE_DIR")
    assert settings.cxx is None and settings.torch_cuda_arch_list is None


@pytest.mark.parametrize("mode", ["auto", "prebuilt", "jit", "reference", " JIT ", "Reference"])
def test_load_modes(mode: str) -> None:
    assert read_settings("fusedops", {"FUSEDOPS_LOAD": mode}).load_mode == mode.strip().lower()


def test_empty_load_means_auto() -> None:
    assert read_settings("fusedops", {"FUSEDOPS_LOAD": ""}).load_mode == "auto"


def test_unknown_load_mode_is_refused_naming_the_variable() -> None:
    with pytest.raises(
        SettingsError, match=r"FUSEDOPS_LOAD='fast' is not one of auto, prebuilt, jit, reference"
    ):
        read_settings("fusedops", {"FUSEDOPS_LOAD": "fast"})


def test_cache_dir_override_expands_user(tmp_path: Path) -> None:
    settings = read_settings("fusedops", {"FUSEDOPS_CACHE_DIR": "~/kcache", "HOME": str(tmp_path)})
    assert settings.cache_dir_from_env
    assert settings.cache_dir == tmp_path / "kcache"


def test_prefix_is_generic() -> None:
    assert env_prefix("my-kernels.v2") == "MY_KERNELS_V2"
    settings = read_settings("my-kernels", {"MY_KERNELS_LOAD": "jit", "MY_KERNELS_CACHE_DIR": "/c"})
    assert (settings.load_mode, settings.cache_dir) == ("jit", Path("/c"))


def test_toolchain_variables() -> None:
    settings = read_settings(
        "fusedops",
        {
            "CXX": "clang++",
            "CUDA_PATH": "/opt/cuda",
            "ROCM_HOME": "/opt/rocm",
            "TORCH_CUDA_ARCH_LIST": "9.0",
            "PATH": "/bin",
        },
    )
    assert (settings.cxx, settings.cuda_home, settings.rocm_home) == ("clang++", "/opt/cuda", "/opt/rocm")
    assert (settings.torch_cuda_arch_list, settings.path) == ("9.0", "/bin")
    assert read_settings("x", {"CUDA_HOME": "/a", "CUDA_PATH": "/b"}).cuda_home == "/a"


@pytest.mark.parametrize(("env", "words"), [
    ({"FUSEDOPS_CACHE_DIR": "~no-such-user-here/c", "HOME": "/home/a"}, "names a user this machine does not know"),
    ({"FUSEDOPS_CACHE_DIR": "relative/cache", "HOME": "/home/a"}, "is relative"),
    ({"HOME": "relative-home"}, "HOME='relative-home' is not absolute"),
])
def test_a_cache_that_would_follow_the_current_directory_is_refused_when_needed(env: dict[str, str],
                                                                               words: str) -> None:
    """Refused in one line by the JIT, which needs the cache; a prebuilt load never reads it."""
    settings = read_settings("fusedops", env)
    assert settings.cache_problem is not None and words in settings.cache_problem
    assert "Fix:" in settings.cache_problem and "\n" not in settings.cache_problem


def test_a_known_users_home_and_an_absolute_cache_are_used() -> None:
    root = os.path.expanduser("~root")
    settings = read_settings("fusedops", {"FUSEDOPS_CACHE_DIR": "~root/kc", "HOME": "/home/a"})
    assert settings.cache_problem is None and settings.cache_dir == Path(root) / "kc"
    assert read_settings("fusedops", {"FUSEDOPS_CACHE_DIR": "/abs/c"}).cache_dir == Path("/abs/c")
    assert read_settings("fusedops", {"HOME": "/home/a"}).cache_dir == Path("/home/a/.cache/fusedops")
