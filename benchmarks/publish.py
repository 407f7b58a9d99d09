"""Publishing: what installers download from our index, and what a release costs to publish.

    python benchmarks/publish.py [--wheel-mb 200] [--mbit N] [--runs 3] [--publish-mb 20]
                                 [--skip-installers] [--skip-publish]

1. Installers: `uv pip install --dry-run` and `pip install --dry-run --report` of one variant of a
   fake kernel whose wheel carries a --wheel-mb payload (a CUDA wheel is hundreds of MB), from
   `wheelfactory serve` over our index (PEP 691 JSON, PEP 658 .metadata files) and over a copy of
   it stripped of the .metadata files, the JSON pages and the data-core-metadata attributes: a
   plain PEP 503 index, what a user has without them. The bytes are counted by a TCP relay in
   front of the server (everything it sent to the installer), each run with a fresh, empty cache;
   the median of --runs runs. Loopback makes bytes nearly free: --mbit N has the relay send at
   most N Mbit/s, as a user's link would.
2. Publishing: a release 0.1.0, then 0.2.0, of 4 variants (wheels of --publish-mb each), and
   0.2.0 again (a rerun), by `wheelfactory publish` to a directory, a bucket over the S3 API
   (moto's standalone server stands in for the service), devpi-server (one index per variant) and
   pypiserver, all on 127.0.0.1; beside the script a user would write instead: `wheelfactory index`
   then `cp -r dist/index/. site/`, `wheelfactory index` then an `aws s3 sync`-like loop of boto3
   put_object calls, and a plain `twine upload` per index (twine's --skip-existing is for PyPI
   only). Each step publishes from its own hard-linked copy of the release's dist, as a fresh CI
   job would; and whether 0.1.0 is still listed after 0.2.0 is read from each target.

Needs, beyond the runtime extras (without them it says which and exits 2): boto3 and twine (the
`publish` extra), moto (moto[server]), devpi-server, pypiserver, uv and pip. Timings are printed,
never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import mimetypes
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the tests package: dist_fakes, index_servers (no pytest)

from tests.publish.dist_fakes import MORE_WHEELS, WHEELS, make_dist  # noqa: E402
from tests.index_servers import BIN, DevpiServer, PypiServer, S3Server, Server, start_retrying  # noqa: E402

# Import names, each also named in the docstring (tests/test_benchmarks_standalone.py checks both)
REQUIRES = ("boto3", "twine", "moto", "devpi_server", "pypiserver", "uv", "pip")

CPU = "torch213-cxx11-cpu-x86_64-linux"
VARIANTS = (*WHEELS, *MORE_WHEELS)[:4]
RELEASES = ("0.1.0", "0.2.0")
STEPS = ("0.1.0 first", "0.2.0 second", "0.2.0 rerun")
REQUEST = re.compile(r'"GET (\S+) HTTP/1\.[01]" (\d{3})')
MB = 1 << 20


# ----------------------------------------------------------------------------------------------
# 1. Installers against an index with and without the metadata files
# ----------------------------------------------------------------------------------------------


class Relay:
    """A TCP relay on 127.0.0.1 in front of ``port`` that counts the bytes sent back to clients;
    ``rate``: at most that many bytes a second per connection (a link slower than loopback)."""

    def __init__(self, port: int, rate: float | None = None) -> None:
        self.upstream = port
        self.rate = rate
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sent = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            upstream = socket.create_connection(("127.0.0.1", self.upstream))
            done = threading.Semaphore(0)
            for source, sink, counted in ((client, upstream, False), (upstream, client, True)):
                threading.Thread(target=self._pump, args=(source, sink, counted, done), daemon=True).start()
            threading.Thread(target=self._close, args=(client, upstream, done), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, counted: bool, done: threading.Semaphore) -> None:
        begun, sent = time.monotonic(), 0
        try:
            while data := source.recv(MB if self.rate is None else 64 * 1024):
                sink.sendall(data)
                if counted:
                    with self._lock:
                        self.sent += len(data)
                    sent += len(data)
                    if self.rate is not None and (ahead := sent / self.rate - (time.monotonic() - begun)) > 0:
                        time.sleep(ahead)
        except OSError:
            pass  # the other side went away: what was sent is counted
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)
            done.release()

    @staticmethod
    def _close(client: socket.socket, upstream: socket.socket, done: threading.Semaphore) -> None:
        done.acquire()
        done.acquire()
        client.close()
        upstream.close()

    def close(self) -> None:
        self.listener.close()


@dataclass(frozen=True)
class Served:
    url: str
    relay: Relay
    log: Path


@contextlib.contextmanager
def serve(args: list[str], workdir: Path, name: str, rate: float | None) -> Iterator[Served]:
    """`wheelfactory serve <args> --port 0` behind a Relay; its access log (stderr) in a file."""
    out, log = workdir / f"{name}.out", workdir / f"{name}.log"
    with out.open("w") as stdout, log.open("w") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "wheelfactory", "serve", *args, "--port", "0"],
                                   stdout=stdout, stderr=stderr)
    try:
        deadline = time.monotonic() + 60
        while not (found := re.search(r"at http://127\.0\.0\.1:(\d+)/", out.read_text())):
            if process.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"wheelfactory serve {' '.join(args)} did not start: {log.read_text()[-2000:]}")
            time.sleep(0.05)
        relay = Relay(int(found.group(1)), rate)
        try:
            yield Served(f"http://127.0.0.1:{relay.port}", relay, log)
        finally:
            relay.close()
    finally:
        process.terminate()
        process.wait(timeout=30)


def without_metadata(generation: Path, copy: Path) -> Path:
    """The index as a plain PEP 503 index: no .metadata files, no JSON pages, no metadata
    attributes. Files are hard links (no copy of the wheel); each changed page is a new file, so
    the original generation stays as it was."""
    shutil.copytree(generation, copy, copy_function=os.link)
    for path in list(copy.rglob("*.metadata")) + list(copy.glob("*/simple/**/index.json")):
        path.unlink()
    for page in copy.rglob("*.html"):
        text = page.read_text()
        page.unlink()
        page.write_text(re.sub(r' data-(?:core|dist-info)-metadata="[^"]*"', "", text))
    return copy


def clean_env(cache: Path) -> dict[str, str]:
    """No pip or uv settings from the host (its index, its find-links): only the index measured."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    return {**env, "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1", "UV_CACHE_DIR": str(cache / "uv"),
            "PIP_CACHE_DIR": str(cache / "pip")}


