"""Issue 26's acceptance with wheels built in Docker. Two releases of fusedops, each two CPU
variants (torch 2.6 pre-cxx11, torch 2.13 cxx11): 0.1.0 is the shared docker_build dist, 0.2.0 the
same kernel with kernel.toml's version raised, built the same way into its own dist. Both are
published, one after the other, by `wheelfactory publish -m matrix.toml`, whose [publish] table
names five real servers on 127.0.0.1:

- devpi-server, one index per variant (`<server>/uploader/<variant>/`);
- pypiserver, one index for both variants;
- moto's standalone server standing in for an S3 service (a public-read bucket, `s3://<bucket>/whl`);
- a directory, served by `wheelfactory serve --root` (whose access log the uv check reads);
- a second pypiserver standing in for PyPI (`local_labels = false`), which gets only the default
  variant without its label (`pypi_default = true`): torch 2.13's CPU variant, since this dist has
  no variant of PyPI's own torch build (cu130).

After the second publish, from each target's index of each variant, real pip installs
fusedops==0.1.0+<label> and real uv installs fusedops==0.2.0+<label> (every target, variant,
installer and release), hash-pinned with the sha256 of the dist's manifest, into a copy of a venv
that already holds the variant's torch (the resolver sees torch installed; nothing beyond
127.0.0.1 is asked); each loads `prebuilt`.

A rebuild of unchanged sources gives the same bytes (SOURCE_DATE_EPOCH; test_docker_build.py's
test_a_rebuild_from_scratch_elsewhere_is_byte_identical), so "0.2.0 rebuilt to other bytes" is
a real build of the torch 2.13 variant from the same sources with one comment added to the Python
package: cheap, since its compiles are compile-cache hits (the op namespace depends on the
variant and the version only).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
from tests.docker.docker_helpers import (
    SAMPLE_TABLES,
    TORCHES,
    check,
    fresh_venv,
    installed,
    make_shared,
    matrix_text,
    torch_pins,
    uv_install,
)
from tests.index_servers import (
    DevpiServer,
    PypiServer,
    S3Server,
    Server,
    dangling_links,
    fetched,
    free_port,
    requests_in,
    running,
    start,
    tree,
)
from tests.shared_builds import SharedBuild
from tests.testkit import REPO, TEST_CACHE, pip_install
from wheelfactory.publish.held import read_held
from wheelfactory.runner import manifest

pytestmark = [pytest.mark.docker, pytest.mark.slow]
TORCH_VENVS = True  # it installs into docker_helpers.pristine_venv's torch venvs (tests/docker_tier.py)

WORK = TEST_CACHE / "publish-e2e"  # the 0.2.0 builds, persistent as docker_build's is
REBUILT = "torch213-cxx11-cpu-x86_64-linux"  # the variant whose 0.2.0 wheel is rebuilt; also PyPI's default here
# pypiserver's uploader; devpi's user gets the same password, so one environment serves every target
TWINE = {"TWINE_USERNAME": "uploader", "TWINE_PASSWORD": "uploader-secret",
         "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring"}
DEVPI_USER = TWINE["TWINE_USERNAME"]
STATIC = ("directory", "bucket")
UPLOAD = ("devpi", "pypiserver")


def say(request: pytest.FixtureRequest, line: str) -> None:
    """A measured figure into the run's output, past pytest's capture."""
    plugins = request.config.pluginmanager
    reporter, capture = plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)


def kernel_copy(name: str, version: str, comment: str = "") -> Path:
    """kernels/fusedops copied into the test cache with kernel.toml's version set to ``version``
    (and ``comment`` appended to the Python package): the same content on every run, so a rerun
    finds the build cached."""
    project = WORK / name
    shutil.rmtree(project, ignore_errors=True)
    shutil.copytree(REPO / "kernels" / "fusedops", project, ignore=shutil.ignore_patterns("__pycache__"))
    declaration = project / "kernel.toml"
    text = declaration.read_text()
    assert 'version = "0.1.0"' in text
    declaration.write_text(text.replace('version = "0.1.0"', f'version = "{version}"', 1))
    if comment:
        init = project / "python" / "fusedops" / "__init__.py"
        init.write_text(init.read_text() + f"# {comment}\n")
    return project


def timed_build(request: pytest.FixtureRequest, build: SharedBuild, offline_build_tables: str) -> Path:
    begun = time.monotonic()
    dist = make_shared(build, offline_build_tables) / "dist"
    say(request, f"{build.name}: built (or found cached) in {time.monotonic() - begun:.0f} s")
    return dist


# The second release: the sample copied with kernel.toml's version raised (kernel_copy), both
# variants; and its torch 2.13 variant again from sources with a comment added (other bytes).
RELEASE_020 = SharedBuild("publish-e2e/build-0.2.0", WORK / "fusedops-0.2.0", SAMPLE_TABLES)
REBUILT_020 = SharedBuild("publish-e2e/build-0.2.0-rebuilt", WORK / "fusedops-0.2.0-rebuilt",
                          SAMPLE_TABLES + '\n[[exclude]]\ntorch = "2.6"\n')


@pytest.fixture(scope="module")
def release_020(offline_build_tables: str, request: pytest.FixtureRequest) -> Path:
    """0.2.0 of both variants, built as docker_build builds 0.1.0 (same tables, wheelhouse and
    compile cache). The op namespace names the version, so its compiles miss the cache."""
    assert kernel_copy("fusedops-0.2.0", "0.2.0") == RELEASE_020.project
    return timed_build(request, RELEASE_020, offline_build_tables)


@pytest.fixture(scope="module")
def rebuilt_020(offline_build_tables: str, request: pytest.FixtureRequest) -> Path:
    """0.2.0 of the torch 2.13 variant from its sources with a comment added: other bytes."""
    assert kernel_copy("fusedops-0.2.0-rebuilt", "0.2.0", comment="rebuilt: other bytes, same version") \
        == REBUILT_020.project
    return timed_build(request, REBUILT_020, offline_build_tables)


def dist_copy(dist: Path, dest: Path) -> Path:
    """What publish reads of ``dist`` (manifest, wheels, records), copied: a publish writes beside
    them (dist/pypi/, the variant-wheel copies), and the shared docker_build dist stays as it is."""
    shutil.copytree(dist, dest, ignore=shutil.ignore_patterns("index", ".index", "pypi"))
    return dest


@dataclass(frozen=True)
class Wheel:
    filename: str
    version: str  # 0.2.0+cputorch2.13
    sha256: str  # the dist manifest's, never a server's

    @property
    def unlabelled(self) -> str:
        """The file name PyPI's default variant is published under."""
        return self.filename.replace(self.version, self.version.split("+")[0], 1)


