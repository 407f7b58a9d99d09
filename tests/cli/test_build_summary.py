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


def test_the_compile_shows_its_units_done_and_all_where_ninja_counts_them(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """ninja prints `[N/M]` before each command; the build's plain output says `compile N/M units`
    (at the last unit, and at most every UNITS_EVERY_S before it), -v streams the log's lines."""
    from wheelfactory.cli.render import BuildView
    from wheelfactory.support.progress import VariantPhase

    log = tmp_path / "v" / "build.log"
    log.parent.mkdir()
    for verbose in (False, True):
        sink = io.StringIO()
        view = BuildView(Console(file=sink, width=200), ["v"], verbose=verbose, out_dir=tmp_path)
        view.show(VariantPhase("v", "building"))
        view.show(VariantPhase("v", "compile"))
        log.write_text("$ python -m build\n[1/3] c++ -c a.cpp\n[2/3] c++ -c b.cpp\n[3/3] c++ -shared -o _C.so\n")
        assert view.follower is not None
        view.follower.read_all()
        said = sink.getvalue()
        if verbose:
            assert "v | [2/3] c++ -c b.cpp" in said and "units" not in said, said
        else:
            assert "v: compile 1/3 units" in said and "v: compile 3/3 units" in said, said
            assert "v: compile 2/3 units" not in said  # within the same 10 s as the first
            assert view.rows["v"].detail == "3/3 units"