def uv_dry_run(url: str, scratch: Path) -> list[str]:
    from uv import find_uv_bin

    return [find_uv_bin(), "pip", "install", "--dry-run", "--no-config", "--no-cache", "--python", sys.executable,
            "--index-url", url, "tiny"]


def pip_dry_run(url: str, scratch: Path) -> list[str]:
    return [sys.executable, "-m", "pip", "install", "--isolated", "--disable-pip-version-check", "--no-cache-dir",
            "--dry-run", "--ignore-installed", "--report", str(scratch / "report.json"), "--index-url", url, "tiny"]


INSTALLERS: dict[str, Callable[[str, Path], list[str]]] = {"uv pip install --dry-run": uv_dry_run,
                                                            "pip install --dry-run --report": pip_dry_run}


@dataclass(frozen=True)
class Fetch:
    seconds: float
    bytes: int
    wheels: int  # .whl answered 200
    metadata: int  # .metadata answered 200


def fetch(installer: Callable[[str, Path], list[str]], served: Served, scratch: Path) -> Fetch:
    scratch.mkdir(parents=True)
    before, logged = served.relay.sent, len(served.log.read_text())
    started = time.perf_counter()
    done = subprocess.run(installer(f"{served.url}/{CPU}/simple", scratch), capture_output=True, text=True,
                          env=clean_env(scratch / "cache"), check=False, timeout=600)
    seconds = time.perf_counter() - started
    if done.returncode != 0 or "tiny" not in done.stdout + done.stderr:
        sys.exit(f"{' '.join(done.args)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    time.sleep(0.3)  # the relay's last chunk and the server's queued log lines
    requests = [(m.group(1), m.group(2)) for m in REQUEST.finditer(served.log.read_text()[logged:])]
    ok = [path for path, status in requests if status == "200"]
    return Fetch(seconds, served.relay.sent - before, sum(p.endswith(".whl") for p in ok),
                 sum(p.endswith(".metadata") for p in ok))


def installers(workdir: Path, wheel_mb: int, runs: int, mbit: float | None) -> None:
    dist = workdir / "dist"
    print(f"making a {wheel_mb} MB wheel of one variant ({CPU}) and its index ...", flush=True)
    make_dist(dist, variants=[CPU], payload=os.urandom(wheel_mb * MB))
    subprocess.run([sys.executable, "-m", "wheelfactory", "index", "-o", str(dist)], check=True, capture_output=True)
    (wheel,) = (dist / CPU).glob("*.whl")
    bare = without_metadata((dist / "index").resolve(), workdir / "bare")
    results: dict[tuple[str, str], list[Fetch]] = {}
    rate = mbit * 1e6 / 8 if mbit else None
    with serve(["-o", str(dist)], workdir, "ours", rate) as ours, \
            serve(["--root", str(bare)], workdir, "bare", rate) as plain:
        for run in range(runs):
            for name, installer in INSTALLERS.items():
                for index, served in (("ours", ours), ("plain", plain)):
                    print(f"\r  run {run + 1}/{runs}: {name} from {index} index   ", end="", flush=True)
                    scratch = workdir / "runs" / f"{run}-{name.split()[0]}-{index}"
                    results.setdefault((name, index), []).append(fetch(installer, served, scratch))
    print()

    def median(name: str, index: str) -> Fetch:
        done = results[(name, index)]
        return Fetch(statistics.median(f.seconds for f in done), int(statistics.median(f.bytes for f in done)),
                     max(f.wheels for f in done), max(f.metadata for f in done))

    print(f"\nInstallers: one variant's wheel ({wheel.stat().st_size / MB:.0f} MB) resolved with --dry-run from "
          f"`wheelfactory serve` ({f'{mbit:g} Mbit/s' if mbit else 'loopback'}), fresh caches, median of {runs}")
    print(f"{'installer':32} {'index':42} {'bytes':>13} {'seconds':>8}  fetched")
    print("-" * 112)
    for name in INSTALLERS:
        for index, label in (("ours", "ours: PEP 691 JSON + PEP 658 .metadata"), ("plain", "plain PEP 503 (no metadata)")):
            m = median(name, index)
            print(f"{name:32} {label:42} {m.bytes:13,} {m.seconds:8.2f}  {m.metadata} .metadata, {m.wheels} .whl")
    print()
    for name in INSTALLERS:
        ours, plain = median(name, "ours"), median(name, "plain")
        print(f"{name:32}: plain/ours {plain.bytes / max(ours.bytes, 1):8.0f}x bytes, "
              f"{plain.seconds / ours.seconds:5.1f}x seconds")


# ----------------------------------------------------------------------------------------------
# 2. Publishing a 2-release, 4-variant dist to each target, beside the user's script
# ----------------------------------------------------------------------------------------------


def dist_copy(source: Path, work: Path, name: str) -> Path:
    """A fresh hard-linked copy of a release's dist (not timed): every step starts as a CI job does."""
    copy = work / "dists" / name
    shutil.copytree(source, copy, copy_function=os.link)
    return copy


def run(command: list[str], env: dict[str, str], *, refused: list[str] | None = None) -> tuple[float, str]:
    """Seconds ``command`` ran and its output; it must succeed, or with ``refused``, may fail with
    the server's HTTP 4xx answer (a plain `twine upload` run again), whose status goes there."""
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - started
    said = done.stdout + done.stderr
    status = re.search(r"HTTPError: (4\d\d)", said)
    if done.returncode != 0:
        if refused is None or not status:
            sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{said[-3000:]}")
        refused.append(status.group(1))
    return seconds, said


def wheelfactory(env: dict[str, str], *args: str) -> tuple[float, str]:
    return run([sys.executable, "-m", "wheelfactory", *args], env)


def s3_sync(client: Any, root: Path, bucket: str, prefix: str) -> None:
    """What `aws s3 sync root s3://bucket/prefix` does: a file whose size matches an object not
    older than it is skipped, every other one is PUT with the type its extension suggests."""
    held = {obj["Key"]: obj for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            for obj in page.get("Contents", [])}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        key = f"{prefix}/{path.relative_to(root).as_posix()}"
        stat, have = path.stat(), held.get(key)
        if have and have["Size"] == stat.st_size and have["LastModified"].timestamp() >= stat.st_mtime:
            continue
        with path.open("rb") as body:
            client.put_object(Bucket=bucket, Key=key, Body=body,
                              ContentType=mimetypes.guess_type(path.name)[0] or "application/octet-stream")


@dataclass(frozen=True)
class Place:
    """Where one tool publishes to one target in one run: its own site, bucket, devpi user and
    pypiserver (a flat index: one per tool, so neither sees the other's files)."""

    target: str  # one of TARGETS
    work: Path
    s3: str  # the endpoint's URL
    bucket: str
    devpi: DevpiServer
    user: str  # devpi's
    pypi: PypiServer
    env: dict[str, str]  # boto3's credentials and endpoint, twine's, no keyring

    @property
    def site(self) -> Path:
        return self.work / "site"

    def upload_url(self, variant: str) -> str:
        return f"{self.devpi.url}/{self.user}/{variant}/" if self.target == "devpi" else f"{self.pypi.url}/"

    def ours(self) -> str:
        """``--to`` for `wheelfactory publish`."""
        return {"directory": str(self.site), "s3": f"s3://{self.bucket}/whl", "devpi": self.upload_url("{variant}"),
                "pypiserver": self.upload_url("")}[self.target]

    def project_page(self, client: Any) -> str:
        """The first variant's project page on the target, as an installer reads it."""
        page = f"{VARIANTS[0]}/simple/tiny/index.html"
        if self.target == "directory":
            return (self.site / page).read_text()
        if self.target == "s3":
            return str(client.get_object(Bucket=self.bucket, Key=f"whl/{page}")["Body"].read().decode())
        url = (f"{self.devpi.url}/{self.user}/{VARIANTS[0]}/+simple/tiny/" if self.target == "devpi"
               else f"{self.pypi.url}/simple/tiny/")
        with urllib.request.urlopen(url, timeout=30) as answer:
            return str(answer.read().decode())


@dataclass(frozen=True)
class Outcome:
    seconds: list[float]  # one per STEPS
    listed: bool  # 0.1.0 on the first variant's project page after 0.2.0
    rerun: str  # what the rerun did


def script_step(place: Place, dist: Path, client: Any, refused: list[str] | None) -> float:
    """The user's script for one release: `wheelfactory index` and a copy of dist/index for a
    static target, a plain `twine upload` per index for an upload server."""
    if place.target in ("directory", "s3"):
        took, _ = wheelfactory(place.env, "index", "-o", str(dist))
        started = time.perf_counter()
        if place.target == "directory":
            place.site.mkdir(exist_ok=True)
            subprocess.run(["cp", "-r", f"{dist / 'index'}/.", str(place.site)], check=True)
        else:
            s3_sync(client, (dist / "index").resolve(), place.bucket, "whl")
        return took + time.perf_counter() - started
    # twine's --skip-existing is for PyPI only (it refuses other URLs): a rerun uploads again,
    # and a server may refuse a file it holds (HTTP 4xx), failing the call
    twine = [str(BIN / "twine"), "upload", "--non-interactive", "--disable-progress-bar", "--repository-url"]
    if place.target == "devpi":  # one call per variant's index
        return sum(run([*twine, place.upload_url(v), *map(str, (dist / v).glob("*.whl"))], place.env,
                       refused=refused)[0] for v in VARIANTS)
    return run([*twine, place.upload_url(""), *map(str, dist.glob("*/*.whl"))], place.env, refused=refused)[0]


def publish_steps(place: Place, dists: dict[str, Path], tool: str) -> Outcome:
    """Each step (first release, second, rerun) by ``tool`` ("ours" or "script") to ``place``."""
    import boto3

    client = boto3.client("s3", endpoint_url=place.s3)
    if place.target == "s3":
        client.create_bucket(Bucket=place.bucket)
    if place.target == "devpi":
        place.devpi.user_with_indexes(place.user, place.env["TWINE_PASSWORD"], list(VARIANTS))
    seconds: list[float] = []
    refused: list[str] = []
    said = ""
    for step, version in zip(STEPS, (*RELEASES, RELEASES[1]), strict=True):
        dist = dist_copy(dists[version], place.work, step.replace(" ", "-"))
        if tool == "ours":
            took, said = wheelfactory(place.env, "publish", "-o", str(dist), "--to", place.ours())
        else:
            took = script_step(place, dist, client, refused if step.endswith("rerun") else None)
        seconds.append(took)
    if tool == "ours":  # the rerun's summary line
        rerun = "writes nothing" if re.search(r"\b0 file\(s\)", said) else said.strip().splitlines()[-1]
    elif place.target in ("devpi", "pypiserver"):
        rerun = (f"refused at the first wheel: HTTP {refused[0]}, exit 1" if refused
                 else "sends every wheel again (accepted: same bytes)")
    else:
        rerun = {"directory": "copies every file again", "s3": "skips what is there"}[place.target]
    return Outcome(seconds, "tiny-0.1.0" in place.project_page(client), rerun)


TOOLS = ("ours", "script")
TARGETS = ("directory", "s3", "devpi", "pypiserver")


def publishing(workdir: Path, publish_mb: int, runs: int) -> None:
    print(f"making 2 releases x {len(VARIANTS)} variants, {publish_mb} MB wheels ...", flush=True)
    payload = os.urandom(publish_mb * MB)
    dists = {version: workdir / f"dist-{version}" for version in RELEASES}
    for version, dist in dists.items():
        make_dist(dist, version=version, variants=VARIANTS, payload=payload)
    print("starting moto's S3 server, devpi-server and pypiserver on 127.0.0.1 ...", flush=True)
    credentials = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    os.environ.update(credentials)  # this process's boto3 client (the script's sync)
    outcomes: dict[tuple[str, str], list[Outcome]] = {}
    started: list[Server] = []
    try:
        s3 = start_retrying(S3Server.launch, workdir / "moto")
        started.append(s3.server)
        devpi = start_retrying(DevpiServer.launch, workdir / "devpi")
        started.append(devpi.server)
        env = {**os.environ, "AWS_ENDPOINT_URL": s3.url, "PYTHONWARNINGS": "ignore",
               "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring"}
        for number in range(runs):
            for tool in TOOLS:
                pypi = start_retrying(PypiServer.launch, workdir / f"pypiserver-{tool}-{number}")
                started.append(pypi.server)
                for target in TARGETS:
                    print(f"\r  run {number + 1}/{runs}: {tool} -> {target}        ", end="", flush=True)
                    name = f"{tool}{number}"
                    user = f"{name}user"
                    twine = ({"TWINE_USERNAME": user, "TWINE_PASSWORD": f"{user}-pw"} if target == "devpi" else
                             {"TWINE_USERNAME": pypi.username, "TWINE_PASSWORD": pypi.password})
                    place = Place(target, workdir / f"{target}-{name}", s3.url, f"wheels-{name}", devpi, user, pypi,
                                  {**env, **twine})
                    outcomes.setdefault((tool, target), []).append(publish_steps(place, dists, tool))
        print()
    finally:
        for server in started:
            server.stop()
    _print_publishing(outcomes, publish_mb, runs)


SCRIPTS = {"directory": "index + cp -r dist/index/. site/", "s3": "index + boto3 put_object sync",
           "devpi": "twine upload per variant index", "pypiserver": "twine upload"}


def _print_publishing(outcomes: dict[tuple[str, str], list[Outcome]], publish_mb: int, runs: int) -> None:
    median = {key: [statistics.median(o.seconds[i] for o in done) for i in range(len(STEPS))]
              for key, done in outcomes.items()}
    print(f"\nPublishing 0.1.0 then 0.2.0 ({len(VARIANTS)} variants, {publish_mb} MB wheels) and 0.2.0 again, "
          f"seconds, median of {runs}")
    print(f"{'target':11} {'step':13} {'wheelfactory publish':>21} {'script':>8}  script/ours   the script")
    print("-" * 110)
    for target in TARGETS:
        ours, script = median[("ours", target)], median[("script", target)]
        notes = [SCRIPTS[target], "", outcomes[("script", target)][-1].rerun]
        for i, step in enumerate(STEPS):
            print(f"{target if i == 0 else '':11} {step:13} {ours[i]:21.2f} {script[i]:8.2f}  "
                  f"{script[i] / ours[i]:10.2f}x   {notes[i]}")
    print()
    base = median[("ours", "directory")]
    print("wheelfactory publish:")
    for target in TARGETS:
        ours = median[("ours", target)]
        print(f"  {target:11}: rerun/first {ours[2] / ours[0]:5.2f}x ({outcomes[('ours', target)][-1].rerun}), "
              f"second/first {ours[1] / ours[0]:5.2f}x; / directory: first {ours[0] / base[0]:5.2f}x, "
              f"second {ours[1] / base[1]:5.2f}x, rerun {ours[2] / base[2]:5.2f}x")
    print()
    print("0.1.0 still on the first variant's project page after 0.2.0 (read as an installer reads it)?")
    for target in TARGETS:
        said = {tool: "yes" if all(o.listed for o in outcomes[(tool, target)]) else "NO" for tool in TOOLS}
        print(f"  {target:11}: wheelfactory publish {said['ours']}, script {said['script']}")
    print("  (an index + copy script uploads one release's pages: 0.1.0's wheels stay on the target, unlisted)")


def missing_requirements() -> list[str]:
    return [name for name in REQUIRES if importlib.util.find_spec(name) is None]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheel-mb", type=int, default=200, help="the installers' wheel payload (MB)")
    parser.add_argument("--runs", type=int, default=3, help="runs per figure (the median is printed)")
    parser.add_argument("--mbit", type=float, default=None,
                        help="the installers' link: at most this many Mbit/s per connection (default: loopback)")
    parser.add_argument("--publish-mb", type=int, default=20, help="each published wheel's payload (MB)")
    parser.add_argument("--skip-installers", action="store_true")
    parser.add_argument("--skip-publish", action="store_true")
    args = parser.parse_args()
    missing = missing_requirements()
    if missing:
        print(f"benchmarks/publish.py needs {', '.join(missing)}: pip install 'wheelfactory[publish]' "
              "devpi-server pypiserver 'moto[server]' uv pip", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="wf-publish-bench-") as tmp:
        if not args.skip_installers:
            installers(Path(tmp) / "installers", args.wheel_mb, args.runs, args.mbit)
        if not args.skip_publish:
            publishing(Path(tmp) / "publishing", args.publish_mb, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