def wheels_of(dist: Path) -> dict[str, Wheel]:
    """Variant -> its wheel, from the dist's manifest."""
    found = {}
    for variant, entry in manifest.read(dist).items():
        assert entry.wheel and entry.sha256, (variant, entry)
        name = Path(entry.wheel).name
        found[variant] = Wheel(name, name.split("-")[1], entry.sha256)
    return found


@dataclass(frozen=True)
class Targets:
    """The servers one module publishes to, and where each variant's index is read from."""

    devpi: DevpiServer
    pypiserver: PypiServer
    pypi: PypiServer  # refuses local labels: PyPI's stand-in
    s3: S3Server
    bucket: str
    site: Path
    site_url: str

    def index(self, target: str, variant: str) -> str:
        return {"devpi": f"{self.devpi.url}/{DEVPI_USER}/{variant}/+simple/",
                "pypiserver": f"{self.pypiserver.url}/simple/",
                "bucket": f"{self.s3.url}/{self.bucket}/whl/{variant}/simple/",
                "directory": f"{self.site_url}/{variant}/simple/"}[target]

    def table(self, target: str) -> str:
        return {"devpi": f'[[publish.upload]]\nurl = "{self.devpi.url}/{DEVPI_USER}/{{variant}}/"\n',
                "pypiserver": f'[[publish.upload]]\nurl = "{self.pypiserver.url}/"\n',
                "pypi": f'[[publish.upload]]\nurl = "{self.pypi.url}/"\nlocal_labels = false\n',
                "bucket": f'[[publish.bucket]]\nurl = "s3://{self.bucket}/whl"\nendpoint_url = "{self.s3.url}"\n',
                "directory": f'[[publish.directory]]\npath = "{self.site}"\nbase_url = "{self.site_url}"\n',
                }[target]

    def matrix(self, offline_build_tables: str, path: Path, *targets: str) -> Path:
        """A matrix.toml whose [publish] table names ``targets``, with pypi_default = true."""
        tables = "\n".join(self.table(t) for t in targets)
        path.write_text(matrix_text(offline_build_tables, f"\n[publish]\npypi_default = true\n\n{tables}"))
        return path

    def held(self) -> Holdings:
        objects = self.s3.client().list_objects_v2(Bucket=self.bucket)["Contents"]  # under 1000: one page
        return Holdings(tree(self.site), {o["Key"]: (o["ETag"], o["Size"]) for o in objects},
                        {v: read_held(self.index("devpi", v), "fusedops") for v in TORCHES},
                        read_held(self.index("pypiserver", REBUILT), "fusedops"),
                        read_held(f"{self.pypi.url}/simple/", "fusedops"))


