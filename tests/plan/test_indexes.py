"""Indexes by alias and the Debian mirror, from the user's configuration (plan/indexes.py).

No registry host appears here: URLs are 127.0.0.1 addresses or file:// paths.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from wheelfactory.engines.choose import torch_indexes
from wheelfactory.errors import ConfigError
from wheelfactory.plan.compat import CompatTable
from wheelfactory.plan.expand import expand
from wheelfactory.plan.indexes import (
    PYPI,
    Indexes,
    IndexRef,
    InvalidIndexRef,
    debian_mirror,
    env_name,
    parse_apt_sources,
    read_apt_sources,
)
from wheelfactory.plan.matrix import Matrix

LOCAL = "http://127.0.0.1:8080/whl"


# --- index references ---

@given(st.from_regex(r"[a-z][a-z0-9_-]{0,8}", fullmatch=True),
       st.lists(st.from_regex(r"[a-z0-9][a-z0-9.+-]{0,8}", fullmatch=True), max_size=2))
def test_ref_round_trips(alias: str, parts: list[str]) -> None:
    ref = IndexRef(alias, "/".join(parts))
    assert IndexRef.parse(str(ref)) == ref


@pytest.mark.parametrize("text", ["", "PyPI", "https://x", "pytorch/", "pytorch//cu126", "pytorch/../x",
                                  "1x"])
def test_bad_refs_quote_the_text(text: str) -> None:
    with pytest.raises(InvalidIndexRef, match="is not an index alias"):
        IndexRef.parse(text)


# --- resolution ---

def test_pypi_is_the_hosts_pip_configuration() -> None:
    assert Indexes().url(IndexRef(PYPI)) is None
    # pypi cannot be pointed elsewhere by us: pip's own configuration says where it is
    assert Indexes.configure((), {env_name(PYPI): LOCAL}).url(IndexRef(PYPI)) is None


def test_an_alias_is_its_url_plus_the_path() -> None:
    indexes = Indexes.configure([("pytorch", LOCAL + "/")], {})
    assert indexes.url(IndexRef("pytorch", "cu126")) == LOCAL + "/cu126"
    assert indexes.url(IndexRef("pytorch")) == LOCAL + "/"
    templated = Indexes.configure([("pytorch", "file:///srv/{path}/simple")], {})
    assert templated.url(IndexRef("pytorch", "cpu-cxx11-abi")) == "file:///srv/cpu-cxx11-abi/simple"


def test_the_environment_wins_over_the_matrix() -> None:
    env = {"WHEELFACTORY_INDEX_PYTORCH": "http://127.0.0.1:9/whl", "WHEELFACTORY_INDEX_MY_MIRROR": LOCAL,
           "WHEELFACTORY_INDEX_EMPTY": " ", "OTHER": "x"}
    indexes = Indexes.configure([("pytorch", LOCAL)], env)
    assert indexes.url(IndexRef("pytorch", "cpu")) == "http://127.0.0.1:9/whl/cpu"
    assert indexes.url(IndexRef("my-mirror", "cpu")) == LOCAL + "/cpu"
    assert indexes.url(IndexRef("my_mirror", "cpu")) == LOCAL + "/cpu"
    assert env_name("my-mirror") == "WHEELFACTORY_INDEX_MY_MIRROR"
    with pytest.raises(ConfigError):
        indexes.url(IndexRef("empty"))


def test_an_unconfigured_alias_is_one_line_naming_it_and_what_to_set() -> None:
    with pytest.raises(ConfigError) as raised:
        Indexes(file="m.toml").url(IndexRef("pytorch", "cu130"))
    message = str(raised.value)
    assert "\n" not in message and "'pytorch'" in message
    assert "WHEELFACTORY_INDEX_PYTORCH=" in message and "[indexes] in m.toml" in message


def test_torch_url_override() -> None:
    indexes = Indexes.configure([("pytorch", LOCAL), ("mirror", "file:///srv/whl")], {})
    table_ref = IndexRef("pytorch", "cu118")
    assert indexes.torch_url(table_ref, "cu118", None) == LOCAL + "/cu118"
    assert indexes.torch_url(IndexRef(PYPI), "cu124", None) is None
    assert indexes.torch_url(table_ref, "cu118", PYPI) is None
    # PyPI's build too, from another alias: its path on a per-build index
    assert indexes.torch_url(IndexRef(PYPI), "cu124", "mirror") == "file:///srv/whl/cu124"
    assert indexes.torch_url(table_ref, "cu118", "http://127.0.0.1:1/simple") == "http://127.0.0.1:1/simple"


# --- matrix.toml ---

def test_matrix_indexes_and_torch_index(parse: Callable[[str], Matrix]) -> None:
    matrix = parse(f'[indexes]\npytorch = "{LOCAL}"\n[build]\ntorch_index = "pytorch"\n')
    assert matrix.indexes == (("pytorch", LOCAL),) and matrix.build.torch_index == "pytorch"
    assert parse(f'[build]\ntorch_index = "{LOCAL}"\n').build.torch_index == LOCAL


@pytest.mark.parametrize(("text", "message"), [
    ('[indexes]\npypi = "http://127.0.0.1/simple"\n', "indexes.pypi: is the index pip is configured with"),
    ('[indexes]\nPyTorch = "http://127.0.0.1/whl"\n', "is not an index alias"),
    ('[indexes]\npytorch = "127.0.0.1/whl"\n', "is not an index URL"),
    ('[indexes]\npytorch = 1\n', "must be a string"),
    ('[build]\ntorch_index = "Py Pi"\n', "is neither an index alias nor an index URL"),
])
def test_matrix_rejects_bad_indexes(parse: Callable[[str], Matrix], text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse(text)


def test_each_variant_gets_its_url_or_a_reason(parse: Callable[[str], Matrix], table: CompatTable) -> None:
    text = '[matrix]\ntorch = ["2.6"]\nbackends = ["cpu", "cuda"]\ncxx11_abi = "both"\n'
    matrix = parse(text)
    variants = expand(matrix, table).variants
    urls, refusals = torch_indexes(variants, matrix, table, {"WHEELFACTORY_INDEX_PYTORCH": LOCAL},
                                   matrix_file="m.toml")
    assert urls["torch26-cxx98-cu124-x86_64-linux"] is None  # PyPI's build: the host's pip index
    assert urls["torch26-cxx98-cu118-x86_64-linux"] == LOCAL + "/cu118"
    assert urls["torch26-cxx11-cpu-x86_64-linux"] == LOCAL + "/cpu-cxx11-abi"
    assert refusals == {}
    # Not configured: the variants that need the alias fail at once, each with the one line.
    urls, refusals = torch_indexes(variants, matrix, table, {}, matrix_file="m.toml")
    assert "torch26-cxx98-cu124-x86_64-linux" in urls and "torch26-cxx98-cu118-x86_64-linux" in refusals
    assert "WHEELFACTORY_INDEX_PYTORCH" in refusals["torch26-cxx98-cu118-x86_64-linux"]
    # [build] torch_index naming an alias nobody configured stops the run before anything starts.
    with pytest.raises(ConfigError, match="index alias 'mirror' is not configured"):
        torch_indexes(variants, parse(text + '[build]\ntorch_index = "mirror"\n'), table, {},
                      matrix_file="m.toml")
    pypi = parse(text + '[build]\ntorch_index = "pypi"\n')
    urls, refusals = torch_indexes(variants, pypi, table, {}, matrix_file="m.toml")
    assert "torch26-cxx98-cu118-x86_64-linux" in refusals and urls["torch26-cxx98-cpu-x86_64-linux"] is None


# --- the Debian mirror from the host's apt sources ---

DEB822 = """\
# comments and other repositories first
Types: deb
URIs: https://127.0.0.1:9443/apt
Suites: nodistro
Components: main

