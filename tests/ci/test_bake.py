"""factory/wheelfactory/ci/bake.py: the buildx bake file (pure: no Docker, no buildx; its shape is checked here
against a schema of the bake-file subset we write)."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from tests.testkit import REPO, run_cli
from wheelfactory.ci.bake import PLATFORMS, VARIANTS_LABEL, BakePlan, plan_bake, write_bake
from wheelfactory.engines import docker_run
from wheelfactory.engines.wheelhouse import Wheelhouse
from wheelfactory.errors import ConfigError, WriteFailed
from wheelfactory.images.base_image import BaseImageSpec, parse_suite, render_base
from wheelfactory.images.dockerfiles import BASE_ID_LABEL, CONTENT_LABEL, ImageRef, RenderedImage
from wheelfactory.images.spec import ImageSpec, image_spec
from wheelfactory.plan import indexes
from wheelfactory.plan.compat import CompatTable
from wheelfactory.plan.expand import expand
from wheelfactory.plan.identity import ARCHES, Variant
from wheelfactory.plan.matrix import Matrix, load_matrix

TAG = re.compile(r"^wheelfactory/build:([0-9a-f]{12})$")

# The part of the buildx bake file reference (https://docs.docker.com/build/bake/reference/) we use.
SCHEMA = {
    "type": "object",
    "required": ["group", "target"],
    "additionalProperties": False,
    "properties": {
        "group": {
            "type": "object",
            "required": ["default"],
            "additionalProperties": False,
            "properties": {"default": {
                "type": "object", "required": ["targets"], "additionalProperties": False,
                "properties": {"targets": {"type": "array", "uniqueItems": True,
                                           "items": {"type": "string"}}},
            }},
        },
        "target": {
            "type": "object",
            "propertyNames": {"pattern": "^[a-zA-Z0-9_-]+$"},  # what bake accepts as a target name
            "additionalProperties": {
                "type": "object",
                "required": ["context", "dockerfile-inline", "tags", "platforms", "labels", "network"],
                "additionalProperties": False,
                "properties": {
                    "context": {"type": "string", "minLength": 1},
                    "dockerfile-inline": {"type": "string", "pattern": "^# wheelfactory-network: "},
                    "tags": {"type": "array", "minItems": 1, "items": {"type": "string"}},
                    "platforms": {"type": "array", "minItems": 1, "uniqueItems": True,
                                  "items": {"enum": ["linux/amd64", "linux/arm64"]}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"},
                               "required": [CONTENT_LABEL, VARIANTS_LABEL]},
                    "network": {"enum": ["default", "host", "none"]},
                },
            },
        },
    },
}


# The mirror the host's apt sources would give (the CLI reads them): any URL does, nothing is fetched.
HOST_MIRROR = "http://127.0.0.1:3142/debian"


@pytest.fixture(autouse=True)
def host_apt_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    """`wheelfactory bake` reads the host's apt sources for the mirror: here they name HOST_MIRROR."""
    sources = f"Types: deb\nURIs: {HOST_MIRROR}/\nSuites: bookworm\nComponents: main\n"
    monkeypatch.setattr(indexes, "read_apt_sources", lambda root=None: [("debian.sources", sources)])


def debian_tag(suite: str, arch: str = "x86_64", mirror: str = HOST_MIRROR) -> str:
    return render_base(BaseImageSpec(parse_suite(suite), mirror, arch=arch)).tag


def expected_images(matrix: Matrix, variants: Sequence[Variant]) -> dict[tuple[str, str | None], set[str]]:
    """(FROM image, CUDA toolkit layer version) -> variant ids, worked out from the matrix and the
    variants without wheelfactory.images.spec: the distinct images the engine would build."""
    build = matrix.build
    mirror = (build.debian_mirror or HOST_MIRROR).rstrip("/")
    out: dict[tuple[str, str | None], set[str]] = {}
    for v in variants:
        if build.debian_base and v.key.backend.kind == "cuda" and not v.toolkit_wheels and v.toolkit_debian:
            key: tuple[str, str | None] = (debian_tag(v.toolkit_debian, mirror=mirror), v.toolkit)
        elif build.debian_base:
            key = (debian_tag(build.debian_base, mirror=mirror), None)
        else:
            key = (dict(build.base_images)[v.key.arch], None)
        out.setdefault(key, set()).add(v.id)
    return out


def from_line(dockerfile: str) -> str:
    (line,) = [line for line in dockerfile.splitlines() if line.startswith("FROM ")]
    return line.split()[1]


