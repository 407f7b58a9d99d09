import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # dist_fakes

from index_servers import DevpiServer, PypiServer, S3Server, running  # noqa: E402

# Real servers on 127.0.0.1 (tests/index_servers.py), each started once per session and only
# when a test asks for it. Tests keep apart by user (devpi), project name (pypiserver) or bucket.

@pytest.fixture(scope="session")
def devpi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevpiServer]:
    with running(DevpiServer.launch, tmp_path_factory.mktemp("devpi")) as server:
        yield server


@pytest.fixture(scope="session")
def pypiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PypiServer]:
    with running(PypiServer.launch, tmp_path_factory.mktemp("pypiserver")) as server:
        yield server


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with running(S3Server.launch, tmp_path_factory.mktemp("moto")) as server:
        yield server
