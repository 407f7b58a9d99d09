"""Build images from the Dockerfile templates in docker/: rendering is pure, building is separate.

``render_image`` (pure) fills a template and names the result by content,
``wheelfactory/build:<12 hex of sha256 of the Dockerfile>``; ``ensure_image`` (side effects)
builds a rendering through the Docker SDK's classic builder only when its tag is missing.

Templates are plain Dockerfiles with ``{{name}}`` placeholders. A header line
``# wheelfactory-network: host`` says that a step needs the network (apt through the Debian
mirror); everything else builds with no network at all.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import tarfile
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from wheelfactory.errors import ConfigError, ImageBuildFailed
from wheelfactory.images.containers import Network
from wheelfactory.images.emulation import OCI_ARCH
from wheelfactory.support.proc import tail_of
from wheelfactory.support.progress import CommandRun, Listener, StepDone, ignore
from wheelfactory.support.resources import templates_dir

if TYPE_CHECKING:
    from wheelfactory.images.containers import DockerClient

BUILD_REPOSITORY = "wheelfactory/build"
CONTENT_LABEL = "wheelfactory.content"  # full sha256 of what the tag's 12 hex abbreviate
NETWORK_DIRECTIVE = "# wheelfactory-network:"
TOOLKIT_KINDS = ("cuda", "rocm")
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


@dataclass(frozen=True)
class Template:
    name: str  # file name inside docker/
    text: str

    @property
    def network(self) -> Network:
        for line in self.text.splitlines():
            if line.startswith(NETWORK_DIRECTIVE):
                value = line[len(NETWORK_DIRECTIVE) :].strip()
                if value not in ("none", "host"):
                    raise ConfigError(
                        f"network must be none or host, not {value!r}",
                        file=f"docker/{self.name}",
                        key="wheelfactory-network",
                    )
                return "host" if value == "host" else "none"
        return "none"

    def fill(self, values: Mapping[str, str]) -> str:
        """Replace every ``{{name}}``; a placeholder without a value is an error naming the template."""
        missing = sorted({m.group(1) for m in _PLACEHOLDER.finditer(self.text)} - set(values))
        if missing:
            raise ConfigError(
                f"no value for {', '.join(missing)}",
                file=f"docker/{self.name}",
                key=missing[0],
                hint="a template may only use the values its renderer passes",
            )
        return _PLACEHOLDER.sub(lambda m: values[m.group(1)], self.text)


def load_template(name: str, templates: Path | None = None) -> Template:
    path = (templates or templates_dir()) / name
    try:
        return Template(name, path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"template {path} is missing",
            hint="run from a checkout of wheelfactory (docker/ holds the templates)",
        ) from None


def label_block(labels: Mapping[str, str]) -> str:
    """One LABEL instruction, keys sorted, values quoted (JSON string syntax is what Dockerfiles read)."""
    if not labels:
        return ""
    pairs = [f"{key}={json.dumps(labels[key])}" for key in sorted(labels)]
    return "LABEL " + " \\\n      ".join(pairs)


def content_digest(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()


@dataclass(frozen=True)
class RenderedImage:
    dockerfile: str
    tag: str
    network: Network = "none"  # "host" only when a step needs the network (apt)
    template: str = ""  # the template's file name, for messages
    content: str = ""  # full sha256 the tag abbreviates; checked on reuse
    # also in the Dockerfile; kept for display
    labels: tuple[tuple[str, str], ...] = field(default=())

    @property
    def repository(self) -> str:
        return self.tag.rsplit(":", 1)[0]


@dataclass(frozen=True)
class ImageRef:
    tag: str
    id: str  # the image id: sha256 of its config, what `docker images --digests` calls the id
    built: bool  # False: the tag existed with the same content and was reused (no build ran)
    seconds: float = 0.0


def _toolkit_kind(toolkit_layer: str | None) -> tuple[str, str]:
    """None or "cpu" -> ("cpu", ""); "cuda13.0" -> ("cuda", "13.0"); "rocm6.2" -> ("rocm", "6.2")."""
    if toolkit_layer in (None, "", "cpu"):
        return "cpu", ""
    for kind in TOOLKIT_KINDS:
        if toolkit_layer.startswith(kind) and re.fullmatch(
            r"\d+(\.\d+)*", toolkit_layer[len(kind) :]
        ):
            return kind, toolkit_layer[len(kind) :]
    raise ConfigError(
        f"unknown toolkit layer {toolkit_layer!r}", hint="use cpu, cudaX.Y or rocmX.Y"
    )


def template_for(toolkit_layer: str | None) -> str:
    """The template of a variant image: ``build-<cpu|cuda|rocm>.Dockerfile``."""
    kind, _ = _toolkit_kind(toolkit_layer)
    return f"build-{kind}.Dockerfile"


def render_image(
    base: str,
    toolkit_layer: str | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    values: Mapping[str, str] | None = None,
    templates: Path | None = None,
) -> RenderedImage:
    """The Dockerfile of a variant's build image: ``FROM base``, the toolkit's layer, labels;
    ``values`` fills the template's other placeholders (the Debian CUDA layer's mirror and suite)."""
    kind, version = _toolkit_kind(toolkit_layer)
    name = template_for(toolkit_layer)
    templates = templates or templates_dir()
    if not (templates / name).is_file():
        raise ConfigError(
            f"no {name} template: {kind} toolkit layers are not in this version of wheelfactory",
            file=str(templates),
            hint="build the cpu variants, or use --engine host",
        )
    template = load_template(name, templates)
    all_labels = {
        "wheelfactory.kind": "build",
        "wheelfactory.base": base,
        "wheelfactory.toolkit": kind,
        **({"wheelfactory.toolkit-version": version} if version else {}),
        **(labels or {}),
    }
    dockerfile = template.fill(
        {
            **(values or {}),
            "base": base,
            "toolkit_version": version,
            "labels": label_block(all_labels),
        }
    )
    content = content_digest(dockerfile)
    return RenderedImage(
        dockerfile,
        f"{BUILD_REPOSITORY}:{content[:12]}",
        template.network,
        name,
        content,
        tuple(sorted(all_labels.items())),
    )


def _context(dockerfile: str, directory: Path | None = None) -> BinaryIO:
    """A build context holding the Dockerfile and, when given, ``directory`` under its own name
    (what the template COPYs; links kept as links). With a directory it is a temp file beside it,
    not memory: a cross toolchain is ~200 MB."""
    data = dockerfile.encode()
    buffer: BinaryIO = (
        io.BytesIO() if directory is None else tempfile.TemporaryFile(dir=directory.parent)
    )
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(data))
        if directory is not None:
            tar.add(str(directory), arcname=directory.name)
    buffer.seek(0)
    return buffer


def find_image(client: DockerClient, rendered: RenderedImage) -> ImageRef | None:
    """The image under ``rendered.tag`` if it holds this rendering (its content label matches)."""
    import docker

    try:
        image = client.images.get(rendered.tag)
    except docker.errors.ImageNotFound:
        return None
    if rendered.content and image.labels.get(CONTENT_LABEL) != rendered.content:
        return None  # a 12-hex collision or a hand-made tag: build it again
    return ImageRef(rendered.tag, str(image.id), built=False)


# The lowest CPU weight the engine gives a container (cgroup v2 cpu.weight 1 of the default 100):
# a build that runs only on what other work leaves.
IDLE_CPU_SHARES = 2


def ensure_image(
    client: DockerClient,
    rendered: RenderedImage,
    *,
    log: Path,
    progress: Listener = ignore,
    arch: str | None = None,
    idle: bool = False,
    context: Path | None = None,
) -> ImageRef:
    """The image for ``rendered``: reused when its tag exists with the same content, else built
    (classic builder, network only when the template asks for it), its log appended to ``log``.
    ``arch``: the platform the image is for (a planner arch); None: the engine's own. Another
    arch's RUN steps run through QEMU user emulation (images/emulation.py). ``idle``: its RUN
    steps get the lowest CPU weight (a warm-up beside other work). ``context``: a directory the
    template COPYs from, by its name (else the context holds the Dockerfile alone)."""
    import docker

    found = find_image(client, rendered)
    if found is not None:
        progress(StepDone(f"{rendered.tag} exists: reused ({found.id})"))
        return found
    start = time.monotonic()
    log.parent.mkdir(parents=True, exist_ok=True)
    # What the CLI would be; the SDK call below is the same request without the CLI.
    shown = (
        f"docker build --network {rendered.network} --label {CONTENT_LABEL}=... -t {rendered.tag} - "
        f"(docker/{rendered.template}, through the SDK)"
    )
    progress(CommandRun(shown))
    error = ""
    with log.open("a", encoding="utf-8") as sink, contextlib.ExitStack() as stack:
        sink.write(f"$ {shown}\n{rendered.dockerfile}\n")
        sink.flush()
        try:
            for chunk in client.api.build(
                fileobj=stack.enter_context(_context(rendered.dockerfile, context)),
                custom_context=True,
                tag=rendered.tag,
                network_mode=rendered.network,
                rm=True,
                forcerm=True,
                pull=False,
                decode=True,
                labels={CONTENT_LABEL: rendered.content},
                container_limits={"cpushares": IDLE_CPU_SHARES} if idle else None,
                platform=f"linux/{OCI_ARCH[arch]}" if arch else None,
            ):
                text = chunk.get("stream", "")
                if text:
                    sink.write(text)
                    sink.flush()
                    if text.startswith("Step "):
                        progress(CommandRun(text.strip()))
                if "error" in chunk:
                    error = str(
                        chunk.get("errorDetail", {}).get("message") or chunk["error"]
                    ).strip()
                    sink.write(f"error: {error}\n")
        except docker.errors.APIError as exc:
            error = str(exc.explanation or exc)
            sink.write(f"error: {error}\n")
    if error:
        raise ImageBuildFailed(
            f"building {rendered.tag} from docker/{rendered.template} failed: "
            f"{error.splitlines()[-1]} (log: {log}); {_hint(error)}",
            tail=tail_of(log),
        )
    image = client.images.get(rendered.tag)
    if arch and image.attrs.get("Architecture") != OCI_ARCH[arch]:
        raise ImageBuildFailed(
            f"{rendered.tag} was built for {image.attrs.get('Architecture')}, not {OCI_ARCH[arch]}: "
            f"its FROM image is for another arch; name an {arch} base in [build] base_image"
        )
    seconds = time.monotonic() - start
    progress(StepDone(f"built {rendered.tag} ({image.id}) in {seconds:.1f} s"))
    return ImageRef(rendered.tag, str(image.id), built=True, seconds=round(seconds, 3))


BASE_ID_LABEL = "wheelfactory.base-id"
NO_REGISTRY_HINT = (
    'no registry reachable? set [build] debian_base = "bookworm" to make a base from Debian '
    "packages here, or name an image this engine has"
)


def resolve_base(client: DockerClient, name: str, *, log: Path, progress: Listener = ignore) -> str:
    """The id of base image ``name``, pulled first when the engine lacks it. A build image records
    this id (BASE_ID_LABEL), so re-pulling a moved tag (manylinux images are republished under the
    same name) gives a new build image instead of silently reusing one made from the old base."""
    import docker

    try:
        return str(client.images.get(name).id)
    except docker.errors.ImageNotFound:
        pass
    progress(CommandRun(f"docker pull {name}"))
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        image = client.images.pull(name)
    except docker.errors.APIError as exc:
        reason = str(exc.explanation or exc).splitlines()[0]
        with log.open("a", encoding="utf-8") as sink:
            sink.write(f"$ docker pull {name}\nerror: {reason}\n")
        raise ImageBuildFailed(
            f"base image {name} is not on this engine and pulling it failed: {reason}; "
            f"{NO_REGISTRY_HINT}"
        ) from None
    return str(image.id)


def _hint(error: str) -> str:
    if "returned a non-zero code" in error:  # a RUN step failed
        if "apt-get" in error:
            return (
                "apt failed: the log's tail says why (a package the suite lacks, or a mirror that does "
                "not answer from this machine: the build uses --network host)"
            )
        return "a RUN step failed: see the log"
    pulling = (
        "pull access denied",
        "manifest unknown",
        "not found",
        "registry",
        "dial tcp",
        "no such host",
    )
    if any(sign in error for sign in pulling):
        return (
            "the FROM image is not on this engine and no registry gave it: make it first "
            "(e.g. wheelfactory base-image) or name a local image"
        )
    return "see the log"