Types: deb
URIs: http://127.0.0.2/debian-security
Suites: bookworm-security
Components: main

Types: deb-src
URIs: http://127.0.0.3/debian
Suites: bookworm
Components: main

Enabled: no
Types: deb
URIs: http://127.0.0.4/debian
Suites: bookworm
Components: main

Types: deb
# a comment inside a stanza
URIs: http://127.0.0.5/debian/
 http://127.0.0.6/debian
Suites: bookworm bookworm-updates
Components: main contrib
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""

ONE_LINE = """\
# deb http://127.0.0.7/debian bookworm main
deb-src http://127.0.0.8/debian bookworm main
deb https://127.0.0.9/apt cloud-sdk-bookworm main
deb http://127.0.0.10/debian bookworm-updates main
deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://127.0.0.11/debian/ trixie main non-free  # the one
deb http://127.0.0.12/debian bookworm main
"""


def test_deb822_takes_the_first_debian_main_archive() -> None:
    assert parse_apt_sources([("debian.sources", DEB822)]) == "http://127.0.0.5/debian"


def test_one_line_format_skips_sources_security_and_other_repositories() -> None:
    assert parse_apt_sources([("sources.list", ONE_LINE)]) == "http://127.0.0.11/debian"


def test_nothing_found_is_none() -> None:
    assert parse_apt_sources([]) is None
    cdrom = "deb file:///media/cdrom bookworm main\n"
    assert parse_apt_sources([("x.list", cdrom), ("y.sources", "")]) is None


def apt_root(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "etc" / "apt" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_files_are_read_in_apts_order(tmp_path: Path) -> None:
    disabled = "deb http://127.0.0.13/debian bookworm main\n"
    root = apt_root(tmp_path, {"sources.list.d/b.sources": DEB822, "sources.list.d/a.list": ONE_LINE,
                               "sources.list.d/0.list.disabled": disabled})
    assert [Path(p).name for p, _ in read_apt_sources(root)] == ["a.list", "b.sources"]
    assert debian_mirror(None, root=root) == "http://127.0.0.11/debian"
    apt_root(tmp_path, {"sources.list": "deb http://127.0.0.14/debian bookworm main\n"})
    assert debian_mirror(None, root=root) == "http://127.0.0.14/debian"  # sources.list comes first


def test_configured_mirror_wins_and_none_at_all_is_one_line(tmp_path: Path) -> None:
    assert debian_mirror("http://127.0.0.15/debian/", root=tmp_path) == "http://127.0.0.15/debian"
    with pytest.raises(ConfigError) as raised:
        debian_mirror(None, root=apt_root(tmp_path, {"sources.list.d/x.sources": "Types: deb\n"}))
    message = str(raised.value)
    assert "\n" not in message and "set [build] debian_mirror" in message and "--mirror" in message
