"""`wheelfactory build --engine docker` for real: cibuildwheel in the offline base image with
--network none, auditwheel inside, abi3audit and a smoke test in a fresh container after.

Two CPU variants of different C++ ABI: torch 2.6 (pre-cxx11, from PyPI) and torch 2.13 (cxx11).
The first run takes minutes (torch 2.6's wheelhouse is ~3 GB); the wheelhouse and the images are
cached across runs under WHEELFACTORY_TEST_CACHE.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from tests.docker.docker_helpers import VARIANTS, build, manifest, matrix_text
from tests.testkit import REPO, TEST_CACHE, processes_naming, wait_for_log_line

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CACHE = TEST_CACHE


def test_two_abis_built_repaired_and_smoke_tested(docker_build: Path) -> None:
    entries = manifest(docker_build / "dist")
    assert set(entries) == VARIANTS
    for vid, entry in entries.items():
        assert entry["status"] in ("built", "cached"), entry  # cached: a warm local test cache
        assert str(entry["image"]).startswith("sha256:")  # the build image is pinned by id
        wheel = docker_build / "dist" / str(entry["wheel"])
        assert wheel.name.endswith("-cp39-abi3-manylinux_2_34_x86_64.whl")
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
            record = json.loads(archive.read("fusedops/_build.json"))
        assert not [n for n in names if "libtorch" in n or "libc10" in n], names
        assert record["variant"] == vid
        log = (docker_build / "dist" / str(entry["log"])).read_text()
        assert "CIBW_CONTAINER_ENGINE=docker; create_args: --network none" in log  # no network in the build
        assert f'{{"mode": "prebuilt", "variant": "{vid}", ' in log  # the smoke test's verdict
        if entry["status"] == "built":  # the generic smoke: what the sample's kernel.toml declares
            assert "smoke: 4 declared op(s) registered and with references, 5 sample input(s) matched" in log
    assert "+cputorch2.6cxx98-" in str(entries["torch26-cxx98-cpu-x86_64-linux"]["wheel"])


def test_unchanged_rebuild_is_all_cached(docker_build: Path) -> None:
    result = build(docker_build)
    assert result.returncode == 0, result.stderr
    assert {e["status"] for e in manifest(docker_build / "dist").values()} == {"cached"}


def test_one_failing_variant_does_not_stop_the_others(docker_build: Path, offline_build_tables: str,
                                                     tmp_path: Path) -> None:
    shutil.copytree(docker_build / "dist", tmp_path / "dist")
    bad = '\n[[include]]\ntorch = "2.13"\nbackend = "cpu"\nextra_cflags = ["-fno-such-compiler-flag"]\n'
    (tmp_path / "matrix.toml").write_text(matrix_text(offline_build_tables, bad))
    result = build(tmp_path)
    assert result.returncode == 1
    entries = manifest(tmp_path / "dist")
    assert entries["torch26-cxx98-cpu-x86_64-linux"]["status"] == "cached"
    failed = entries["torch213-cxx11-cpu-x86_64-linux"]
    assert failed["status"] == "failed" and failed["wheel"] is None
    assert "-fno-such-compiler-flag" in result.stdout  # the log tail is shown
    assert "torch213-cxx11-cpu-x86_64-linux failed" in result.stdout
    assert not list((tmp_path / "dist").rglob("*.partial")) and not list((tmp_path / "dist").rglob(".*.tmp"))


def owned_containers(client: object, out: Path) -> list[str]:
    from wheelfactory.engines.choose import owner_of
    from wheelfactory.engines.docker import container_name
    from wheelfactory.engines.docker_run import OWNER_LABEL

    # The low-level listing: the high-level one inspects each container, and fails when one
    # ends (--rm) between the listing and the inspection.
    found = client.api.containers(all=True, filters={"label": f"{OWNER_LABEL}={owner_of(out)}"})  # type: ignore[attr-defined]
    return [container_name(c) for c in found]


def clone_kernel(dest: Path) -> Path:
    """The sample kernel in a clone of the repository elsewhere: its wheels' SOURCE_DATE_EPOCH is
    the last commit that touched it, the same as the fixture's (a plain copy has no history and
    gets the zip epoch: another wheel). What is not committed is not in the clone."""
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(REPO), str(dest)], check=True, timeout=600)
    return dest / "kernels" / "fusedops"


def edit_one_source(kernel: Path) -> None:
    """Append a declaration to one .cpp of the kernel, with a value of this run's: the test cache's
    sccache keeps what an earlier run compiled, and the same edit again would be a hit."""
    with (kernel / "csrc" / "cpu" / "activation.cpp").open("a") as source:
        source.write(f"\nnamespace {{ [[maybe_unused]] int wheelfactory_edit_marker = {secrets.randbits(31)}; }}\n")


def wait_for_cibuildwheel(client: object, out: Path, factory: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
    """Return once the build writing ``out`` has its cibuildwheel container (at most 600 s);
    fail if the factory ended first."""
    import time

    deadline = time.monotonic() + 600
    while not [n for n in owned_containers(client, out) if n.startswith("cibuildwheel")]:
        assert factory.poll() is None, "the build ended before its container started"
        assert time.monotonic() < deadline, "cibuildwheel's container never started"
        time.sleep(0.2)


def test_editing_one_cpu_source_rebuilds_with_compile_cache_hits(docker_build: Path, offline_build_tables: str,
                                                                 tmp_path: Path) -> None:
    """A copy of the kernel with the fixture's dist: cached; after editing one .cpp, the variant
    rebuilds and sccache serves the files that did not change."""
    kernel = clone_kernel(tmp_path / "clone")
    shutil.copytree(docker_build / "dist", tmp_path / "dist")
    text = matrix_text(offline_build_tables).replace(str(REPO / "kernels" / "fusedops"), str(kernel))
    (tmp_path / "matrix.toml").write_text(text)
    only = ("--only", "torch213-*")
    result = build(tmp_path, *only)
    assert result.returncode == 0, result.stdout[-3000:]
    assert manifest(tmp_path / "dist")["torch213-cxx11-cpu-x86_64-linux"]["status"] == "cached"
    edit_one_source(kernel)
    result = build(tmp_path, *only)
    assert result.returncode == 0, result.stdout[-3000:]
    entry = manifest(tmp_path / "dist")["torch213-cxx11-cpu-x86_64-linux"]
    assert entry["status"] == "built"
    log = (tmp_path / "dist" / str(entry["log"])).read_text()
    summary = [line for line in log.splitlines() if line.startswith("# compile cache")]
    assert summary and "2 hits, 1 miss" in summary[-1], summary  # registration + layernorm hit; activation missed
    # where the time went: the manifest's phases, each stamped in the log with its seconds
    phases = entry["phases"]
    assert isinstance(phases, dict) and phases["compile"] > 0
    for name in ("wheelhouse", "environment", "container", "compile", "repair", "verify", "smoke"):
        assert name in phases, phases
        assert re.search(rf"^# \[\d\d:\d\d:\d\d\] phase {name}: \d+\.\d s$", log, re.MULTILINE), name
    assert re.search(r"^# phases: .*\(compile \d+% of [\d.]+ s\)$", log, re.MULTILINE)


def test_a_second_variant_of_the_same_torch_build_reuses_the_prepared_environment(
        docker_build: Path, offline_build_tables: str, tmp_path: Path) -> None:
    """torch 2.13 for CPython 3.11 (not abi3): another variant, the same image, interpreter and
    wheels as the fixture's torch 2.13 variant, so its torch and tools are mounted, not installed."""
    text = matrix_text(offline_build_tables).replace('torch = ["2.6", "2.13"]', 'torch = ["2.13"]\npython = ["3.11"]')
    (tmp_path / "matrix.toml").write_text(text)
    result = build(tmp_path)
    assert result.returncode == 0, result.stdout[-3000:]
    (entry,) = manifest(tmp_path / "dist").values()
    assert entry["status"] == "built" and str(entry["wheel"]).endswith("-cp311-cp311-manylinux_2_34_x86_64.whl")
    log = (tmp_path / "dist" / str(entry["log"])).read_text()
    assert re.search(r"^# reusing prepared environment torch-\w+ ", log, re.MULTILINE), log[-3000:]
    assert re.search(r"^# reusing prepared environment tools-\w+ ", log, re.MULTILINE)
    assert re.search(r"^# reusing prepared environment build-\w+ ", log, re.MULTILINE)  # the generated setup.py's
    assert "made prepared environment" not in log
    assert not re.search(r"pip install .*'?torch==", log)  # no torch install (the smoke installs the wheel only)
    assert re.search(r"pip install --no-index --no-deps .* /dist/fusedops-", log)
    assert "PYTHONPATH=/opt/wheelfactory/build:/opt/wheelfactory/tools:/opt/wheelfactory/torch" in log