@dataclass(frozen=True)
class Holdings:
    """Everything the targets hold: the directory's files (sha256), the bucket's objects (ETag,
    size), each upload index's files (name -> sha256, read from its simple page)."""

    directory: dict[str, str]
    bucket: dict[str, tuple[str, int]]
    devpi: dict[str, dict[str, str]]  # per variant index
    pypiserver: dict[str, str]
    pypi: dict[str, str]


def publish(dist: Path, matrix: Path, s3: S3Server) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **TWINE, **s3.credentials, "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "wheelfactory", "publish", "-o", str(dist), "-m", str(matrix)],
                          capture_output=True, text=True, timeout=900, check=False, env=env, cwd=matrix.parent)


@dataclass(frozen=True)
class Published:
    targets: Targets
    dists: dict[str, Path]  # "0.1.0" -> the dist published (a copy)
    releases: dict[str, dict[str, Wheel]]  # "0.1.0" -> variant -> its wheel
    serve: Server  # `wheelfactory serve --root` over the directory target
    offline_build_tables: str


@pytest.fixture(scope="module")
def published(docker_build: Path, release_020: Path, offline_build_tables: str, request: pytest.FixtureRequest,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Published]:
    """0.1.0 then 0.2.0 published to every target: one `wheelfactory publish -m` per release."""
    root = tmp_path_factory.mktemp("publish-e2e")
    dists = {"0.1.0": dist_copy(docker_build / "dist", root / "dist-0.1.0"),
             "0.2.0": dist_copy(release_020, root / "dist-0.2.0")}
    begun = time.monotonic()
    with contextlib.ExitStack() as servers:
        devpi = servers.enter_context(running(DevpiServer.launch, root / "devpi"))
        pypiserver = servers.enter_context(running(PypiServer.launch, root / "pypiserver"))
        pypi = servers.enter_context(running(PypiServer.launch, root / "pypi"))
        s3 = servers.enter_context(running(S3Server.launch, root / "s3"))
        devpi.user_with_indexes(DEVPI_USER, TWINE["TWINE_PASSWORD"], sorted(TORCHES))
        s3.public_bucket("releases")
        port = free_port()
        targets = Targets(devpi, pypiserver, pypi, s3, "releases", root / "site", f"http://127.0.0.1:{port}")
        matrix = targets.matrix(offline_build_tables, root / "matrix.toml", *STATIC, *UPLOAD, "pypi")
        say(request, f"publish-e2e: servers up in {time.monotonic() - begun:.0f} s")
        serve: Server | None = None
        try:
            for version, dist in dists.items():
                done = publish(dist, matrix, s3)
                assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
                if serve is None:  # `serve --root` wants the index the first publish wrote
                    serve = start([sys.executable, "-m", "wheelfactory", "serve", "--root", str(targets.site),
                                   "--port", str(port)], port=port, probe="/index.html", log=root / "serve.log",
                                  cwd=root)
            say(request, f"publish-e2e: servers and both publishes in {time.monotonic() - begun:.0f} s")
            assert serve is not None
            yield Published(targets, dists, {v: wheels_of(d) for v, d in dists.items()}, serve, offline_build_tables)
        finally:
            if serve is not None:
                serve.stop()


