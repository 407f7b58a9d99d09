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
    assert "compile" in text.splitlines()[2] and "20.0" in text and "compile 20.0 s of 30.0 s" in text
