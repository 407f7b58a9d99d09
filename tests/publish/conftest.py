import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # dist_fakes, index_servers

from index_servers import DevpiServer, PypiServer, start_retrying  # noqa: E402

# Real index servers on 127.0.0.1 (index_servers.py), each started once per session and only
# when a test asks for it. Tests keep apart by user (devpi) or project name (pypiserver).

@pytest.fixture(scope="session")
def devpi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevpiServer]:
    server = start_retrying(DevpiServer.launch, tmp_path_factory.mktemp("devpi"))
    try:
        yield server
    finally:
        server.server.stop()


@pytest.fixture(scope="session")
def pypiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PypiServer]:
    server = start_retrying(PypiServer.launch, tmp_path_factory.mktemp("pypiserver"))
    try:
        yield server
    finally:
        server.server.stop()
