"""The Docker engine, through the Docker SDK only: a connected client, and containers as context
managers that always remove themselves.

Nothing here shells out to the docker CLI: every call the factory needs (ping, images, build,
import, create/exec/remove) has an SDK equivalent.
"""

from __future__ import annotations

import os
import shlex
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Literal, Protocol, final

from wheelfactory.errors import DockerUnavailable
from wheelfactory.support.proc import TAIL_LINES, CommandFailed

if TYPE_CHECKING:
    import docker
    from docker.api.client import APIClient
    from docker.models.containers import Container as SdkContainer
    from docker.models.containers import ContainerCollection
    from docker.models.images import ImageCollection

DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
CLIENT_TIMEOUT_S = 600  # per socket read: a large import or a quiet build step may take minutes
PROBE_TIMEOUT_S = 10
PROBE_API_VERSION = "1.24"  # the oldest the SDK speaks; /version answers unversioned anyway
NO_ENGINE_HINT = "start one (`wheelfactory engine start`) or use --engine host"

Network = Literal["none", "host"]


class DockerClient(Protocol):
    """What the factory uses of the Docker SDK's client (``docker.DockerClient`` is one): typed, so
    every caller is checked, and a test can hand in its own without the SDK."""

    @property
    def images(self) -> ImageCollection: ...

    @property
    def containers(self) -> ContainerCollection: ...

    @property
    def api(self) -> APIClient: ...


def docker_client(
    environ: Mapping[str, str] | None = None, *, hint: str = NO_ENGINE_HINT
) -> docker.DockerClient:
    """A client of the engine named by DOCKER_HOST (default: the local socket), speaking the
    engine's API version; raises DockerUnavailable when none answers (its message ends with
    ``hint``, what to do, unless that is empty)."""
    env = dict(os.environ if environ is None else environ)
    url = env.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST
    try:
        import docker
    except ImportError as exc:
        raise DockerUnavailable(
            f"the Docker SDK is not installed ({exc}): pip install docker"
        ) from exc
    import requests

    unavailable = DockerUnavailable(
        f"no Docker engine answers at {url}" + (f": {hint}" if hint else "")
    )
    # The SDK's unix transport leaks its socket when the connect fails (an unclosed-socket warning,
    # an error under our pytest settings), so a unix socket is first tried with a plain connect.
    if url.startswith("unix://"):
        refused = _unix_socket_refusal(url[len("unix://") :])
        if refused == "Permission denied":
            raise DockerUnavailable(
                f"the Docker engine at {url} refuses this user (permission denied): "
                "run as root or as a member of the docker group"
            )
        if refused:
            raise unavailable
    # The SDK's own negotiation (version="auto") cannot be closed when it fails; ask the engine's
    # API version with a pinned-version client closed here, then pin the engine's version.
    probe = docker.from_env(environment=env, version=PROBE_API_VERSION, timeout=PROBE_TIMEOUT_S)
    try:
        server = probe.api.version(api_version=False)
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise unavailable from exc
    finally:
        probe.close()
    return docker.from_env(
        environment=env, version=str(server["ApiVersion"]), timeout=CLIENT_TIMEOUT_S
    )


def _unix_socket_refusal(path: str) -> str | None:
    """None when something accepts connections on ``path``, else why not ("Permission denied")."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(PROBE_TIMEOUT_S)
        try:
            sock.connect(path)
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


# /dev/shm of the containers that run a wheel (smoke test, the project's tests): torch shares tensors
# between processes through it (torch.multiprocessing, DataLoader workers), and Docker's 64 MB
# default fails DeepSpeed's cross-process optimizer test with "unable to allocate shared memory".
# A tmpfs: it takes memory only as it is used, under the container's memory cap.
SHM_SIZE = "2g"


@final
class Container:
    """A started container that idles (``sleep infinity``) while ``run`` executes commands in it.

    ``with Container(client, image) as box: box.run([...])``: on leaving the block the container is
    removed, also when the block raised. ``keep=True`` leaves it running for debugging (its name is
    in ``self.name``); the caller decides when, e.g. from a --keep-container flag.
    """

    def __init__(
        self,
        client: DockerClient,
        image: str,
        *,
        network: Network = "none",
        volumes: Mapping[Path, str] | None = None,
        environment: Mapping[str, str] | None = None,
        workdir: str | None = None,
        keep: bool = False,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        self.client = client
        self.image = image
        self.network = network
        # host path -> "container path[:ro]"
        self.volumes = {
            str(host): {"bind": spec.split(":")[0], "mode": "ro" if spec.endswith(":ro") else "rw"}
            for host, spec in (volumes or {}).items()
        }
        self.environment = dict(environment or {})
        self.workdir = workdir
        self.keep = keep
        self.labels = {"wheelfactory": "build", **(labels or {})}
        self._container: SdkContainer | None = None

    @property
    def name(self) -> str:
        return str(self._container.name) if self._container is not None else ""

    def __enter__(self) -> Container:
        container = self.client.containers.create(
            self.image,
            ["sleep", "infinity"],
            network_mode=self.network,
            volumes=self.volumes,
            environment=self.environment,
            working_dir=self.workdir,
            labels=self.labels,
            shm_size=SHM_SIZE,
        )
        self._container = container
        try:
            container.start()
        except BaseException:
            self._remove()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if not self.keep:
            self._remove()

    def _remove(self) -> None:
        if self._container is not None:
            self._container.remove(force=True)
            self._container = None

    def run(
        self,
        command: Sequence[str],
        *,
        log: Path | None = None,
        check: bool = True,
        environment: Mapping[str, str] | None = None,
        workdir: str | None = None,
    ) -> str:
        """Run ``command`` in the container; return its output (stdout and stderr together).

        Like ``proc.run``: with ``log`` the quoted command and then the output are appended to it; a
        non-zero exit raises CommandFailed with the output's tail (unless ``check=False``)."""
        if self._container is None:
            raise RuntimeError("Container.run outside its with-block")
        result = self._container.exec_run(
            list(command), environment=dict(environment or {}), workdir=workdir
        )
        # bytes: not a streamed exec
        raw = result.output if isinstance(result.output, bytes) else b""
        output = raw.decode(errors="replace")
        code = result.exit_code if result.exit_code is not None else -1
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("a", encoding="utf-8") as sink:
                sink.write(f"$ {shlex.join(command)}  (in container {self.name})\n{output}")
        if check and code != 0:
            tail = "\n".join(output.splitlines()[-TAIL_LINES:])
            raise CommandFailed(command, code, tail, log)
        return output
