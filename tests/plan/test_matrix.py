from __future__ import annotations

from collections.abc import Callable

import pytest
from tests.testkit import REPO
from wheelfactory.errors import ConfigError
from wheelfactory.plan.matrix import Matrix


def test_empty_document_gets_useful_defaults(parse: Callable[[str], Matrix]) -> None:
    matrix = parse("")
    assert [b.text for b in matrix.backends] == ["cpu"]
    assert matrix.cxx11_abi == (True, False)
    assert matrix.python == ("abi3",) and matrix.arch == ("x86_64",)
    assert matrix.torch[0].releases[0] == "2.4"  # every release in the table
    assert matrix.project.path == REPO  # beside matrix.toml (conftest parses as if it were in the repo root)
    assert matrix.build.engine == "auto" and matrix.build.out == "dist"


def test_axes(parse: Callable[[str], Matrix]) -> None:
    matrix = parse("""
[matrix]
torch = ["2.6", "2.5.0", ">=2.12", "latest"]
backends = ["cpu", "cuda", "cu124", "rocm6.2"]
cxx11_abi = false
python = ["abi3", "3.11"]
arch = ["x86_64", "aarch64"]
""")
    assert [t.releases for t in matrix.torch] == [("2.6",), ("2.5",), ("2.12", "2.13", "2.14", "2.15"), ("2.15",)]
    assert matrix.torch[1].pin == "2.5.0"
    assert [(b.kind, b.pinned.build_name if b.pinned else None) for b in matrix.backends] == [
        ("cpu", None), ("cuda", None), ("cuda", "cu124"), ("rocm", "rocm6.2")]
    assert matrix.cxx11_abi == (False,)


def test_scalar_axis_is_a_one_item_list(parse: Callable[[str], Matrix]) -> None:
    assert parse('[matrix]\ntorch = "2.6"\n').torch[0].releases == ("2.6",)


def test_settings(parse: Callable[[str], Matrix]) -> None:
    matrix = parse("""
[cuda]
toolkits = [">=12.6", "11.8"]
arch_list = "8.0;9.0a;12.0+PTX"
[rocm]
toolkits = "default"
gfx_targets = ["gfx90a", "gfx942"]
[build]
engine = "host"
jobs = 3
out = "wheels"
base_image = { aarch64 = "my/aarch64:1" }
""")
    assert matrix.cuda.arch_list == ("8.0", "9.0a", "12.0+PTX")
    assert matrix.cuda.toolkits.admits("12.8", False) and matrix.cuda.toolkits.admits("11.8", False)
    assert not matrix.cuda.toolkits.admits("12.4", False)
    assert matrix.rocm.toolkits.admits("6.2", True) and not matrix.rocm.toolkits.admits("6.3", False)
    assert matrix.build.base_image("aarch64") == "my/aarch64:1"
    assert matrix.build.base_image("x86_64").startswith("quay.io/pypa/manylinux_2_28")


