"""Where the files the factory ships with live: the Dockerfile templates and the runtime that is
vendored into every kernel package, wheelfactory/_docker and wheelfactory/_runtime. In a checkout
they are links to the top-level docker/ and runtime/ folders; a wheel of wheelfactory carries copies
(see [tool.setuptools] in pyproject.toml)."""

from __future__ import annotations

from pathlib import Path

from wheelfactory.errors import ConfigError

_PACKAGE = Path(__file__).resolve().parents[1]  # the wheelfactory package's folder


def shipped_dir(checkout_name: str, installed_name: str, marker: str) -> Path:
    """The directory holding ``marker``: wheelfactory/``installed_name``, resolved (in a checkout it
    links to the top-level ``checkout_name``)."""
    candidate = _PACKAGE / installed_name
    if (candidate / marker).is_file():
        return candidate.resolve()
    raise ConfigError(
        f"wheelfactory's {checkout_name}/ files are missing (looked in {candidate})",
        hint="reinstall wheelfactory (pip install -e . from a checkout)",
    )


def templates_dir() -> Path:
    return shipped_dir("docker", "_docker", "build-cpu.Dockerfile")


def runtime_dir() -> Path:
    return shipped_dir("runtime", "_runtime", "__init__.py")
