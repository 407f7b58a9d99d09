"""[publish] and --to: each target string is read into its kind, and bad ones are one line naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from wheelfactory.errors import ConfigError
from wheelfactory.plan.identity import VariantId
from wheelfactory.plan.publish_config import (
    BucketTarget,
    DirectoryTarget,
    InvalidTarget,
    UploadTarget,
    parse_target,
)


def test_each_kind_is_read(tmp_path: Path) -> None:
    bucket = parse_target("s3://my-bucket/whl/", base_dir=tmp_path, endpoint_url="http://127.0.0.1:9000")
    assert bucket == BucketTarget("my-bucket", "whl", "http://127.0.0.1:9000", None)
    assert bucket.key("index.html") == "whl/index.html" and str(bucket) == "s3://my-bucket/whl"
    assert parse_target("./site", base_dir=tmp_path) == DirectoryTarget(tmp_path / "site", None)
    assert parse_target("file:///srv/whl", base_dir=tmp_path) == DirectoryTarget(Path("/srv/whl"), None)
    devpi = parse_target("http://127.0.0.1:3141/me/{variant}/", base_dir=tmp_path)
    assert isinstance(devpi, UploadTarget) and devpi.per_variant and devpi.local_labels
    assert devpi.upload_url("v1") == "http://127.0.0.1:3141/me/v1/"
    assert devpi.simple_url("v1") == "http://127.0.0.1:3141/me/v1/+simple/"
    plain = parse_target("http://127.0.0.1:8080/", base_dir=tmp_path)
    assert isinstance(plain, UploadTarget) and plain.simple_url("v1") == "http://127.0.0.1:8080/simple/"
    pypi = parse_target("pypi", base_dir=tmp_path)
    assert pypi == UploadTarget(None, "pypi", None, False)  # PyPI refuses local labels
    assert parse_target("internal", base_dir=tmp_path) == UploadTarget(None, "internal", None, True)


@pytest.mark.parametrize(("text", "keys", "expected"), [
    ("", {}, "empty target"),
    ("s3://A_B/x", {}, "not an S3 bucket name"),
    ("s3://bucket/a/../b", {}, "no . or .. parts"),
    ("http://user:secret@127.0.0.1/", {}, "holds credentials"),
    ("ftp://host/x", {}, "unknown scheme"),
    ("./site", {"endpoint_url": "http://127.0.0.1:9000"}, "endpoint_url does not apply"),
    ("pypi", {"base_url": "http://127.0.0.1/"}, "base_url does not apply"),
    ("site", {"base_url": "http://127.0.0.1/"}, "write ./site for a directory"),
    ("http://127.0.0.1/{variant}/{variant}/", {}, "twice"),
    ("s3://bucket", {"base_url": "s3://x"}, "not an http:// or https:// URL"),
])
def test_bad_targets_say_what_is_wrong(tmp_path: Path, text: str, keys: dict[str, str], expected: str) -> None:
    with pytest.raises(InvalidTarget, match=expected) as caught:
        parse_target(text, base_dir=tmp_path, **keys)  # type: ignore[arg-type]
    assert "secret" not in str(caught.value)  # a password is never repeated back


def test_the_publish_table(parse, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    matrix = parse("""
[publish]
pypi_default = "torch213-cxx11-cpu-x86_64-linux"
[[publish.bucket]]
url = "s3://my-bucket/whl"
endpoint_url = "http://127.0.0.1:9000"
[[publish.directory]]
path = "site"
[[publish.upload]]
url = "http://127.0.0.1:3141/me/{variant}/"
[[publish.upload]]
url = "pypi"
""")
    kinds = [type(t).__name__ for t in matrix.publish.targets]
    assert kinds == ["BucketTarget", "DirectoryTarget", "UploadTarget", "UploadTarget"]
    assert matrix.publish.pypi_default == VariantId.parse("torch213-cxx11-cpu-x86_64-linux")


@pytest.mark.parametrize(("text", "expected"), [
    ('[[publish.bucket]]\nurl = "s3://Bad_Name"\n', "publish.bucket[1].url"),
    ('[[publish.directory]]\npath = "s3://b/x"\n', "is a URL, not a directory"),
    ('[[publish.upload]]\nurl = "http://u:pw@127.0.0.1/"\n', "holds credentials"),
    ('[publish]\npypi_default = "cu130"\n', "publish.pypi_default"),
    ('[[publish.upload]]\nurl = "pypi"\nlocal_label = false\n', "did you mean"),
])
def test_bad_publish_tables_name_the_key(parse, text: str, expected: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match="matrix.toml") as caught:
        parse(text)
    assert expected in str(caught.value)
    assert "pw@" not in str(caught.value)
