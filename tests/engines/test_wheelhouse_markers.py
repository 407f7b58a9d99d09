"""pip download picks dependencies by the markers of the interpreter it runs on, not by
--python-version: the wheelhouse completes the set for the container's Python itself."""

from __future__ import annotations

import zipfile
from pathlib import Path

from wheelfactory.engines.wheelhouse import ContainerPython, missing_for_target


def wheel(directory: Path, name: str, *requires: str) -> Path:
    path = directory / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        lines = [f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"] + [f"Requires-Dist: {r}\n" for r in requires]
        archive.writestr(f"{name}-1.0.dist-info/METADATA", "".join(lines))
    return path


def test_the_targets_markers_decide(tmp_path: Path) -> None:
    wheels = [wheel(tmp_path, "build", "packaging>=19", 'tomli>=1.1.0; python_version < "3.11"',
                    'colorama; os_name == "nt"', 'importlib-metadata>=4.6; python_full_version < "3.10.2"',
                    'virtualenv; extra == "virtualenv"'),
              wheel(tmp_path, "packaging")]
    assert missing_for_target(wheels, ContainerPython("3.9")) == ["importlib-metadata>=4.6", "tomli>=1.1.0"]
    assert missing_for_target(wheels, ContainerPython("3.11")) == []
    wheels.append(wheel(tmp_path, "tomli"))
    assert missing_for_target(wheels, ContainerPython("3.10")) == ["importlib-metadata>=4.6"]  # 3.10.0 < 3.10.2


def test_the_hosts_pip_configuration_is_read_for_where_packages_come_from() -> None:
    from wheelfactory.engines.pip_config import HOST_ENVIRONMENT_SETTINGS, parse_pip_config

    listing = ("global.index-url='http://mirror.invalid/simple'\n"
               "global.constraint='/etc/xdg/pip/constraints.txt'\n"
               "download.index-url='http://other.invalid/simple'\n"
               "install.no-deps='true'\n"
               ":env:.find-links='/opt/wheels'\n")
    settings = parse_pip_config(listing)
    assert settings == {"index-url": "http://other.invalid/simple", "constraint": "/etc/xdg/pip/constraints.txt"}
    assert "constraint" in HOST_ENVIRONMENT_SETTINGS and "index-url" not in HOST_ENVIRONMENT_SETTINGS
