"""How ``pip download`` is set up for a wheel set: where the host's pip looks for packages (its
configuration files and ``PIP_*`` variables), without the host's settings for its own
environment, which never decide what a container's set holds."""

from __future__ import annotations

import ast
import functools
import os

from wheelfactory.support.proc import run

# Settings of the host's pip that are about the host's own environment, not about where packages
# come from: a container's wheel set is another environment (another Python, another torch), so
# these never decide what it holds. A torch cap in a constraints file, say, would refuse every
# variant of a newer torch (ResolutionImpossible) with no word of the file.
HOST_ENVIRONMENT_SETTINGS = frozenset(
    {
        "constraint",
        "requirement",
        "build-constraint",
        "editable",
        "target",
        "prefix",
        "root",
        "user",
        "upgrade",
        "upgrade-strategy",
        "require-virtualenv",
        "no-deps",
        "pre",
        "only-binary",
        "no-binary",
    }
)


def parse_pip_config(listing: str) -> dict[str, str]:
    """``pip config list`` -> the settings that apply to ``pip download`` from the configuration
    files (global and download sections, the command's own winning), as ``key -> value``.
    Settings from the environment (``:env:``) are not listed here: the environment carries them."""
    found: dict[str, dict[str, str]] = {"global": {}, "download": {}}
    for line in listing.splitlines():
        name, sep, raw = line.partition("=")
        section, _, key = name.partition(".")
        if not sep or section not in found or not key:
            continue
        try:
            value = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            value = raw.strip()
        found[section][key] = str(value)
    return {**found["global"], **found["download"]}


@functools.cache
def download_environment(python: str) -> dict[str, str]:
    """The environment ``pip download`` runs with for a wheel set: where the host's pip looks for
    packages (its index, mirrors, find-links, certificates, timeouts: registries by the host's
    own configuration), but none of the host's settings for its own environment. pip reads no
    configuration file (PIP_CONFIG_FILE=/dev/null); what the files said, less those settings,
    comes as PIP_* variables, below any the caller set."""

    def variable(key: str) -> str:
        return f"PIP_{key.upper().replace('-', '_')}"

    listing = run([python, "-m", "pip", "config", "list"])
    env = {
        variable(key): value
        for key, value in parse_pip_config(listing).items()
        if key not in HOST_ENVIRONMENT_SETTINGS and variable(key) not in os.environ
    }
    cleared = {
        variable(key): "" for key in HOST_ENVIRONMENT_SETTINGS if variable(key) in os.environ
    }
    return {**env, **cleared, "PIP_CONFIG_FILE": os.devnull}


def pip_environ() -> dict[str, str]:
    """The ``PIP_*`` settings of this process's environment (pip reads them; uv is told them)."""
    return {key: value for key, value in os.environ.items() if key.startswith("PIP_")}