def test_changed_wheelhouse_content_makes_a_new_prepared_environment(docker_build: Path, tmp_path: Path) -> None:
    """The same variant with one wheel of its set changed (a re-published build tool): both
    environments are keyed by the set's content, so new ones are made, in a real container."""
    from wheelfactory.engines.docker import DockerEngine
    from wheelfactory.engines.docker_envs import Interpreter
    from wheelfactory.engines.docker_run import image_facts, image_for
    from wheelfactory.engines.wheelhouse import WheelSet, request_for
    from wheelfactory.runner.session import prepare_build

    prepared = prepare_build(docker_build / "matrix.toml", only=["torch213-*"])
    assert isinstance(prepared.engine, DockerEngine)
    engine = prepared.engine.run
    (variant,) = prepared.variants
    image = image_for(engine, variant)
    facts = image_facts(engine, image)
    version, python = facts.python_for(variant, engine.options.python_support[variant.key.torch])
    log = tmp_path / "build.log"
    target = facts.container_python(version, variant.key.arch)
    original = engine.wheelhouse.ensure(request_for(  # the set the fixture's build used: no download
        variant, target,
        torch_index=engine.options.torch_indexes.get(variant.id),
        extra=(*variant.toolkit_wheels, *engine.options.cache_requirements)))
    assert not original.downloaded
    at = Interpreter(image, python, target)
    before = engine.environments.torch_and_tools(variant, at, original, log)
    assert not any(env.created for env in before)  # the fixture's build made them
    name, sha = original.wheels[-1]
    changed = WheelSet(original.path, (*original.wheels[:-1], (name, "0" * 64)), False)
    after = engine.environments.torch_and_tools(variant, at, changed, log)
    try:
        assert all(env.created for env in after) and {e.key for e in after}.isdisjoint(e.key for e in before)
        assert (after[0].path / "torch" / "__init__.py").is_file()  # a real install, offline, from the set
        assert "made prepared environment torch-" in log.read_text()
        # the same torch files as the environment it replaces: on disk once (support/linkstore.py)
        library = next((after[0].path / "torch" / "lib").glob("libtorch_cpu.so*"))
        twin = before[0].path / "torch" / "lib" / library.name
        assert library.stat().st_ino == twin.stat().st_ino and after[0].shared_bytes >= library.stat().st_size
        assert re.search(r"made prepared environment torch-\w+ .*GB of it shared with earlier ones", log.read_text())
    finally:
        for env in after:
            shutil.rmtree(env.path, ignore_errors=True)