def check_bake_file(text: str, matrix: Matrix, variants: Sequence[Variant]) -> dict[str, Any]:
    """Everything the acceptance asks of a bake file; returns its targets."""
    data = json.loads(text)
    jsonschema.validate(data, SCHEMA)
    targets: dict[str, Any] = data["target"]
    assert data["group"]["default"]["targets"] == sorted(targets)
    # One target per distinct image, covering each variant exactly once, on its arch's platform.
    expected = expected_images(matrix, variants)
    assert len(targets) == len(expected)
    users = Counter(vid for t in targets.values() for vid in t["labels"][VARIANTS_LABEL].split(","))
    assert users == Counter(v.id for v in variants)
    by_id = {v.id: v for v in variants}
    seen = set()
    for target in targets.values():
        dockerfile = target["dockerfile-inline"]
        ids = set(target["labels"][VARIANTS_LABEL].split(","))
        version = re.search(r'wheelfactory.toolkit-version="([^"]+)"', dockerfile)
        key = (from_line(dockerfile), version.group(1) if version else None)
        assert expected[key] == ids, key
        seen.add(key)
        assert target["platforms"] == sorted({PLATFORMS[by_id[i].key.arch] for i in ids})
        # The tag is the content hash of the target's own Dockerfile (images.content_digest).
        (tag,) = target["tags"]
        content = hashlib.sha256(dockerfile.encode() + b"\0").hexdigest()
        match = TAG.match(tag)
        assert match and match.group(1) == content[:12]
        assert target["labels"][CONTENT_LABEL] == content
        assert target["network"] == ("host" if "# wheelfactory-network: host" in dockerfile else "none")
        assert "{{" not in dockerfile and BASE_ID_LABEL not in dockerfile
    assert seen == set(expected)
    assert len({t["tags"][0] for t in targets.values()}) == len(targets)
    return targets


@pytest.fixture(scope="module")
def repo_matrix(table: CompatTable) -> Matrix:
    return load_matrix(REPO / "matrix.toml", table, display="matrix.toml")


def baked(matrix: Matrix, table: CompatTable) -> tuple[BakePlan, tuple[Variant, ...]]:
    variants = expand(matrix, table).variants
    return plan_bake(matrix, variants, matrix_file="matrix.toml", host_mirror=HOST_MIRROR), variants


def test_every_arch_has_a_platform() -> None:
    assert set(PLATFORMS) == set(ARCHES)


def test_release_matrix_one_target_per_image(repo_matrix: Matrix, table: CompatTable) -> None:
    plan, variants = baked(repo_matrix, table)
    assert len(variants) == 38
    targets = check_bake_file(plan.dumps(), repo_matrix, variants)
    # Offline bases: bookworm for every variant but CUDA 12.4, which is trixie plus its toolkit.
    froms = sorted(from_line(t["dockerfile-inline"]) for t in targets.values())
    assert froms == [debian_tag("bookworm"), debian_tag("trixie")]
    notes = " | ".join(plan.notes("bake.json"))
    assert "wheelfactory base-image --suite bookworm" in notes and "--suite trixie" in notes
    assert "--allow network.host -f bake.json" in notes


def test_same_input_same_bytes(repo_matrix: Matrix, table: CompatTable) -> None:
    first, _ = baked(repo_matrix, table)
    again, _ = baked(load_matrix(REPO / "matrix.toml", table), table)
    assert first.dumps() == again.dumps()
    assert first.dumps() == json.dumps(json.loads(first.dumps()), indent=2, sort_keys=True) + "\n"


@pytest.mark.parametrize("text", [
    # manylinux bases per arch: one image per arch, CUDA 12 on the arch's base (no Debian layer).
    '[matrix]\ntorch = ["2.6", "2.9"]\nbackends = ["cpu", "cuda"]\narch = ["x86_64", "aarch64"]\n',
    # one base for both archs: one image, built for two platforms.
    ('[matrix]\ntorch = ["2.9"]\nbackends = ["cpu", "cuda"]\narch = ["x86_64", "aarch64"]\n'
     '[build]\nbase_image = "registry.example/builder:1"\n'),
    # an offline base from another mirror: the toolkit layer uses it too.
    ('[matrix]\ntorch = ["2.6"]\nbackends = ["cpu", "cuda"]\n'
     '[build]\ndebian_base = "bullseye"\ndebian_mirror = "http://mirror.example/debian/"\n'),
    # CPU only.
    '[matrix]\ntorch = ["2.7"]\nbackends = ["cpu"]\n',
])
def test_small_matrices(text: str, parse: Callable[[str], Matrix], table: CompatTable) -> None:
    matrix = parse(text)
    plan, variants = baked(matrix, table)
    check_bake_file(plan.dumps(), matrix, variants)


