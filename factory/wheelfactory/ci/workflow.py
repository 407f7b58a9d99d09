"""What every job of the generated GitHub workflow is written with (ci/github.py, and the publish
job of ci/github_publish.py): the actions it pins, the folders its jobs share and how it names a
path of the repository, the steps they have in common, ``${{ }}`` expressions over the build
matrix, and the YAML it is written in. Pure."""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

import yaml

from wheelfactory.errors import UsageError
from wheelfactory.plan.identity import Variant

DIST = "dist"  # the build output in every job: `-o dist`
PARTS = "parts"  # where the index job downloads the build artifacts, one directory each
SITE = "site"  # the index job's copy of dist/index, symlinks resolved, for upload-artifact
ARTIFACT_PREFIX = "wheels-"
RUNNERS = {"x86_64": "ubuntu-latest", "aarch64": "ubuntu-24.04-arm"}  # Docker is on both
PLAN_RUNNER = RUNNERS["x86_64"]
# Pinned to major versions: the runner resolves each to its newest release.
CHECKOUT = "actions/checkout@v4"
SETUP_PYTHON = "actions/setup-python@v5"
UPLOAD = "actions/upload-artifact@v4"
DOWNLOAD = "actions/download-artifact@v4"
# Sigstore-signed SLSA build provenance from the workflow's own OIDC identity (no key to keep);
# verified with `gh attestation verify WHEEL --repo OWNER/REPO`.
ATTEST = "actions/attest-build-provenance@v4"

T = TypeVar("T", int, str)


def repo_path(path: Path, option: str, *, cwd: Path | None = None) -> str:
    """``path`` as the workflow names it: relative to the repository root, which is where this
    command runs (the jobs run there too). An absolute path is made relative to the working
    directory; one outside it, or one that climbs out with ``..``, cannot be named in a workflow."""
    here = (cwd or Path.cwd()).resolve()
    if path.is_absolute():
        try:
            path = path.resolve().relative_to(here)
        except ValueError:
            raise UsageError(
                f"{option} {path}: not under the working directory {here}; run `wheelfactory ci "
                f"github` from the repository root, with paths inside it"
            ) from None
    text = PurePosixPath(os.path.normpath(path.as_posix())).as_posix()
    if text == ".." or text.startswith("../"):
        raise UsageError(
            f"{option} {path}: outside the repository root (the working directory); the jobs "
            f"run at the root of the checkout"
        )
    return text


def setup_steps(python: str, install: str) -> list[dict[str, Any]]:
    """Check out, set up ``python`` and pip-install wheelfactory as ``install`` names it."""
    return [
        {"uses": CHECKOUT},
        {"uses": SETUP_PYTHON, "with": {"python-version": python}},
        {"name": "Install wheelfactory", "run": f"python -m pip install {shlex.quote(install)}"},
    ]


def merge_builds() -> list[dict[str, Any]]:
    """Every build job's artifact downloaded into its own directory, then merged into one dist/."""
    return [
        {
            "name": "Download the builds",
            "uses": DOWNLOAD,
            "with": {"pattern": ARTIFACT_PREFIX + "*", "path": PARTS},
        },
        {"name": "Merge them into one dist", "run": f"wheelfactory merge {PARTS}/* -o {DIST}"},
    ]


def wf(*args: str) -> str:
    return shlex.join(["wheelfactory", *args])


def script(lines: Sequence[str]) -> str:
    return "\n".join(lines) + "\n"


def compact_json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def by_variant(
    variants: Sequence[Variant],
    value: Callable[[Variant], T],
    field: str,
    key: Callable[[Variant], str],
) -> T | str:
    """A job setting that depends on the variant: the value itself when every variant has the same,
    else an expression over ``matrix.<field>``: a branch per value of the field whose setting is not
    the last one's, then the last one's as the default."""
    values: dict[str, T] = {}
    for variant in variants:
        values.setdefault(key(variant), value(variant))
    ordered = sorted(values.items())
    default = ordered[-1][1]
    if all(v == default for _, v in ordered):
        return default
    branches: list[str] = [
        f"matrix.{field} == {literal(k)} && {literal(v)}" for k, v in ordered if v != default
    ]
    return "${{ " + " || ".join([*branches, literal(default)]) + " }}"


def condition(
    variants: Sequence[Variant], predicate: Callable[[Variant], bool], expression: str
) -> bool | str:
    """True or False when ``predicate`` holds for all or none of the variants, else a step ``if``."""
    held = {predicate(v) for v in variants}
    return held.pop() if len(held) == 1 else f"${{{{ {expression} }}}}"


def literal(value: object) -> str:
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


# YAML: block style with literal `|` scripts; a matrix entry is one flow mapping per line (a diff
# shows one line per variant added or dropped); the key `on` unquoted, as GitHub's docs write it.


def dump(document: Mapping[str, Any]) -> str:
    return yaml.dump(
        document,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        width=1 << 20,
        allow_unicode=False,
    )


class Flow(dict[str, object]):
    """A mapping written on one line."""


class FlowList(list[int]):
    """A list written on one line."""


class _Dumper(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # list items indented under their key, as GitHub's docs do
        super().increase_indent(flow, False)


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


def _represent_flow(dumper: yaml.SafeDumper, data: Mapping[str, object]) -> yaml.Node:
    return dumper.represent_mapping("tag:yaml.org,2002:map", data, flow_style=True)


def _represent_flow_list(dumper: yaml.SafeDumper, data: Sequence[int]) -> yaml.Node:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=True)


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(Flow, _represent_flow)
_Dumper.add_representer(FlowList, _represent_flow_list)
# YAML 1.1 reads a bare `on` as true, so PyYAML quotes the string; GitHub reads YAML 1.2 (`on` is
# a string), and `on:` is how workflows are written. Only the key `on` is affected here.
_BOOL = "tag:yaml.org,2002:bool"
_Dumper.yaml_implicit_resolvers = {
    first: list(resolvers) for first, resolvers in yaml.SafeDumper.yaml_implicit_resolvers.items()
}
for _first in "oO":
    _Dumper.yaml_implicit_resolvers[_first] = [
        (tag, re.compile(r"^(?:off|Off|OFF)$") if tag == _BOOL else regexp)
        for tag, regexp in _Dumper.yaml_implicit_resolvers.get(_first, [])
    ]