def test_the_second_release_joins_the_first_on_every_target(published: Published) -> None:
    targets, releases = published.targets, published.releases
    held = targets.held()
    every = [(variant, wheel) for release in releases.values() for variant, wheel in release.items()]
    for variant in TORCHES:  # devpi: each variant's index holds both releases of that variant, and only those
        assert held.devpi[variant] == {w.filename: w.sha256 for v, w in every if v == variant}
    assert held.pypiserver == {w.filename: w.sha256 for _, w in every}
    # PyPI's stand-in: one wheel of each release, without its label (which variant: the install test)
    assert sorted(held.pypi) == sorted(w.unlabelled for v, w in every if v == REBUILT)
    for variant, wheel in every:
        assert held.directory[f"{variant}/simple/fusedops/{wheel.filename}"] == wheel.sha256
        assert f"whl/{variant}/simple/fusedops/{wheel.filename}" in held.bucket
    listing = json.loads((targets.site / "index.json").read_text())
    assert sorted(entry["version"] for entry in listing["variants"]) == sorted(w.version for _, w in every)
    assert not dangling_links(targets.site)


def serve_log_until_now(published: Published) -> str:
    """The serve log up to now: a marker request is sent and waited for (the log is written
    through a queue), so every request made before it is in what is returned."""
    marker = f"/publish-e2e-marker-{time.monotonic_ns()}"
    try:
        urllib.request.urlopen(published.serve.url + marker, timeout=30).close()
    except urllib.error.HTTPError:
        pass  # a 404, logged
    deadline = time.monotonic() + 30
    while marker not in (text := published.serve.log.read_text(errors="replace")):
        assert time.monotonic() < deadline, "the marker request never reached serve's log"
        time.sleep(0.1)
    return text


def test_uv_resolves_from_the_published_directory_without_fetching_a_wheel(published: Published,
                                                                          tmp_path: Path) -> None:
    """uv's dry run reads the PEP 691 page and the PEP 658 .metadata file, and no .whl; the real
    install after it fetches the wheel (so the log would show one)."""
    wheel = published.releases["0.2.0"][REBUILT]
    index = published.targets.index("directory", REBUILT)
    venv = fresh_venv(TORCHES[REBUILT], tmp_path / "venv")
    path = f"/{REBUILT}/simple/fusedops/{quote(wheel.filename)}"
    before = len(serve_log_until_now(published))
    uv_install(venv, tmp_path / "uv-cache", "--dry-run", "--index-url", index, f"fusedops=={wheel.version}")
    dry = requests_in(serve_log_until_now(published)[before:])
    assert (f"/{REBUILT}/simple/fusedops/", 200, "index.json") in dry, dry
    assert fetched(dry) == ([path + ".metadata"], []), dry
    assert not list(venv.glob("lib/python*/site-packages/fusedops*")), "the dry run installed something"
    middle = len(serve_log_until_now(published))
    uv_install(venv, tmp_path / "uv-cache", "--index-url", index, f"fusedops=={wheel.version}")
    assert fetched(requests_in(serve_log_until_now(published)[middle:]))[1] == [path]
    assert installed(venv) == wheel.version


