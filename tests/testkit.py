"""Helpers every test tier shares: ``from tests.testkit import REPO, run_cli, make_wheel, pip_install``.

tests/ is a package (pytest puts the checkout, its parent, on sys.path), so every module imports
its helpers by their package name. Fixtures stay in the conftest files; plain helpers live here, since
test modules cannot import a conftest. It imports nothing heavy (no torch, no docker).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from tests.fake_wheels import DEFAULT_TAG as DEFAULT_TAG  # pytest-free, so the benchmarks can use it
from tests.fake_wheels import make_wheel as make_wheel
from tests.fake_wheels import write_provenance as write_provenance
from tests.repo_paths import REPO as REPO  # the checkout; pytest-free, so the benchmarks can use it
from tests.repo_paths import TEST_CACHE as TEST_CACHE
from tests.repo_paths import cache_lock as cache_lock

# WHEELFACTORY_TEST_LEAN=1 (.ci/run sets it): a module frees the GBs it alone needed (images, wheel
# sets, venvs) once it is done, since a CI clone reuses nothing and the disk is ~34 GiB
# (CONTRIBUTING.md, Disk). Read here only; the tiers' fixtures ask it.
LEAN = os.environ.get("WHEELFACTORY_TEST_LEAN") == "1"

# The binfmt_misc entry Debian bookworm's qemu-user-static registers through binfmt-support (F: usable
# by containers), as /proc/sys/fs/binfmt_misc/qemu-aarch64 shows it: the emulation tests' fixture.
QEMU_AARCH64_BINFMT = """enabled
interpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P
flags: PF
offset 0
magic 7f454c460201010000000000000000000200b700
mask ffffffffffffff00fffffffffffffffffeffffff
"""


def run_cli(*args: str) -> int:
    """``wheelfactory <args>`` in-process; its exit code (main() always exits)."""
    from wheelfactory.cli.main import main

    with pytest.raises(SystemExit) as exited:
        main(list(args))
    return int(exited.value.code or 0)


def race(work: Callable[[int, int], None], threads: int, rounds: int) -> list[BaseException]:
    """``work(thread, round)`` from ``threads`` threads released at once, ``rounds`` times each;
    every exception raised, for the test to assert on (a race test must see them all)."""
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        start.wait()
        for i in range(rounds):
            try:
                work(t, i)
            except BaseException as exc:  # noqa: BLE001 (returned to the test)
                errors.append(exc)

    running = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()
    return errors



def run_build(args: list[str], *, cwd: Path, timeout: float = 3000) -> subprocess.CompletedProcess[str]:
    """``wheelfactory build ARGS`` in ``cwd``. While another command holds the output directory (a
    test on the other worker indexing or exporting a shared dist: seconds), it is asked again."""
    from wheelfactory.errors import OutputLocked

    deadline = time.monotonic() + 900
    while True:
        result = subprocess.run([sys.executable, "-m", "wheelfactory", "build", *args], cwd=cwd,
                                capture_output=True, text=True, timeout=timeout)
        if result.returncode != OutputLocked.exit_code or time.monotonic() > deadline:
            return result
        time.sleep(2)


def release_pip_environment() -> dict[str, str]:
    """The environment of every pip the tests run to install or resolve packages (a torch release
    above all): the product's treatment of wheel sets (``engines/pip_config.download_environment``).
    The host's indexes, mirrors, find-links, certificates and timeouts come as ``PIP_*`` variables;
    its constraint and requirement files, and its other settings for its own environment, do not:
    a machine whose pip caps torch (ours ship ``torch<=2.14.1``) would refuse a venv of a newer
    torch with ResolutionImpossible, and a cap at the very release a test asks for would hide what
    the test checks."""
    from wheelfactory.engines.pip_config import download_environment

    return {**os.environ, **download_environment(sys.executable)}


def _without_host_sources() -> dict[str, str]:
    """This process's environment less every pip and uv setting: a test of one index alone (ours),
    where the host's own index must not answer instead."""
    return {key: value for key, value in os.environ.items() if not key.startswith(("PIP_", "UV_"))}