@pytest.mark.parametrize("text, expected", [
    ("[matrix]\nbakends = ['cpu']\n", "matrix.toml:2: matrix.bakends: unknown key; did you mean 'backends'?"),
    ("[matrx]\n", "matrix.toml:1: matrx: unknown key; did you mean 'matrix'?"),
    ("[matrix]\ntorch = ['2.3']\n", "matrix.toml:2: matrix.torch: unknown torch version '2.3'"),
    ("[matrix]\ntorch = ['>=3.0']\n", "'>=3.0' selects no torch release"),
    ("[matrix]\ntorch = ['']\n", "empty torch version"),
    ("[matrix]\ntorch = ['two']\n", "neither a torch version nor a version specifier"),
    ("[matrix]\ntorch = 2.6\n", "matrix.torch: must be an array of strings, got number 2.6"),
    ("[matrix]\ntorch = []\n", "matrix.torch: is empty"),
    ("[matrix]\nbackends = ['cuad']\n", "did you mean 'cuda'?"),
    ("[matrix]\nbackends = ['cu999']\n", "CUDA 99.9 (cu999) is not in the compatibility table"),
    ("[matrix]\nbackends = ['cpu', 'CPU']\n", "'CPU' is listed twice"),
    ("[matrix]\ncxx11_abi = 'yes'\n", 'must be true, false or "both", got string \'yes\''),
    ("[matrix]\npython = ['py3']\n", "unknown Python 'py3'"),
    ("[matrix]\narch = ['arm64']\n", "did you mean 'aarch64'?"),
    ("[cuda]\narch_list = 'sm_80'\n", "'sm_80' is not a CUDA compute capability"),
    ("[cuda]\ntoolkits = ['twelve']\n", "'twelve' is neither a toolkit version nor a specifier"),
    ("[rocm]\ngfx_targets = ['mi300']\n", "'mi300' is not a gfx target"),
    ("[build]\nengine = 'dockr'\n", "did you mean 'docker'?"),
    ("[build]\njobs = -1\n", "must be 0 (automatic) or more"),
    ("[build]\njobs = true\n", "must be an integer, got boolean true"),
    ("[build]\ndebian_base = 'bookwrom'\n", "did you mean 'bookworm'?"),
    ("[build]\ndebian_base = 'bookworm'\nbase_image = 'x/y'\n", "and base_image are both set"),
    ("[build]\ndebian_mirror = '127.0.0.1/debian'\n", "is not a mirror URL"),
    ("[build]\ncompile_cache = true\n", "must be one of sccache, ccache or false, not True"),
    ("[build]\ncompile_cache = '~/cc'\n", 'compile_cache = "ccache"'),  # the old form: a ccache directory
    ("[build]\ncompile_cache_dir = ''\n", "must be a directory path"),
    ("[build]\ncompile_cache = 'ccache'\ncompile_cache_redis = 'redis://h'\n", 'needs compile_cache = "sccache"'),
    ("[build]\ncompile_cache_redis = 'redis://:pw@h:1'\n", "is not a Redis URL"),
    ("[build]\nglibc_floor = '2.x'\n", "is not a glibc version"),
    ("[project]\nkind = 'cmake'\n", "unknown project kind 'cmake'"),
    ("[[exclude]]\n", "[[exclude]] entry names no axis"),
    ("[[exclude]]\ntorhc = '2.6'\n", "exclude[1].torhc: unknown key; did you mean 'torch'?"),
    ("[[include]]\ntorch = '>=2.6'\nbackend = 'cpu'\n", "an [[include]] entry needs one torch version"),
    ("[[include]]\ntorch = '2.6'\nbackend = 'cuda'\n", "an [[include]] entry needs a pinned build"),
    ("[matrix\n", "matrix.toml:1: not valid TOML"),
    ("include = 3\n", "include: must be an array of tables ([[include]]), got integer 3"),
])
def test_errors_name_file_key_and_line(parse: Callable[[str], Matrix], text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(text)
    message = str(info.value)
    assert expected in message
    assert message.startswith("matrix.toml")
    assert "\n" not in message


def test_error_line_points_into_array_of_tables(parse: Callable[[str], Matrix]) -> None:
    text = "[[exclude]]\ntorch = '2.6'\n\n[[exclude]]\ntorch = '2.6'\nbackend = 'gpu'\n"
    with pytest.raises(ConfigError) as info:
        parse(text)
    assert str(info.value).startswith("matrix.toml:6: exclude[2].backend: unknown backend 'gpu'")


def test_build_base_and_compile_cache_settings(parse: Callable[[str], Matrix]) -> None:
    from wheelfactory.images.base_image import SUITES
    from wheelfactory.plan.build_config import DEBIAN_SUITES, default_compile_cache

    assert tuple(SUITES) == DEBIAN_SUITES  # the matrix accepts exactly the suites the base builder makes
    from wheelfactory.plan.compile_cache_settings import CompileCache, parse_redis

    default = parse("").build
    assert default.debian_base is None and default.compile_cache == default_compile_cache()
    assert default.compile_cache is not None and default.compile_cache.tool == "sccache"
    build = parse("[build]\ndebian_base = 'bullseye'\ncompile_cache = 'ccache'\ncompile_cache_dir = 'cc'\n").build
    assert build.debian_base == "bullseye" and build.compile_cache == CompileCache("ccache", REPO / "cc")
    shared = parse("[build]\ncompile_cache_redis = 'redis://127.0.0.1:6379/1'\n").build.compile_cache
    assert shared is not None and shared.redis == parse_redis("redis://127.0.0.1:6379/1")
    assert parse("[build]\ncompile_cache = false\n").build.compile_cache is None