def test_pulled_bases_need_no_note(parse: Callable[[str], Matrix], table: CompatTable) -> None:
    matrix = parse('[matrix]\ntorch = ["2.9"]\nbackends = ["cpu", "cuda"]\narch = ["x86_64", "aarch64"]\n')
    plan, _ = baked(matrix, table)
    assert {t.name.split("-")[0] for t in plan.targets} == {"x86_64", "aarch64"}
    assert plan.notes("f") == []


def test_one_base_for_two_archs_is_one_multi_platform_target(parse: Callable[[str], Matrix],
                                                             table: CompatTable) -> None:
    matrix = parse('[matrix]\ntorch = ["2.9"]\narch = ["x86_64", "aarch64"]\n[build]\nbase_image = "b/u:1"\n')
    plan, _ = baked(matrix, table)
    (target,) = plan.targets
    assert target.platforms == ("linux/amd64", "linux/arm64")
    assert target.name.startswith("aarch64-x86_64-cpu-")


def test_mirror_reaches_the_layer_and_the_note(parse: Callable[[str], Matrix], table: CompatTable) -> None:
    matrix = parse('[matrix]\ntorch = ["2.6"]\nbackends = ["cuda"]\n'
                   '[build]\ndebian_base = "bookworm"\ndebian_mirror = "http://mirror.example/debian/"\n')
    plan, _ = baked(matrix, table)
    layered = [t for t in plan.targets if "cuda12-4" in t.name]
    assert len(layered) == 1 and "'http://mirror.example/debian' 'trixie'" in layered[0].image.dockerfile
    assert from_line(layered[0].image.dockerfile) == debian_tag("trixie", mirror="http://mirror.example/debian")
    assert "--suite trixie --mirror http://mirror.example/debian --arch x86_64`" in " ".join(plan.notes("f"))


def test_debian_base_is_one_arch(parse: Callable[[str], Matrix], table: CompatTable) -> None:
    matrix = parse('[matrix]\ntorch = ["2.9"]\narch = ["x86_64", "aarch64"]\n'
                   '[build]\ndebian_base = "bookworm"\n')
    variants = expand(matrix, table).variants
    with pytest.raises(ConfigError, match="build.debian_base: debian_base makes one base image"):
        plan_bake(matrix, variants, matrix_file="matrix.toml", host_mirror=HOST_MIRROR)
    x86 = tuple(v for v in variants if v.key.arch == "x86_64")
    baked_x86 = plan_bake(matrix, x86, matrix_file="matrix.toml", host_mirror=HOST_MIRROR)
    check_bake_file(baked_x86.dumps(), matrix, x86)
    with pytest.raises(ConfigError, match="build.debian_mirror: debian_base needs a Debian mirror"):
        plan_bake(matrix, x86, matrix_file="matrix.toml")  # no [build] debian_mirror and none from the host


def test_image_spec_is_the_engines_choice(repo_matrix: Matrix, table: CompatTable) -> None:
    variants = {v.id: v for v in expand(repo_matrix, table).variants}
    bases = {"x86_64": "base:x"}

    def debian(suite: str, arch: str) -> str:  # (suite, arch) -> the base's tag
        return {("trixie", "x86_64"): "base:trixie"}[(suite, arch)]

    for plain in ("torch29-cxx11-cpu-x86_64-linux", "torch214-cxx11-cu130-x86_64-linux"):
        assert image_spec(variants[plain], bases, debian_base=debian) == ImageSpec("base:x")
    cu124 = variants["torch26-cxx98-cu124-x86_64-linux"]
    assert image_spec(cu124, bases, debian_base=debian, debian_mirror="http://m/debian") == ImageSpec(
        "base:trixie", "cuda12.4", (("debian_mirror", "http://m/debian"), ("debian_suite", "trixie")))
    assert image_spec(cu124, bases) == ImageSpec("base:x")  # no debian_base: the arch's base (it needs nvcc)


