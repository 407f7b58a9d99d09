"""What a wheel set holds where ``pip download`` alone gets it wrong.

*Another arch's markers.* pip evaluates a requirement's markers against the interpreter it runs on,
whatever ``--platform`` says: downloading torch 2.5.1 for an aarch64 image on an x86_64 host asks
for the ``nvidia-*`` wheels that its ``platform_machine == "x86_64"`` markers name, and fails (none
exist for aarch64); a newer torch gets GBs it never uses. For a set whose arch is not the host's,
uv resolves the requirements for the target (``uv pip compile --python-platform``) and pip
downloads exactly those pins (``--no-deps``). uv is told where packages come from by the host's pip
configuration (``uv_index_args``), never by a configuration of its own.

*Dependencies published only as a source distribution* (ColossalAI's ``contexttimer``): an offline
container cannot build them, and ``pip download --only-binary`` does not fetch them. Built here on
the host into a wheel, which the set takes when it is pure Python (``py3-none-any``: it runs on any
image); one that compiles code is refused, naming the package and where its wheel can come from.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import parse_wheel_filename

from wheelfactory.errors import WheelhouseError
from wheelfactory.plan.versions import major_minor
from wheelfactory.support.host_env import find_links_args
from wheelfactory.support.proc import CommandFailed, run

if TYPE_CHECKING:
    from wheelfactory.engines.wheelhouse import ContainerPython

# The newest manylinux_2_X that uv's --python-platform names (uv 0.13: 2_17 to 2_40). A newer
# glibc installs wheels up to it: never one the image cannot run.
NEWEST_UV_MANYLINUX = 40
# pip's last line when no file of a requirement fits (with --only-binary: no wheel of it exists)
_NO_DISTRIBUTION = re.compile(r"No matching distribution found for (\S+)")
_TRUE = frozenset({"1", "true", "yes", "on"})


def uv_platform(python: ContainerPython) -> str:
    """uv's name of the platform an environment is for: the image's arch and glibc, as manylinux."""
    major, minor = major_minor(python.glibc)
    if major != 2 or minor < 17:
        raise WheelhouseError(
            f"the build image's glibc {python.glibc} is older than 2.17, which no torch wheel "
            "supports: use a newer base image"
        )
    return f"{python.arch}-manylinux_2_{min(minor, NEWEST_UV_MANYLINUX)}"


def uv_index_args(pip_env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """The host's pip settings (``PIP_*`` as ``download_environment`` gives them, over the process's
    own) as uv's arguments and environment: the same index, mirrors, find-links and certificates."""

    def listed(key: str) -> list[str]:
        return pip_env.get(key, "").split()

    args: list[str] = ["--no-config"]  # uv's own configuration files name no registry for us
    if pip_env.get("PIP_NO_INDEX", "").lower() in _TRUE:
        args.append("--no-index")
    elif pip_env.get("PIP_INDEX_URL"):
        args += ["--index-url", pip_env["PIP_INDEX_URL"]]
    for url in listed("PIP_EXTRA_INDEX_URL"):
        args += ["--extra-index-url", url]
    args += find_links_args(listed("PIP_FIND_LINKS"))
    for host in listed("PIP_TRUSTED_HOST"):
        args += ["--allow-insecure-host", host]
    # pip's --timeout is also spelled --default-timeout, in a file and in a variable alike
    env = {
        name: pip_env[key]
        for key, name in (
            ("PIP_CERT", "SSL_CERT_FILE"),
            ("PIP_CLIENT_CERT", "SSL_CLIENT_CERT"),
            ("PIP_DEFAULT_TIMEOUT", "UV_HTTP_TIMEOUT"),
            ("PIP_TIMEOUT", "UV_HTTP_TIMEOUT"),
            ("PIP_PROXY", "HTTPS_PROXY"),
        )
        if pip_env.get(key)
    }
    if "HTTPS_PROXY" in env:
        env["HTTP_PROXY"] = env["HTTPS_PROXY"]
    return args, env


