"""factory/wheelfactory/images/dockerfiles.py: rendering (pure, no engine) and ensure_image's reuse (real engine)."""

from __future__ import annotations

import hashlib
import re
import uuid
from pathlib import Path

import docker
import pytest
from wheelfactory.errors import ConfigError
from wheelfactory.images.base_image import BaseImage
from wheelfactory.images.dockerfiles import (
    BUILD_REPOSITORY,
    CONTENT_LABEL,
    ensure_image,
    label_block,
    load_template,
    render_image,
    template_for,
)

BASE = "wheelfactory/base:bookworm-0123456789ab"


def test_same_input_same_tag() -> None:
    assert render_image(BASE) == render_image(BASE)
    assert render_image(BASE, "cpu") == render_image(BASE, None)


def test_tag_follows_the_dockerfile() -> None:
    one = render_image(BASE)
    other_base = render_image("wheelfactory/base:trixie-0123456789ab")
    other_label = render_image(BASE, labels={"org.example.note": "x"})
    assert len({one.tag, other_base.tag, other_label.tag}) == 3
    for rendered in (one, other_base, other_label):
        repository, digest = rendered.tag.split(":")
        assert repository == BUILD_REPOSITORY
        # The tag abbreviates the sha256 of the Dockerfile (recomputed here, not read back).
        assert re.fullmatch(r"[0-9a-f]{64}", rendered.content)
        assert rendered.content == hashlib.sha256(rendered.dockerfile.encode() + b"\0").hexdigest()
        assert digest == rendered.content[:12]


def test_dockerfile_names_the_base_and_needs_no_network() -> None:
    rendered = render_image(BASE)
    assert f"FROM {BASE}\n" in rendered.dockerfile
    assert f'wheelfactory.base="{BASE}"' in rendered.dockerfile
    assert "{{" not in rendered.dockerfile
    assert rendered.network == "none"
    assert rendered.template == "build-cpu.Dockerfile"


def test_toolkit_layers_choose_their_template() -> None:
    assert template_for(None) == "build-cpu.Dockerfile"
    assert template_for("cuda13.0") == "build-cuda.Dockerfile"
    assert template_for("rocm6.2") == "build-rocm.Dockerfile"
    with pytest.raises(ConfigError, match="unknown toolkit layer 'cuda'"):
        template_for("cuda")


def test_a_missing_toolkit_template_says_so() -> None:
    with pytest.raises(ConfigError, match="no build-rocm.Dockerfile template"):
        render_image(BASE, "rocm6.2")


def test_the_debian_cuda_layer_names_its_suite_mirror_and_version() -> None:
    rendered = render_image(BASE, "cuda12.4", values={"debian_mirror": "http://m.test/debian",
                                                      "debian_suite": "trixie"})
    assert rendered.network == "host"  # apt
    assert "'http://m.test/debian' 'trixie'" in rendered.dockerfile and 'grep -q "release 12.4"' in rendered.dockerfile
    with pytest.raises(ConfigError, match="no value for debian_mirror, debian_suite"):
        render_image(BASE, "cuda12.4")


def test_template_placeholders_must_all_be_filled(tmp_path: Path) -> None:
    (tmp_path / "build-cpu.Dockerfile").write_text("FROM {{base}}\nRUN echo {{ something_else }}\n")
    with pytest.raises(ConfigError, match="something_else"):
        render_image(BASE, templates=tmp_path)


def test_network_directive(tmp_path: Path) -> None:
    (tmp_path / "build-cpu.Dockerfile").write_text("# wheelfactory-network: host\nFROM {{base}}\n")
    assert render_image(BASE, templates=tmp_path).network == "host"
    (tmp_path / "build-cpu.Dockerfile").write_text("# wheelfactory-network: bridge\nFROM {{base}}\n")
    with pytest.raises(ConfigError, match="none or host"):
        render_image(BASE, templates=tmp_path)
    assert load_template("build-cpu.Dockerfile").network == "none"


def test_labels_are_quoted() -> None:
    block = label_block({"b": 'say "hi"', "a": "x y"})
    assert block == 'LABEL a="x y" \\\n      b="say \\"hi\\""'


@pytest.mark.docker
@pytest.mark.slow
def test_ensure_image_builds_once_then_reuses(docker_client: docker.DockerClient, bookworm_base: BaseImage,
                                              tmp_path: Path) -> None:
    # A label unique to this run makes a tag no earlier run built, so the first call must build.
    rendered = render_image(bookworm_base.tag, labels={"wheelfactory.test-run": uuid.uuid4().hex})
    log = tmp_path / "build.log"
    try:
        first = ensure_image(docker_client, rendered, log=log)
        second = ensure_image(docker_client, rendered, log=log)
        assert first.built and not second.built
        assert first.id == second.id and first.tag == second.tag == rendered.tag
        image = docker_client.images.get(rendered.tag)
        assert image.labels[CONTENT_LABEL] == rendered.content
        assert image.labels["wheelfactory.base"] == bookworm_base.tag
        assert log.read_text().count("$ docker build") == 1  # the second call ran no build
    finally:
        docker_client.images.remove(rendered.tag)


@pytest.mark.docker
def test_a_missing_base_fails_with_one_clear_line(docker_client: docker.DockerClient, tmp_path: Path) -> None:
    from wheelfactory.errors import ImageBuildFailed

    rendered = render_image(f"wheelfactory/base:absent-{uuid.uuid4().hex[:12]}")
    with pytest.raises(ImageBuildFailed, match="wheelfactory base-image") as caught:
        ensure_image(docker_client, rendered, log=tmp_path / "build.log")
    assert "\n" not in str(caught.value)
    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.images.get(rendered.tag)


@pytest.mark.docker
def test_the_base_is_pinned_by_id_and_a_missing_one_names_the_way_out(
        docker_client: docker.DockerClient, bookworm_base: BaseImage, tmp_path: Path) -> None:
    from wheelfactory.errors import ImageBuildFailed
    from wheelfactory.images.dockerfiles import resolve_base

    assert resolve_base(docker_client, bookworm_base.tag, log=tmp_path / "log") == bookworm_base.id
    missing = f"localhost:1/wheelfactory/absent:{uuid.uuid4().hex[:12]}"  # a registry that cannot answer
    with pytest.raises(ImageBuildFailed, match='debian_base = "bookworm"') as caught:
        resolve_base(docker_client, missing, log=tmp_path / "log")
    assert "\n" not in str(caught.value) and missing in str(caught.value)