def test_engine_and_bake_render_the_same_spec(repo_matrix: Matrix, table: CompatTable, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The Docker engine's image_for builds what bake names, plus the base's id as a label (so its tag differs)."""
    made: dict[str, RenderedImage] = {}
    monkeypatch.setattr(docker_run, "resolve_base", lambda client, name, log: f"sha256:id-of-{name}")

    def ensure(client: object, rendered: RenderedImage, log: Path, arch: str | None = None) -> ImageRef:
        made[rendered.tag] = rendered
        return ImageRef(rendered.tag, "sha256:" + rendered.content, built=True)

    monkeypatch.setattr(docker_run, "ensure_image", ensure)
    engine = docker_run.DockerRun(None, Wheelhouse(tmp_path / "wh"), docker_run.DockerOptions(  # type: ignore[arg-type]
        base_images={"x86_64": debian_tag("bookworm")}, image_log=tmp_path / "images.log", debian_base=debian_tag,
        debian_mirror=HOST_MIRROR), docker_run.RunCaches())
    plan, variants = baked(repo_matrix, table)
    for target in plan.targets:
        for vid in target.variants:
            image = docker_run.image_for(engine, next(v for v in variants if v.id == vid))
            ours = made[image.tag]
            assert ours.tag != target.image.tag
            assert from_line(ours.dockerfile) == target.base == from_line(target.image.dockerfile)
            base_id = {BASE_ID_LABEL: f"sha256:id-of-{target.base}"}
            assert dict(ours.labels) == {**dict(target.image.labels), **base_id}
    assert len(made) == len(plan.targets)


# The command line, in-process: main() prints one line per known error and exits with its code.

def test_cli_prints_to_stdout_by_default(capsys: pytest.CaptureFixture[str], repo_matrix: Matrix,
                                         table: CompatTable) -> None:
    assert run_cli("bake", "-m", str(REPO / "matrix.toml")) == 0
    out, err = capsys.readouterr()
    check_bake_file(out, repo_matrix, expand(repo_matrix, table).variants)
    assert "note: " in err and "--allow network.host -f FILE" in err
    assert run_cli("bake", "-m", str(REPO / "matrix.toml"), "--file", "-") == 0
    assert capsys.readouterr().out == out


def test_cli_writes_the_file_the_same_each_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "docker-bake.json"
    path.write_text("old")
    assert run_cli("bake", "-m", str(REPO / "matrix.toml"), "--file", str(path)) == 0
    first = path.read_bytes()
    assert run_cli("bake", "-m", str(REPO / "matrix.toml"), "--file", str(path)) == 0
    assert path.read_bytes() == first and capsys.readouterr().out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docker-bake.json"]  # no temp file left


def test_cli_only_and_shard_narrow_the_targets(tmp_path: Path, repo_matrix: Matrix,
                                               table: CompatTable) -> None:
    path = tmp_path / "bake.json"
    assert run_cli("bake", "-m", str(REPO / "matrix.toml"), "--file", str(path), "--only", "torch214*") == 0
    variants = tuple(v for v in expand(repo_matrix, table).variants if v.id.startswith("torch214"))
    (target,) = check_bake_file(path.read_text(), repo_matrix, variants).values()
    assert target["labels"][VARIANTS_LABEL] == ("torch214-cxx11-cpu-x86_64-linux,"
                                                "torch214-cxx11-cu130-x86_64-linux")
    assert run_cli("bake", "-m", str(REPO / "matrix.toml"), "--file", str(path), "--only", "*cu124*") == 0
    assert [name.split("-")[1] for name in json.loads(path.read_text())["target"]] == ["cuda12"]
    assert run_cli("bake", "-m", str(REPO / "matrix.toml"), "--file", str(path), "--shard", "2/38") == 0
    assert len(json.loads(path.read_text())["target"]) == 1


def test_cli_bad_file_is_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no" / "such" / "bake.json"
    assert run_cli("bake", "-m", str(REPO / "matrix.toml"), "--file", str(missing)) == 2
    err = capsys.readouterr().err
    assert err == f"wheelfactory: error: cannot write the bake file {missing}: directory {missing.parent} " \
                  "does not exist\n"
    assert run_cli("bake", "-m", str(REPO / "matrix.toml"), "--file", str(tmp_path)) == 2
    assert "it is a directory" in capsys.readouterr().err
    assert run_cli("bake", "-m", str(REPO / "matrix.toml"), "--only", "torch99*") == 2
    assert "--only 'torch99*' matches no variant" in capsys.readouterr().err


def test_write_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "bake.json"
    path.write_text("before")

    def fail(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)  # the rename fails: the old file stays whole
    with pytest.raises(WriteFailed, match="No space left on device"):
        write_bake("after", path)
    assert path.read_text() == "before" and sorted(p.name for p in tmp_path.iterdir()) == ["bake.json"]