def target_pins(
    requirements: list[str],
    python: ContainerPython,
    *,
    extra_index_urls: tuple[str, ...],
    find_links: list[str],
    constraints: Path | None,
    pip_env: Mapping[str, str],
    listing: Path,
    log: Path | None,
) -> list[str]:
    """``requirements`` and all they depend on for ``python``'s arch and version, as ``name==version``
    pins: uv evaluates every marker for the target. Source-only packages are resolved too (uv
    reads their metadata); ``pure_wheel_from_sdist`` gives them wheels. ``listing``: a scratch
    file for the requirements, removed after."""
    from uv import find_uv_bin

    index_args, env = uv_index_args(pip_env)
    listing.write_text("".join(f"{r}\n" for r in requirements))
    command = [
        find_uv_bin(),
        "pip",
        "compile",
        str(listing),
        "--quiet",
        "--no-header",
        "--no-annotate",
        "--python-version",
        python.version,
        "--python-platform",
        uv_platform(python),
        # pip looks at every index for the best version (torch from a torch index beside PyPI)
        "--index-strategy",
        "unsafe-best-match",
        *index_args,
    ]
    for url in extra_index_urls:
        command += ["--extra-index-url", url]
    command += find_links_args(find_links)
    if constraints is not None:
        command += ["--constraint", str(constraints)]
    try:
        output = run(command, log=log, env=env)
    except CommandFailed as exc:
        last = (exc.tail or str(exc)).strip().splitlines()
        raise WheelhouseError(
            f"resolving {', '.join(requirements)} for {python.arch} (Python {python.version}) "
            f"failed: {' '.join(line.strip() for line in last[-3:])}"
        ) from None
    finally:
        listing.unlink(missing_ok=True)
    return [line.strip() for line in output.splitlines() if _is_pin(line.strip())]


def _is_pin(line: str) -> bool:
    """``name==version`` (uv's output lines; a warning it printed is not one)."""
    try:
        specifiers = list(Requirement(line).specifier)
    except InvalidRequirement:
        return False
    return len(specifiers) == 1 and specifiers[0].operator == "=="


def unavailable_requirement(failure: CommandFailed) -> Requirement | None:
    """The requirement ``pip download --only-binary`` found no wheel of, from its last words."""
    found = _NO_DISTRIBUTION.findall(failure.tail or "")
    if not found:
        return None
    try:
        return Requirement(found[-1])
    except InvalidRequirement:
        return None


def pure_wheel_from_sdist(
    requirement: Requirement,
    directory: Path,
    *,
    python: str,
    platform_name: str,
    pip_env: Mapping[str, str],
    find_links: list[str],
    log: Path | None,
) -> Path:
    """Build ``requirement``'s source distribution into a wheel in ``directory`` (on the host, from
    the host's indexes); the wheel when it is pure Python, else WheelhouseError naming the package."""
    directory.mkdir(parents=True, exist_ok=True)
    scratch = directory / f".build.{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    try:
        # --no-binary for this package only: its build requirements (setuptools) still come as wheels
        run(
            [
                python,
                "-m",
                "pip",
                "wheel",
                "--disable-pip-version-check",
                "--no-deps",
                "--no-cache-dir",
                "--no-binary",
                requirement.name,
                "--wheel-dir",
                str(scratch),
                *find_links_args(find_links),
                str(requirement),
            ],
            log=log,
            env=dict(pip_env),
        )
        built = sorted(scratch.glob("*.whl"))
        if not built:
            raise WheelhouseError(
                f"{requirement.name}: pip built no wheel from its source distribution"
            )
        wheel = built[0]
        tags = parse_wheel_filename(wheel.name)[3]
        if any(tag.abi != "none" or tag.platform != "any" for tag in tags):
            raise WheelhouseError(
                f"{requirement.name} is published only as a source distribution, and it compiles code "
                f"({wheel.name}): no wheel of it runs on {platform_name}. Build its wheel for that platform and "
                f"name the folder holding it in [build] find_links or [test] find_links"
            )
        final = directory / wheel.name
        os.replace(wheel, final)
        return final
    except CommandFailed as exc:
        raise WheelhouseError(
            f"{requirement} has no wheel, and building one from its source distribution failed: "
            f"{exc.last_line}"
        ) from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
