"""The host engine's compiler flags: its path mapping is added to what each build tool would use,
never put in place of Python's own flags (setuptools takes CFLAGS from the environment *instead*
of sysconfig's -O3 -DNDEBUG ...; the real builds are compared in tests/docker/test_docker_byo_shapes.py)."""

from __future__ import annotations

from pathlib import Path

from wheelfactory.engines.host import path_mapping_flags

SRC = Path("/w/.work/v/src")


def test_setuptools_builds_keep_pythons_cflags() -> None:
    flags = path_mapping_flags(SRC, "setuptools", {})
    assert flags == {"CPPFLAGS": "-ffile-prefix-map=/w/.work/v/src=."}  # added by setuptools to its CFLAGS


def test_the_callers_own_flags_stay_after_the_mapping() -> None:
    flags = path_mapping_flags(SRC, "setuptools", {"CPPFLAGS": "-DMINE", "CFLAGS": "-O1"})
    assert flags == {"CPPFLAGS": "-ffile-prefix-map=/w/.work/v/src=. -DMINE"}  # CFLAGS: the caller's, untouched


def test_cmake_and_meson_builds_get_it_where_they_read_it() -> None:
    for family in ("scikit-build-core", "meson-python"):
        flags = path_mapping_flags(SRC, family, {"CXXFLAGS": "-Wall"})
        assert flags["CXXFLAGS"] == "-ffile-prefix-map=/w/.work/v/src=. -Wall"
        assert flags["CFLAGS"] == flags["CPPFLAGS"] == "-ffile-prefix-map=/w/.work/v/src=."