def test_a_rebuild_from_scratch_elsewhere_is_byte_identical(docker_build: Path, offline_build_tables: str,
                                                           tmp_path: Path) -> None:
    """Reproducible wheels: the torch 2.6 CPU variant built again from a clone in another directory,
    into an empty output, with an empty compile cache (fresh containers; only the downloaded wheels
    and the prepared torch are shared), has the fixture's sha256. What makes it so: SOURCE_DATE_EPOCH
    from the project's last commit (bdist_wheel and auditwheel's repack stamp every member with it,
    in sorted order), and compiles in the container's /project whatever the host's path."""
    kernel = clone_kernel(tmp_path / "clone")
    tables = offline_build_tables.replace(str(CACHE / "sccache"), str(tmp_path / "empty-sccache"))
    assert tables != offline_build_tables  # the compile cache really is another, empty one
    text = matrix_text(tables).replace(str(REPO / "kernels" / "fusedops"), str(kernel))
    (tmp_path / "matrix.toml").write_text(text)
    variant = "torch26-cxx98-cpu-x86_64-linux"
    result = build(tmp_path, "--only", variant)
    assert result.returncode == 0, result.stdout[-3000:]
    again, first = manifest(tmp_path / "dist")[variant], manifest(docker_build / "dist")[variant]
    assert again["status"] == "built"
    log = (tmp_path / "dist" / str(again["log"])).read_text()
    assert "): 0 hits, " in [line for line in log.splitlines() if line.startswith("# compile cache")][-1]
    ours, theirs = tmp_path / "dist" / str(again["wheel"]), docker_build / "dist" / str(first["wheel"])
    assert again["sha256"] == first["sha256"], _zip_difference(ours, theirs)
    for wheel in (ours, theirs):  # each with its own record, about the same bytes
        record = json.loads(wheel.with_name(wheel.name + ".intoto.json").read_text())
        assert record["subject"][0]["digest"]["sha256"] == first["sha256"]