def pip_install(python: Path | str, *args: str, host_sources: bool = True, env: Mapping[str, str] | None = None,
                check: bool = True, timeout: float = 1800, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``PYTHON -m pip install ARGS``: the one way a test runs pip to install or resolve
    (tests/test_release_installs.py holds every test module to it). With ``host_sources``, in
    ``release_pip_environment``; without, ``--isolated`` and no ``PIP_*`` variable: only what
    ``args`` name. ``env``: variables on top (a proxy exception)."""
    isolated = [] if host_sources else ["--isolated"]
    base = release_pip_environment() if host_sources else _without_host_sources()
    done = subprocess.run([str(python), "-m", "pip", *isolated, "install", *args], capture_output=True, text=True,
                          cwd=cwd, env={**base, **(env or {})}, timeout=timeout, check=False)
    if check:
        assert done.returncode == 0, f"pip install {' '.join(args)} failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done


def uv_pip(subcommand: str, *args: str, cache: Path | None, host_sources: bool = True,
           env: Mapping[str, str] | None = None, input: str | None = None, check: bool = True,
           timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    """``uv pip SUBCOMMAND ARGS`` reading no configuration of its own or pip's (``--no-config``), its
    cache in ``cache`` (None: ``--no-cache``): the one way a test runs uv. With ``host_sources``,
    the indexes, find-links, certificates and timeouts of ``release_pip_environment`` as the
    product's ``uv_index_args`` translates them (pip's view of several indexes: the best version
    from any); without, no ``PIP_*``/``UV_*`` variable and only what ``args`` name."""
    from uv import find_uv_bin
    from wheelfactory.engines.target_resolution import uv_index_args

    sources, uv_env = ["--no-config"], {}
    if host_sources:
        pip_settings = {key: value for key, value in release_pip_environment().items() if key.startswith("PIP_")}
        sources, uv_env = uv_index_args(pip_settings)
        sources += ["--index-strategy", "unsafe-best-match"]
    sources += ["--no-cache"] if cache is None else []
    base = os.environ if host_sources else _without_host_sources()
    variables = {**base, **uv_env, "NO_COLOR": "1", **({"UV_CACHE_DIR": str(cache)} if cache else {}), **(env or {})}
    done = subprocess.run([find_uv_bin(), "pip", subcommand, *sources, *args], input=input, capture_output=True,
                          text=True, env=variables, timeout=timeout, check=False)
    if check:
        assert done.returncode == 0, f"uv pip {subcommand} {' '.join(args)} failed:\n{done.stderr[-3000:]}"
    return done


def uv_venv(path: Path, requirements: tuple[str, ...], *, find_links: tuple[Path, ...] = (),
            offline: bool = False, cache: Path = TEST_CACHE / "uv-cache", constraints: tuple[str, ...] = ()) -> Path:
    """A venv (with pip, which tests use in it) holding ``requirements``, installed by uv from
    ``find_links`` (and, unless ``offline``, the host's indexes), held to ``constraints``, each file
    hard-linked from the unpacked wheels in ``cache``: a torch with its nvidia-* wheels in seconds,
    on disk once for every venv of the run."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, capture_output=True, timeout=300)
    uv_install_into(path, requirements, find_links=find_links, offline=offline, cache=cache, constraints=constraints)
    return path


def uv_install_into(venv: Path, requirements: tuple[str, ...], *, find_links: tuple[Path, ...] = (),
                    offline: bool = False, cache: Path = TEST_CACHE / "uv-cache",
                    constraints: tuple[str, ...] = ()) -> None:
    options = [arg for link in find_links for arg in ("--find-links", str(link))]
    options += ["--no-index"] if offline else []
    if constraints:
        pinned = venv / "constraints.txt"
        pinned.write_text("".join(f"{line}\n" for line in constraints))
        options += ["--constraint", str(pinned)]
    uv_pip("install", "--python", str(venv / "bin" / "python"), "--link-mode", "hardlink", "--quiet", *options,
           *requirements, cache=cache, host_sources=not offline)


def wheelhouse_sets_with(torch_version: str) -> list[Path]:
    """The Docker tier's wheel sets (TEST_CACHE/wheelhouse) holding this torch for this Python."""
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    return sorted({wheel.parent for wheel in (TEST_CACHE / "wheelhouse" / "sets").glob(f"*/torch-{torch_version}-{tag}-*.whl")})


def wheelhouse_venv(path: Path, requirements: tuple[str, ...], wheels: Path) -> Path:
    """A venv holding ``requirements`` from the test wheelhouse's set ``wheels``, whose files are the
    very ones the Docker builds' prepared environments link (the wheelhouse's store, unpacked once
    in its ``unpacked/``): a CUDA torch venv beside a build of the same torch takes no second 5 GB."""
    from wheelfactory.engines.prepared_env import UNPACKED, unpacked_lock, wheel_releases

    wheelhouse = TEST_CACHE / "wheelhouse"
    releases = wheel_releases(wheel.name for wheel in wheels.glob("*.whl"))
    with unpacked_lock(wheelhouse / UNPACKED, exclusive=False):  # a LEAN gc in the other lane waits
        return uv_venv(path, requirements, find_links=(wheelhouse / "store",), offline=True,
                       cache=wheelhouse / UNPACKED,
                       constraints=tuple(sorted(f"{name}=={version}" for name, versions in releases.items()
                                                for version in versions)))


# A [build] key for a test build that reads compile flags back from its DWARF: by default the
# factory compiles with -g0 (factory/wheelfactory/engines/compile_flags.py). [build] strip (on by
# default) moves the DWARF out of the wheel into dist/<variant>/debug (debug_files).
DEBUG_INFO = "debug_info = true\n"


def debug_sections(wheel: Path) -> dict[str, list[str]]:
    """Each shared library in ``wheel`` -> the names of its DWARF sections (.debug_info, ...)."""
    import io
    import zipfile

    from elftools.elf.elffile import ELFFile

    with zipfile.ZipFile(wheel) as archive:
        return {name: sorted(section.name for section in ELFFile(io.BytesIO(archive.read(name))).iter_sections()
                             if section.name.startswith((".debug_", ".zdebug_")))
                for name in archive.namelist() if name.endswith(".so") or ".so." in name}


def debug_files(variant_dir: Path) -> dict[str, bytes]:
    """The debug files [build] strip put beside a variant's wheel, by path under its debug/."""
    debug = variant_dir / "debug"
    return {str(p.relative_to(debug)): p.read_bytes() for p in sorted(debug.rglob("*.debug"))}


def build_on_host(project: Path, import_name: str, python: str, extra: str = "") -> tuple[Path, dict[str, object], str]:
    """Build a bring-your-own project with the host engine for this interpreter's torch (2.13, CPU)
    into ``TEST_CACHE/host-byo/<project name>``; (wheel, manifest entry, build log). Cached by the
    factory's key: the Docker tier and the host tier share one build.

    The output sits in a checkout, as a user's ``dist/`` does, whose pytest configuration and
    conftest.py would break the project's own tests were they found from the test run (and the
    build runs with this session's ``PYTEST_*`` variables): the project's tests see only their own."""
    root = TEST_CACHE / "host-byo"
    workdir = root / project.name
    with cache_lock(workdir):  # the Docker tier's module and the host tier's may ask at once
        workdir.mkdir(parents=True, exist_ok=True)
        (root / "pytest.ini").write_text("[pytest]\naddopts = --no-such-option-of-the-checkout\n")
        (root / "conftest.py").write_text('raise RuntimeError("the checkout\'s conftest.py reached the tests of a wheel")\n')
        _write_and_build_on_host(workdir, project, import_name, python, extra)
    entries = json.loads((workdir / "dist" / "manifest.json").read_text())["variants"]
    (entry,) = entries.values()
    assert entry["status"] in ("built", "cached"), entry
    log = (workdir / "dist" / entry["log"]).read_text()
    return workdir / "dist" / entry["wheel"], entry, log


def host_matrix(project: Path, import_name: str, python: str, extra: str = "") -> str:
    """matrix.toml of a bring-your-own project built by the host engine for torch 2.13 (CPU);
    ``extra`` follows its [build] table (more [build] keys, then other tables)."""
    return f"""
[project]
path = "{project}"
import_name = "{import_name}"

[matrix]
torch = ["2.13"]
backends = ["cpu"]
python = {python}

[build]
engine = "host"
{extra}"""


def _write_and_build_on_host(workdir: Path, project: Path, import_name: str, python: str, extra: str) -> None:
    (workdir / "matrix.toml").write_text(host_matrix(project, import_name, python, extra))
    result = run_build([], cwd=workdir, timeout=1800)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def docs_text(*pages: str) -> str:
    """The text of README.md's reference pages, ``docs/<page>`` (e.g. ``"reference/matrix.md"``),
    joined: the tests that check a documented claim read it where it is written."""
    return "\n".join((REPO / "docs" / page).read_text() for page in pages)


def markdown_section(text: str, heading: str) -> str:
    """The section of ``text`` under the heading line ``heading`` (``"## [build]"``), up to the next
    heading of the same or a higher level outside code blocks; KeyError when there is no such heading."""
    level = len(heading) - len(heading.lstrip("#"))
    lines = text.splitlines()
    if heading not in lines:
        raise KeyError(f"no heading {heading!r}")
    start = lines.index(heading)
    fenced = False
    for end in range(start + 1, len(lines)):
        line = lines[end]
        if line.lstrip().startswith("```"):
            fenced = not fenced
        depth = len(line) - len(line.lstrip("#"))
        if not fenced and 0 < depth <= level and line[depth:].startswith(" "):
            return "\n".join(lines[start:end])
    return "\n".join(lines[start:])


def processes_naming(text: str) -> list[str]:
    """Processes whose command line holds ``text`` (arguments apart by spaces, as a shell shows
    them): what an interrupt test looks for 10 s after the factory exited."""
    import contextlib

    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            line = cmdline.read_bytes().replace(b"\0", b" ")
            if text.encode() in line:
                found.append(line.decode(errors="replace"))
    return found


def wait_for_log_line(log: Path, line: str, process: subprocess.Popen[str], timeout: float = 900) -> None:
    """Return as soon as ``log`` holds ``line`` (polled every 5 ms: a phase of a second is hit);
    fail if ``process`` (the factory) ended first, or after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (log.exists() and line in log.read_text(errors="replace")):
        assert process.poll() is None, f"the build ended before its log said {line!r}"
        assert time.monotonic() < deadline, f"the log never said {line!r}"
        time.sleep(0.005)


def chromium_or_skip(purpose: str, *, required: bool) -> str:
    """Debian's headless chromium; where ``required`` (CI) its absence fails the test, else skips it."""
    import shutil

    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    message = f"headless chromium {purpose}: apt-get install -y chromium"
    if required:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


# docs/add-an-op.md, as a test follows it: each `<!-- step: ... -->` comment names a file and what
# to do with the code block under it (replace PATH: LINE, insert PATH after|before: LINE, append
# PATH, new PATH). The host tier builds the result for CPU, the Docker tier for CUDA.
ADD_AN_OP_PAGE = REPO / "docs" / "add-an-op.md"
_STEP = re.compile(r"<!-- step: (?P<action>replace|insert|append|new) (?P<path>[^:\s]+)"
                   r"(?:(?::| (?P<where>after|before):) (?P<text>[^\n]*?))? -->\n```\w*\n(?P<block>.*?)```", re.S)


def add_an_op_steps() -> list[re.Match[str]]:
    text = ADD_AN_OP_PAGE.read_text()
    found = list(_STEP.finditer(text))
    assert len(found) == text.count("<!-- step:"), "a step comment the test cannot read"
    return found


def follow_add_an_op(project: Path) -> None:
    """Every step of the page, done to ``project`` (a fresh `wheelfactory new mykernels`) as a
    reader would: a line replaced, a block put after or before a line, appended, or a new file.
    Each line a step names must be there, once."""
    for step in add_an_op_steps():
        path, block = project / step["path"], step["block"]
        if step["action"] == "new":
            assert not path.exists(), step["path"]
            path.write_text(block)
            continue
        text = path.read_text()
        if step["action"] == "append":
            path.write_text(text + block)
            continue
        lines = text.splitlines(keepends=True)
        matches = [i for i, line in enumerate(lines) if step["text"] in line]
        assert len(matches) == 1, (step["path"], step["text"], len(matches))
        at = matches[0]
        if step["action"] == "replace":
            lines[at:at + 1] = [block]
        elif step["where"] == "after":
            lines.insert(at + 1, block)
        else:
            lines.insert(at, block)
        path.write_text("".join(lines))


class FakeStage:
    """A stage as the runner reads one (project/stage.py Stage), for the runner's tests with a fake
    engine: a native project of ``variant`` whose checkout is no git checkout."""

    def __init__(self, variant: object) -> None:
        from wheelfactory.project.kind_facts import NATIVE

        self.variant = variant
        self.package = "fake"
        self.kind, self.source_date_epoch = NATIVE, 315532800
        self.source_root = Path(tempfile.gettempdir())  # not a git checkout: no source entry in the record
        self.kernel_depends: tuple[dict[str, object], ...] = ()
        self.hub_metadata = None  # a compiled wheel

    def key_material(self) -> object:
        return self.variant.id  # type: ignore[attr-defined]
