"""What a command that takes a dist's wheels (``index``, ``export``, ``publish``, ``merge``) leaves
out, and why: one record for every such variant (``LeftOut``), the pure-Python entries told apart
(``is_pure_python``), and the one check of a built entry's wheel against what the entry says
(``wheel_refusal``: verify/wheel_identity.py, then the provenance record of its bytes).

It lives below publish/ and ci/, which may not import each other (the layers in pyproject.toml).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from wheelfactory.plan.identity import VariantId
from wheelfactory.runner import manifest
from wheelfactory.runner.provenance import InvalidProvenance, provenance_path, read_provenance
from wheelfactory.verify.wheel_identity import wheel_identity_problems

UNATTESTED_FLAG = "--allow-unattested"


@dataclass(frozen=True)
class LeftOut:
    """A variant a command did not take: not built or not for this output (``refused`` False),
    or refused: a check failed, and the command fails after writing the rest (PublishError or
    MergeConflict, exit 7). ``part``: the build output it came from (``merge``)."""

    variant_id: str
    reason: str
    refused: bool = False
    part: Path | None = None


def is_pure_python(entry: manifest.Entry) -> bool:
    """A pure-Python (noarch) build: its id is a Hugging Face layout directory (``torch-cpu``),
    not a variant id, and its wheel goes only to ``export --hf-layout``."""
    return entry.hub_metadata is not None


def wheel_refusal(
    wheel: Path,
    vid: str,
    variant: VariantId,
    entry: manifest.Entry,
    *,
    allow_unattested: bool,
    verb: str,
) -> str | None:
    """Why ``wheel`` (the file ``entry`` names, with the entry's sha256) may not be taken under
    ``vid`` (its manifest key, parsed: ``variant``), in one line; None: it may. It must be what
    the entry says it is (file name tags, local label, build record, RECORD) and have a
    provenance record of these bytes for this variant; ``allow_unattested`` takes one without a
    record (an older wheelfactory's build). ``verb``: what the command does with it ("list",
    "merge"), for the hint."""
    shown = entry.wheel
    problems = wheel_identity_problems(wheel, variant, entry.torch_version or None, entry.toolkit)
    if problems:
        return f"{shown} is not a wheel of {vid}: {'; '.join(problems)}"
    record = provenance_path(wheel).name
    try:
        if read_provenance(wheel, entry.sha256 or "", vid) is None and not allow_unattested:
            return (
                f"{shown} has no provenance record ({record}): rebuild it with "
                f"`wheelfactory build`, or pass {UNATTESTED_FLAG} to {verb} it without one"
            )
    except InvalidProvenance as exc:
        return f"{record}: {exc} (rebuild it)"
    return None
