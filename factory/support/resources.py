"""Where the files the factory ships with live: the Dockerfile templates and the runtime that is
vendored into every kernel package. In a checkout (and an editable install) they are the
top-level docker/ and runtime/ directories beside factory/ (the package's source); a wheel of
wheelfactory carries them as wheelfactory/_docker and wheelfactory/_runtime (see [tool.setuptools]
in pyproject.toml)."""

from __future__ import annotations

from pathlib import Path

from wheelfactory.errors import ConfigError

_PACKAGE = Path(__file__).resolve().parents[1]  # factory/ in a checkout, wheelfactory/ installed


def shipped_dir(checkout_name: str, installed_name: str, marker: str) -> Path:
    """The directory holding ``marker``: the checkout's ``checkout_name`` or the installed copy."""
    for candidate in (_PACKAGE.parent / checkout_name, _PACKAGE / installed_name):
        if (candidate / marker).is_file():
            return candidate
    raise ConfigError(f"wheelfactory's {checkout_name}/ files are missing (looked in {_PACKAGE.parent / checkout_name} "
                      f"and {_PACKAGE / installed_name})", hint="reinstall wheelfactory (pip install -e . from a checkout)")


def templates_dir() -> Path:
    return shipped_dir("docker", "_docker", "build-cpu.Dockerfile")


def runtime_dir() -> Path:
    return shipped_dir("runtime", "_runtime", "__init__.py")