@pytest.mark.parametrize("target", [*STATIC, *UPLOAD])
def test_both_releases_install_hash_pinned_from_each_variant_index_and_load_prebuilt(
        published: Published, target: str, tmp_path: Path) -> None:
    """pip gets 0.1.0 and uv 0.2.0 from each variant's index of ``target`` (pypiserver: its one
    index), pinned to the manifest's sha256, into a venv holding that variant's torch."""
    for variant in sorted(TORCHES):
        index = published.targets.index(target, variant)
        for tool, release in (("pip", "0.1.0"), ("uv", "0.2.0")):
            wheel = published.releases[release][variant]
            venv = fresh_venv(TORCHES[variant], tmp_path / f"{tool}-{variant}")
            pinned = tmp_path / f"{tool}-{variant}.txt"
            pins = [f"fusedops=={wheel.version} --hash=sha256:{wheel.sha256}", *torch_pins(venv, TORCHES[variant])]
            pinned.write_text("\n".join(pins) + "\n")
            if tool == "pip":
                pip_install(venv / "bin" / "python", "--isolated", "--no-cache-dir", "--require-hashes",
                            "--index-url", index, "-r", str(pinned))
            else:
                uv_install(venv, tmp_path / "uv-cache", "--require-hashes", "--index-url", index, "-r", str(pinned))
            assert installed(venv) == wheel.version, (target, tool)
            loaded = check(venv)
            assert (loaded["mode"], loaded["variant"], loaded["warnings"]) == ("prebuilt", variant, []), \
                (target, tool, loaded)


def test_pip_install_without_a_version_gets_the_unlabelled_default_from_the_label_refusing_index(
        published: Published, tmp_path: Path) -> None:
    """`[publish] pypi_default = true`: the index that refuses labels holds 0.1.0 and 0.2.0 of
    the torch 2.13 CPU variant without their label; a plain `pip install fusedops` gets 0.2.0."""
    venv = fresh_venv(TORCHES[REBUILT], tmp_path / "venv")
    pip_install(venv / "bin" / "python", "--isolated", "--no-cache-dir",
                "--index-url", f"{published.targets.pypi.url}/simple/", "fusedops")
    assert installed(venv) == "0.2.0"
    loaded = check(venv)
    assert (loaded["mode"], loaded["variant"], loaded["warnings"]) == ("prebuilt", REBUILT, []), loaded


@pytest.fixture(scope="module")
def republished(published: Published, rebuilt_020: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """0.2.0 again: the torch 2.6 wheel as published, the torch 2.13 one rebuilt to other bytes."""
    dist = dist_copy(published.dists["0.2.0"], tmp_path_factory.mktemp("republish") / "dist")
    shutil.rmtree(dist / REBUILT)
    shutil.copytree(rebuilt_020 / REBUILT, dist / REBUILT)
    entries = manifest.read(dist)
    entries[REBUILT] = manifest.read(rebuilt_020)[REBUILT]
    manifest.write(dist, entries)
    rebuilt, first = wheels_of(dist)[REBUILT], published.releases["0.2.0"][REBUILT]
    assert (rebuilt.filename, rebuilt.version) == (first.filename, first.version) and rebuilt.sha256 != first.sha256
    return dist


@pytest.mark.parametrize("target", [*STATIC, *UPLOAD, "pypi"])
def test_republishing_a_release_with_a_rebuilt_wheel_is_refused_and_changes_nothing(
        published: Published, republished: Path, target: str, tmp_path: Path) -> None:
    targets = published.targets
    matrix = targets.matrix(published.offline_build_tables, tmp_path / "matrix.toml", target)
    before = targets.held()
    done = publish(republished, matrix, targets.s3)
    assert done.returncode == 7, done.stdout[-3000:] + done.stderr[-3000:]
    assert "other bytes" in done.stderr and "Traceback" not in done.stderr, done.stderr
    wheel = published.releases["0.2.0"][REBUILT]
    assert (wheel.unlabelled if target == "pypi" else wheel.filename) in done.stderr, done.stderr
    assert targets.held() == before
