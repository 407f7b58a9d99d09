"""A warning raised while a variant builds (``verify.checks.warn``, in its BuildResult: e.g. a bring-your-own CUDA wheel with
no device code) does not fail it and reaches everything a user reads: build.log, the manifest
entry's ``warnings``, the build summary and the report."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console
from tests import testkit
from tests.testkit import REPO
from wheelfactory.cli.render import print_build_summary
from wheelfactory.engines import BuildInputs, BuildResult, EngineIdentity
from wheelfactory.errors import Findings
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.expand import expand
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.matrix import parse_matrix
from wheelfactory.plan.tomlsource import TomlDocument
from wheelfactory.project.stage import Stage
from wheelfactory.publish.report import build_report
from wheelfactory.publish.report_html import render_html
from wheelfactory.runner import manifest
from wheelfactory.runner.run import run_matrix
from wheelfactory.support.timeline import Timeline
from wheelfactory.verify.checks import warn

WARNING = "no library in this CUDA wheel holds device code (...): it runs on the CPU only"
INPUTS = BuildInputs("fake", "cp311-cp311", "sha256:" + "ab" * 32, "fake:tag",
                     (("torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl", "cd" * 32),))


def cuda_variant() -> Variant:
    table = load_table()
    text = '[matrix]\ntorch = ["2.14"]\nbackends = ["cu130"]\npython = ["3.11"]\n'
    (variant,) = expand(parse_matrix(TomlDocument.from_text(text, "m.toml"), table, base_dir=REPO), table).variants
    return variant


class FakeStage(testkit.FakeStage):
    def __init__(self, variant: Variant) -> None:
        super().__init__(variant)
        self.package = "multi_ext"


class WarningEngine:
    name = "fake"

    def identity(self, stage: Stage) -> EngineIdentity:
        return EngineIdentity("fake")

    def reclaim(self) -> list[str]:
        return []

    def build(self, stage: Stage, workdir: Path, log: Path, timeline: Timeline) -> BuildResult:
        warn(log, WARNING)
        workdir.mkdir(parents=True, exist_ok=True)
        wheel = workdir / "multi_ext-0.2.0+cu130torch2.14-cp311-cp311-manylinux_2_34_x86_64.whl"
        wheel.write_bytes(b"wheel")
        return BuildResult(wheel, INPUTS, Findings(warnings=(WARNING,)))


def test_a_warning_reaches_the_log_manifest_summary_and_report(tmp_path: Path) -> None:
    variant = cuda_variant()
    (outcome,) = run_matrix(FakeStage, [variant], WarningEngine(), tmp_path)  # type: ignore[arg-type]
    assert outcome.entry.status == "built" and outcome.entry.warnings == [WARNING]
    assert f"# WARNING: {WARNING}" in (tmp_path / str(outcome.entry.log)).read_text()
    assert manifest.read(tmp_path)[variant.id].warnings == [WARNING]

    (cached,) = run_matrix(FakeStage, [variant], WarningEngine(), tmp_path)  # type: ignore[arg-type]
    assert cached.entry.status == "cached" and cached.entry.warnings == [WARNING]  # kept with the wheel

    sink = io.StringIO()
    print_build_summary(Console(file=sink, width=400), [outcome], "dist")
    assert f"{variant.id} warning: {WARNING}" in sink.getvalue()

    report = build_report(manifest.read(tmp_path))
    (cell,) = report.cells
    assert cell.status == "cached" and cell.detail == f"warning: {WARNING}" and f"WARNING: {WARNING}" in cell.reason
    assert f"passed; warning: {WARNING}" in render_html(report)


def test_no_warning_no_field(tmp_path: Path) -> None:
    class QuietEngine(WarningEngine):
        def build(self, stage: Stage, workdir: Path, log: Path, timeline: Timeline) -> BuildResult:
            workdir.mkdir(parents=True, exist_ok=True)
            (workdir / "w.whl").write_bytes(b"wheel")
            return BuildResult(workdir / "w.whl", INPUTS)

    (outcome,) = run_matrix(FakeStage, [cuda_variant()], QuietEngine(), tmp_path)  # type: ignore[arg-type]
    assert outcome.entry.warnings is None
    report = build_report(manifest.read(tmp_path))
    assert report.cells[0].detail == "" and "WARNING" not in report.cells[0].reason
