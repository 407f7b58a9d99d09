"""The build summary: each variant's seconds and compile seconds, and the compile's share."""

from __future__ import annotations

import io

from rich.console import Console
from wheelfactory.cli.render import compile_share, print_build_summary
from wheelfactory.runner.manifest import Entry
from wheelfactory.runner.run import Outcome


def outcome(plan_of: object, status: str, seconds: float, phases: dict[str, float] | None) -> Outcome:
    (variant,) = plan_of('[matrix]\ntorch = "2.13"\ncxx11_abi = true\n').variants  # type: ignore[operator]
    entry = Entry(status=status, wheel="w.whl" if status != "failed" else None, sha256=None, seconds=seconds,  # type: ignore[arg-type]
                  key="k", log=None, phases=phases)
    return Outcome(variant, entry)


def test_the_compile_share_counts_what_was_built_in_this_run(plan_of: object) -> None:
    built = outcome(plan_of, "built", 30.0, {"environment": 2.0, "compile": 20.0, "smoke": 3.0})
    cached = outcome(plan_of, "cached", 0.1, None)
    failed = outcome(plan_of, "failed", 10.0, {"compile": 4.0})
    assert compile_share([built, cached, failed]).startswith("compile 24.0 s of 40.0 s over 2 variant(s) (60% of the time")
    assert compile_share([cached]) == ""
    sink = io.StringIO()
    print_build_summary(Console(file=sink, width=200), [built, cached], "dist")
    text = sink.getvalue()
    assert "phases (s)" in text.splitlines()[2] and "compile 20.0 s of 30.0 s" in text
    assert "environment 2, compile 20, smoke 3" in text  # each phase of a second or more, in the order it ran


def test_plain_progress_lines_carry_the_seconds_since_the_run_started() -> None:
    """Without a terminal (a CI log) each step is a line with its time; -q prints none of them."""
    import re

    from wheelfactory.cli.render import BuildView
    from wheelfactory.support.progress import VariantPhase

    for quiet in (False, True):
        sink = io.StringIO()
        with BuildView(Console(file=sink, width=200), ["torch213-cxx11-cpu-x86_64-linux"], "title", quiet=quiet) as view:
            for phase in ("building", "compile", "smoke", "built"):
                view.show(VariantPhase("torch213-cxx11-cpu-x86_64-linux", phase))
        lines = sink.getvalue().splitlines()
        if quiet:
            assert lines == []
            continue
        assert lines[0] == "title"
        assert len(lines) == 5 and all(re.fullmatch(r"\[ *\d+\.\ds\] torch213-cxx11-cpu-x86_64-linux: \w+", line)
                                       for line in lines[1:]), lines


def test_the_live_tables_elapsed_column_counts_every_phase_and_stops_at_the_end() -> None:
    """It looked for phase names the build never reports, and stayed empty."""
    from wheelfactory.cli.render import BuildView
    from wheelfactory.support.progress import VariantPhase

    view = BuildView(Console(file=io.StringIO(), width=200), ["a", "b"])
    view.show(VariantPhase("a", "building"))
    view.show(VariantPhase("a", "compile"))
    view.show(VariantPhase("b", "building"))
    view.show(VariantPhase("b", "built"))
    sink = io.StringIO()
    Console(file=sink, width=200).print(view._table())
    rows = {line.split("│")[1].strip(): line.split("│")[3].strip() for line in sink.getvalue().splitlines()
            if line.startswith("│")}
    assert rows["a"].endswith(" s") and rows["b"].endswith(" s"), rows