def _zip_difference(one: Path, other: Path) -> str:
    """Which members differ (content, time, mode or order): what to look at when a build is not reproducible."""
    with zipfile.ZipFile(one) as a, zipfile.ZipFile(other) as b:
        infos_a, infos_b = a.infolist(), b.infolist()
        if [i.filename for i in infos_a] != [i.filename for i in infos_b]:
            return f"member order or names differ: {[i.filename for i in infos_a]} vs {[i.filename for i in infos_b]}"
        found = [f"{x.filename}: {what}" for x, y in zip(infos_a, infos_b)
                 for what, differs in (("bytes", a.read(x) != b.read(y)), ("time", x.date_time != y.date_time),
                                       ("mode", x.external_attr != y.external_attr)) if differs]
    return "; ".join(found) or "same members: the archive itself differs (compression?)"


def test_kill_9_mid_docker_build_then_rerun(docker_client: object, offline_build_tables: str, tmp_path: Path) -> None:
    """SIGKILL the factory alone (not its process group) while cibuildwheel's container builds:
    its children die with it, no wheel appears, and the rerun removes the left container and
    completes."""
    import signal
    import time

    # An edit no compile cache holds: the container compiles for seconds, and the kill lands in it
    # (with every object cached, cibuildwheel can finish and remove its container before the kill).
    kernel = clone_kernel(tmp_path / "clone")
    edit_one_source(kernel)
    (tmp_path / "matrix.toml").write_text(
        matrix_text(offline_build_tables).replace(str(REPO / "kernels" / "fusedops"), str(kernel)))
    out = tmp_path / "dist"
    factory = subprocess.Popen([sys.executable, "-m", "wheelfactory", "build", "--only", "torch213-*"], cwd=tmp_path,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_cibuildwheel(docker_client, out, factory)
        time.sleep(2)  # inside the container now
    finally:  # also when an assertion above fails: no factory is left running into later tests
        factory.send_signal(signal.SIGKILL)
        factory.wait()
    time.sleep(2)
    orphans = _orphans(out)
    assert not orphans, f"processes outlived the killed factory: {orphans}"
    # cibuildwheel may have finished its wheel in the scratch directory before the kill (a warm
    # compile cache takes seconds); what counts is that none was published and none recorded built.
    published = [p for p in out.rglob("*.whl") if ".work" not in p.relative_to(out).parts]
    assert not published, f"a wheel was published from a killed build: {published}"
    recorded = manifest(out).get("torch213-cxx11-cpu-x86_64-linux", {}) if (out / "manifest.json").exists() else {}
    assert recorded.get("status") != "built", recorded
    assert owned_containers(docker_client, out), "expected the killed run's container to be left for the rerun"
    result = build(tmp_path, "--only", "torch213-*")
    assert result.returncode == 0, result.stdout[-3000:]
    assert "reclaimed: cibuildwheel" in result.stdout
    assert manifest(out)["torch213-cxx11-cpu-x86_64-linux"]["status"] == "built"
    assert not owned_containers(docker_client, out)
    assert not list(out.rglob("*.partial")) and not list(out.rglob(".*.tmp"))


def _orphans(out: Path) -> list[str]:
    """Processes whose command line names the killed run's work directory (cibuildwheel, pip)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes()
        except OSError:
            continue
        if str(out / ".work").encode() in text:
            found.append(text.replace(b"\0", b" ").decode(errors="replace"))
    return found


def test_sigterm_mid_docker_rebuild_is_a_cancel_and_the_good_wheel_stays(docker_client: object, docker_build: Path,
                                                                        offline_build_tables: str,
                                                                        tmp_path: Path) -> None:
    """The fixture's good wheels, then an edited source rebuilt and stopped while cibuildwheel's
    container builds: by SIGTERM to the factory alone (what `kill` and a CI cancel send), then by
    Ctrl-C (SIGINT to the process group, as a terminal sends it); then, the compile let finish, by
    SIGTERM in the smoke test (a container the factory runs through the Docker API, no child
    process of its own); last, with a [test] requirement from an index that never answers (a
    stalled mirror), by SIGINT to the group while the tests' wheel set downloads. Each exits
    143 / 130 saying so, the log names the phase, no process of the run is left,
    no container of the run is left 10 s later, the manifest entry and the wheel are as they were,
    and `index` still publishes it."""
    import signal
    import time

    kernel = clone_kernel(tmp_path / "clone")
    # the built variants, not an index another module wrote there: `index` below makes its own
    shutil.copytree(docker_build / "dist", tmp_path / "dist", ignore=shutil.ignore_patterns("index", ".index"))
    out, vid = tmp_path / "dist", "torch213-cxx11-cpu-x86_64-linux"
    good = manifest(out)[vid]
    (tmp_path / "matrix.toml").write_text(
        matrix_text(offline_build_tables).replace(str(REPO / "kernels" / "fusedops"), str(kernel)))
    edit_one_source(kernel)  # a compile cache miss: a real compile
    log = out / vid / "build.log"
    rounds = ((signal.SIGTERM, False, 143, "SIGTERM", "cibuildwheel"),
              (signal.SIGINT, True, 130, "Ctrl-C", "cibuildwheel"),
              (signal.SIGTERM, False, 143, "SIGTERM", "smoke"),  # the smoke: a container run through the API
              (signal.SIGINT, True, 130, "Ctrl-C", "wheelhouse"))
    stalled = StalledIndex()
    for signum, to_group, code, said, phase in rounds:
        log.unlink(missing_ok=True)
        env = dict(os.environ)
        if phase == "wheelhouse":  # the tests' set: its one requirement only the stalled index would serve
            with (tmp_path / "matrix.toml").open("a") as matrix:
                matrix.write(f'\n[test]\ncommand = "true"\nrequires = ["{StalledIndex.PROJECT}"]\n')
            env.update(PIP_INDEX_URL=stalled.url, PIP_EXTRA_INDEX_URL="", PIP_FIND_LINKS="")
        factory = subprocess.Popen([sys.executable, "-m", "wheelfactory", "build", "--only", "torch213-*"],
                                   cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   start_new_session=True, env=env,
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # noqa: PLW1509
        try:
            if phase == "cibuildwheel":
                wait_for_cibuildwheel(docker_client, out, factory)
                time.sleep(1)
            else:
                wait_for_log_line(log, f"phase {phase} started", factory)
            while phase == "wheelhouse" and not processes_naming(StalledIndex.PROJECT):  # pip, waiting on it
                assert factory.poll() is None, "the build ended before its pip download started"
                time.sleep(0.05)
            (os.killpg if to_group else os.kill)(factory.pid, signum)
            output, _ = factory.communicate(timeout=120)
        finally:
            if factory.poll() is None:
                os.killpg(factory.pid, signal.SIGKILL)
                factory.communicate()
        assert factory.returncode == code, output[-3000:]
        assert f"wheelfactory: interrupted by {said}" in output and "Traceback" not in output, output[-3000:]
        deadline = time.monotonic() + 10
        while (owned_containers(docker_client, out) or processes_naming(StalledIndex.PROJECT)) \
                and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not owned_containers(docker_client, out) and not processes_naming(StalledIndex.PROJECT), said
        assert manifest(out)[vid] == good and (out / str(good["wheel"])).is_file(), said
        assert re.search(rf"# CANCELLED after [0-9.]+ s during [a-z, ]*\b{phase}\b", log.read_text()), (said, phase)
    stalled.close()
    listed = subprocess.run([sys.executable, "-m", "wheelfactory", "index", "-o", str(out)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0, listed.stdout[-2000:] + listed.stderr[-2000:]
    assert list((out / "index").rglob(Path(str(good["wheel"])).name)), "the good wheel left the index"


class StalledIndex:
    """A package index on 127.0.0.1 that takes each request and never answers (a stalled mirror)."""

    PROJECT = "wf-stalled-requirement"

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        stop = self.stop = threading.Event()

        class Silent(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the base class's name)
                stop.wait(600)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Silent)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple"

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


def test_a_cpp_error_in_docker_is_shown_on_the_authors_file_once(docker_build: Path, offline_build_tables: str,
                                                                  tmp_path: Path) -> None:
    """A `wheelfactory new` project with a planted error, built in cibuildwheel's container (after
    the session's build, whose image and environments it shares): the output names csrc/... as
    the author wrote it, with no container path (/project), no staged path, no traceback and no
    tip of another tool (issue 37)."""
    project = tmp_path / "demo"
    subprocess.run([sys.executable, "-m", "wheelfactory", "new", "demo", "--path", str(project)], check=True,
                   capture_output=True, timeout=120)
    source = project / "csrc" / "cpu" / "scaled_add.cpp"
    source.write_text(source.read_text().replace("  const at::Tensor b = other.contiguous();",
                                                 "  const at::Tensor b = other.contiguous()\n  undeclared_name += 1;", 1))
    line = source.read_text().splitlines().index("  undeclared_name += 1;") + 1
    (tmp_path / "matrix.toml").write_text(matrix_text(offline_build_tables, project=project))
    done = build(tmp_path, "--only", "torch213-cxx11-cpu-*")
    said = done.stdout + done.stderr
    assert done.returncode == 1, said[-3000:]
    assert "the compiler failed in csrc/cpu/scaled_add.cpp" in said and f"csrc/cpu/scaled_add.cpp:{line}:" in said
    assert "/project/" not in said and ".work" not in said and "Traceback" not in said and "--env-dir" not in said, \
        said[-3000:]
