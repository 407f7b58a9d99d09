from collections.abc import Iterator

import pytest

from tests.index_servers import DevpiServer, PypiServer, S3Server, running

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
