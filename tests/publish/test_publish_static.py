"""`wheelfactory publish` to a directory and to a bucket over the S3 API (moto's standalone server
on 127.0.0.1 stands in for the service): releases accumulate, a published file never changes, a
rerun writes nothing, and a publish killed anywhere leaves pages that link only files that exist."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import unquote

import pytest
from tests.publish.dist_fakes import make_dist
from tests.index_servers import S3Server, dangling_links, tree
from tests.testkit import pip_install, run_cli

BASE = "http://127.0.0.1:8000/whl"
VARIANTS = ("torch213-cxx11-cpu-x86_64-linux", "torch26-cxx98-cpu-x86_64-linux")


def release(tmp_path: Path, version: str, name: str = "") -> Path:
    """A dist of two CPU variants of ``tiny`` at ``version`` (small valid wheels, manifest, records)."""
    dist = tmp_path / (name or f"dist-{version}")
    make_dist(dist, version=version, variants=VARIANTS)
    return dist


def test_releases_accumulate_in_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = tmp_path / "site"
    first, second = release(tmp_path, "0.1.0"), release(tmp_path, "0.2.0")
    assert run_cli("publish", "-o", str(first), "--to", str(site), "--base-url", BASE) == 0
    assert run_cli("publish", "-o", str(second), "--to", str(site), "--base-url", BASE) == 0
    listing = json.loads((site / "index.json").read_text())
    assert sorted(v["version"] for v in listing["variants"]) == sorted(
        ["0.1.0+cputorch2.13", "0.1.0+cputorch2.6cxx98", "0.2.0+cputorch2.13", "0.2.0+cputorch2.6cxx98"])
    for variant in VARIANTS:
        page = (site / variant / "simple" / "tiny" / "index.html").read_text()
        assert "tiny-0.1.0" in page and "tiny-0.2.0" in page, page  # the first release is still listed
        api = json.loads((site / variant / "simple" / "tiny" / "index.json").read_text())
        assert {f["filename"].split("-")[1].split("+")[0] for f in api["files"]} == {"0.1.0", "0.2.0"}
        for entry in api["files"]:
            assert (site / variant / "simple" / "tiny" / (unquote(entry["url"]) + ".metadata")).is_file()
    variant_page = (site / "variants" / "simple" / "tiny" / "index.html").read_text()
    for version in ("0.1.0", "0.2.0"):  # the wheel-variant page keeps the earlier release too
        assert f"tiny-{version}-variants.json" in variant_page
        assert variant_page.count(f'href="tiny-{version}-cp39') == len(VARIANTS), variant_page
    assert not dangling_links(site)
    capsys.readouterr()
    before = tree(site)
    assert run_cli("publish", "-o", str(second), "--to", str(site), "--base-url", BASE) == 0
    assert "0 file(s) and 0 page(s) written" in capsys.readouterr().out  # a rerun writes nothing
    assert tree(site) == before


def test_a_published_file_never_changes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = tmp_path / "site"
    assert run_cli("publish", "-o", str(release(tmp_path, "0.2.0")), "--to", str(site), "--base-url", BASE) == 0
    time.sleep(2.1)  # zip timestamps have 2 s steps: the rebuild's bytes differ
    rebuilt = release(tmp_path, "0.2.0", name="rebuilt")
    before = tree(site)
    capsys.readouterr()
    assert run_cli("publish", "-o", str(rebuilt), "--to", str(site), "--base-url", BASE) == 7
    err = capsys.readouterr().err
    assert "already published with other bytes" in err and "nothing was written" in err, err
    assert "Traceback" not in err
    assert tree(site) == before


def test_dry_run_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = tmp_path / "site"
    assert run_cli("publish", "-o", str(release(tmp_path, "0.1.0")), "--to", str(site), "--dry-run") == 0
    out = capsys.readouterr().out
    assert "would write" in out and "upload torch213-cxx11-cpu-x86_64-linux/simple/tiny/" in out, out
    assert tree(site) == {}


def test_a_listing_that_cannot_be_read_stops_the_publish(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.json").write_text('{"variants": [{"id": 3}]}')
    assert run_cli("publish", "-o", str(release(tmp_path, "0.1.0")), "--to", str(site)) == 7
    err = capsys.readouterr().err
    assert "index.json" in err and "nothing was written" in err
    assert sorted(tree(site)) == ["index.json"]


KILLER = r"""
import os, signal, sys
from wheelfactory.publish import stores
kill_at = int(os.environ["KILL_AT"])
count = 0
original = stores.DirectoryStore.put
def put(self, path, body, sha256, content_type):
    global count
    count += 1
    if count == kill_at:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name("." + target.name + stores.TEMP_MARK + str(os.getpid()))
        partial.write_bytes((body if isinstance(body, bytes) else body.read_bytes())[:7])  # half written
        os.kill(os.getpid(), signal.SIGKILL)
    original(self, path, body, sha256, content_type)
stores.DirectoryStore.put = put
from wheelfactory.cli.main import main
main(sys.argv[1:])
"""


@pytest.mark.slow
def test_a_publish_killed_anywhere_completes_when_run_again(tmp_path: Path) -> None:
    """20 kills: 10 at a random write (with a half-written temp file left), 10 at a random time."""
    first, second = release(tmp_path, "0.1.0"), release(tmp_path, "0.2.0")
    reference, after_first = tmp_path / "reference", tmp_path / "after-first"
    assert run_cli("publish", "-o", str(first), "--to", str(after_first), "--base-url", BASE) == 0
    shutil.copytree(after_first, reference)
    assert run_cli("publish", "-o", str(second), "--to", str(reference), "--base-url", BASE) == 0
    expected = tree(reference)
    writes = sum(1 for name in expected if expected[name] != tree(after_first).get(name))
    command = ["publish", "-o", str(second), "--base-url", BASE]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    rng = random.Random(26)
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "wheelfactory", *command, "--to", str(tmp_path / "timing")],
                   check=True, capture_output=True, env=env)
    whole = time.monotonic() - started
    for kill in range(20):
        site = tmp_path / f"killed-{kill}"
        shutil.copytree(after_first, site)
        args = [*command, "--to", str(site)]
        if kill < 10:
            run = subprocess.run([sys.executable, "-c", KILLER, *args], capture_output=True, text=True,
                                 env={**env, "KILL_AT": str(rng.randint(1, writes))})
            assert run.returncode == -signal.SIGKILL, run.stderr
        else:
            proc = subprocess.Popen([sys.executable, "-m", "wheelfactory", *args], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, env=env)
            time.sleep(rng.uniform(0.2, whole))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        assert not dangling_links(site), f"kill {kill}"
        rerun = subprocess.run([sys.executable, "-m", "wheelfactory", *args], capture_output=True, text=True, env=env)
        assert rerun.returncode == 0, rerun.stderr
        assert tree(site) == expected, f"kill {kill}"


# ----------------------------------------------------------------------------------------------
# A bucket over the S3 API: moto's standalone server on 127.0.0.1
# ----------------------------------------------------------------------------------------------


@pytest.fixture
def bucket(s3_endpoint: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    for name, value in s3_endpoint.env.items():
        monkeypatch.setenv(name, value)
    name = f"wheels-{os.getpid()}-{random.randrange(1 << 30)}"
    s3_endpoint.public_bucket(name)
    return name


def test_releases_accumulate_in_a_bucket_and_pip_installs_from_it(tmp_path: Path, s3_endpoint: S3Server,
                                                                  bucket: str) -> None:
    for version in ("0.1.0", "0.2.0"):
        assert run_cli("publish", "-o", str(release(tmp_path, version)), "--to", f"s3://{bucket}/whl") == 0
    base = f"{s3_endpoint.url}/{bucket}/whl"
    listing = json.loads(urllib.request.urlopen(f"{base}/index.json").read())
    assert len(listing["variants"]) == 4
    target = tmp_path / "installed"
    for variant in VARIANTS:  # the plain S3 REST API serves the index: `<dir>/` objects hold the pages
        entry = next(v for v in listing["variants"] if v["id"] == variant and v["version"].startswith("0.1.0"))
        requirement = tmp_path / f"{variant}.txt"
        requirement.write_text(f"tiny=={entry['version']} --hash=sha256:{entry['sha256']}\n")
        pip_install(sys.executable, "-q", "--no-deps", "--require-hashes", "--no-cache-dir", "--target",
                    str(target / variant), "--index-url", f"{base}/{variant}/simple/", "-r", str(requirement),
                    host_sources=False)
        assert (target / variant / "tiny" / "__init__.py").is_file()
    # what uv fetches first is the JSON page, served with its media type
    with urllib.request.urlopen(f"{base}/{VARIANTS[0]}/simple/tiny/index.json") as answer:
        assert answer.headers["Content-Type"] == "application/vnd.pypi.simple.v1+json"


def test_a_bucket_that_does_not_exist_is_one_line(tmp_path: Path, s3_endpoint: S3Server, bucket: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("publish", "-o", str(release(tmp_path, "0.1.0")), "--to", "s3://no-such-bucket-here/x") == 7
    err = capsys.readouterr().err
    assert "does not exist" in err and "Traceback" not in err


def test_a_lone_surrogate_in_a_buckets_listing_is_one_line(tmp_path: Path, s3_endpoint: S3Server, bucket: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The bucket's index.json holds "\\udcff" (JSON for no character): the next release is refused
    by name, where its pages failed to encode (a UnicodeEncodeError traceback); nothing is written."""
    assert run_cli("publish", "-o", str(release(tmp_path, "0.1.0")), "--to", f"s3://{bucket}/whl") == 0
    client = s3_endpoint.client()
    listing = json.loads(client.get_object(Bucket=bucket, Key="whl/index.json")["Body"].read())
    listing["variants"][0]["requires_python"] = ">=3.9\udcff"
    client.put_object(Bucket=bucket, Key="whl/index.json", Body=json.dumps(listing).encode())
    keys = sorted(o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"])
    capsys.readouterr()
    assert run_cli("publish", "-o", str(release(tmp_path, "0.2.0")), "--to", f"s3://{bucket}/whl") == 7
    err = capsys.readouterr().err
    assert "index.json" in err and "\\udcff" in err and "Traceback" not in err, err
    assert sorted(o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]) == keys


def test_readme_says_moto_stands_in_for_s3_and_the_bucket_tests_run_it() -> None:
    from tests.testkit import REPO

    readme = " ".join((REPO / "README.md").read_text().split())
    assert "moto's standalone server, which stands in for the S3 service" in readme
    from tests import index_servers

    assert "moto_server" in Path(index_servers.__file__).read_text()  # the endpoint the bucket tests use
