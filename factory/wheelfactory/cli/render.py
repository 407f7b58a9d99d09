"""Presentation: rich tables for people, JSON for machines, and the progress channel's events
(support/progress.py) as lines or a live table. No logic lives here; nothing else imports rich."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from wheelfactory.plan.expand import Plan
from wheelfactory.support.progress import (
    CommandRun,
    Event,
    Notice,
    StepDone,
    StepStarted,
    ToolOutput,
    VariantPhase,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from wheelfactory.engines.choose import NotBuilt
    from wheelfactory.runner.run import Outcome


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """rich exits 1 on a closed pipe; the entry point (cli/main.py) exits as Unix tools do."""
        self.quiet = True
        raise BrokenPipeError


def console(stderr: bool = False) -> Console:
    # Piped output keeps long rows whole instead of wrapping to 80 columns.
    probe = _Console(stderr=stderr)
    return probe if probe.is_terminal else _Console(stderr=stderr, width=220, soft_wrap=True)


def plan_json(plan: Plan) -> str:
    return json.dumps(plan.as_dict(), indent=2)


def github_json(plan: Plan) -> str:
    return json.dumps(plan.github_matrix(), separators=(",", ":"))


def print_plan(out: Console, plan: Plan, *, explain: bool, title: str) -> None:
    table = Table(title=title, title_justify="left", header_style="bold")
    for column in ("variant", "torch", "build", "ABI", "python", "local version", "archs / targets"):
        table.add_column(column, no_wrap=column in ("variant", "local version"))
    for v in plan.variants:
        archs = ";".join(v.arch_list) or "-"
        if v.notes:
            archs += " (" + "; ".join(v.notes) + ")"
        # Cells are escaped: user text such as "[cuda].toolkits" must not be read as rich markup.
        table.add_row(*map(escape, (v.id, v.torch_version, v.backend.build_name,
                                    "cxx11" if v.key.cxx11_abi else "cxx98", v.key.python,
                                    f"+{v.local_version}", archs)))
    out.print(table)
    summary = f"{len(plan.variants)} variant(s), {len(plan.pruned)} pruned combination(s)"
    if plan.pruned and not explain:
        summary += " (--explain shows why)"
    out.print(summary, markup=False)
    if explain and plan.pruned:
        pruned = Table(title="Pruned", title_justify="left", header_style="bold")
        for column in ("torch", "build", "ABI", "python", "arch", "reason"):
            pruned.add_column(column)
        for p in plan.pruned:
            abi = "any" if p.cxx11_abi is None else ("cxx11" if p.cxx11_abi else "cxx98")
            pruned.add_row(*map(escape, (p.torch, p.backend, abi, p.python or "any", p.arch or "any", p.reason)))
        out.print(pruned)


@dataclass
class _Row:
    status: str = "queued"
    detail: str = ""
    started: float | None = None


ACTIVE_PHASES = ("building", "repairing", "verifying")
NOT_BUILT = "not built"


class BuildView:
    """Per-variant status while a matrix runs: a live table on a terminal, one line per event
    otherwise (CI logs), and a summary at the end."""

    def __init__(self, out: Console, variant_ids: list[str], title: str = "",
                 not_built: Mapping[str, str] | None = None) -> None:
        """``not_built``: selected variants no engine here builds (id -> why), shown as such."""
        from rich.live import Live

        self.out = out
        self.title = title  # the run's parallelism and memory (factory/wheelfactory/engines/capacity.py)
        self.rows = {vid: _Row() for vid in variant_ids}
        self.rows.update({vid: _Row(NOT_BUILT, why) for vid, why in (not_built or {}).items()})
        self.live = Live(self._table(), console=out, refresh_per_second=2) if out.is_terminal else None
        if self.live is None and title:
            out.print(title, markup=False)
        if self.live is None and not_built:
            out.print(f"{len(not_built)} selected variant(s) not built here (listed in the summary)", markup=False)

    def __enter__(self) -> BuildView:
        if self.live:
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live:
            self.live.update(self._table())
            self.live.__exit__(None, None, None)

    def _table(self) -> Table:
        table = Table(header_style="bold", title=escape(self.title) or None, title_justify="left")
        for column in ("variant", "status", "elapsed", "detail"):
            table.add_column(column)
        for vid, row in self.rows.items():
            running = row.started is not None and row.status in ACTIVE_PHASES
            elapsed = f"{time.monotonic() - row.started:.0f} s" if running and row.started else ""
            style = {"built": "green", "cached": "cyan", "failed": "red", NOT_BUILT: "magenta"}.get(
                row.status, "yellow" if row.status in ACTIVE_PHASES else "")
            status = f"[{style}]{row.status}[/]" if style else row.status
            table.add_row(escape(vid), status, elapsed, escape(row.detail[:80]))
        return table

    def show(self, event: VariantPhase) -> None:
        variant_id, phase, detail = event.variant, event.phase, event.detail
        if variant_id not in self.rows:  # about the run, not a variant (e.g. reclaimed containers)
            self.out.print(f"{phase}: {detail}", markup=False)
            return
        row = self.rows[variant_id]
        row.status, row.detail = phase, detail
        if phase == "building":
            row.started = time.monotonic()
        if self.live:
            self.live.update(self._table())
        else:
            self.out.print(f"{variant_id}: {phase}" + (f" ({detail})" if detail else ""), markup=False)


class EventRenderer:
    """The progress channel as a person reads it: steps in bold, commands dimmed behind ``$``,
    results in green, a failed tool's output as it printed it; a variant's phases go to the build
    view while one is open (``view``), else one line each."""

    def __init__(self, out: Console) -> None:
        self.out = out
        self.view: BuildView | None = None

    def __call__(self, event: Event) -> None:
        if isinstance(event, VariantPhase):
            if self.view is not None:
                self.view.show(event)
            else:
                self.out.print(f"{event.variant}: {event.phase}" + (f" ({event.detail})" if event.detail else ""),
                               markup=False)
        elif isinstance(event, StepStarted):
            self.out.print(f"[bold]==> {escape(event.title)}[/bold]")
        elif isinstance(event, CommandRun):
            self.out.print(f"[dim]  $ {escape(event.command)}[/dim]", soft_wrap=True)
        elif isinstance(event, StepDone):
            self.out.print(f"[green]  {escape(event.text)}[/green]")
        elif isinstance(event, (ToolOutput, Notice)):
            self.out.print(event.text, markup=False, highlight=False)


def compile_share(outcomes: Sequence[Outcome]) -> str:
    """One line: how much of the built variants' time the compiler had (the rest is overhead)."""
    timed = [o.entry for o in outcomes if o.entry.status != "cached" and o.entry.compile_seconds is not None]
    if not timed:
        return ""
    wall = sum(e.seconds for e in timed)
    compiled = sum(e.compile_seconds or 0.0 for e in timed)
    return (f"compile {compiled:.1f} s of {wall:.1f} s over {len(timed)} variant(s) ({compiled / wall:.0%} of the "
            f"time; the rest: images, environments, repair, checks, smoke test; per phase in dist/manifest.json)"
            if wall else "")


def print_build_summary(out: Console, outcomes: list[Outcome], out_dir: str, *,
                        not_built: Sequence[NotBuilt] = ()) -> None:
    table = Table(title=f"Build summary ({out_dir})", title_justify="left", header_style="bold")
    for column in ("variant", "status", "seconds", "compile", "MB", "wheel", "sha256"):
        table.add_column(column)
    for o in outcomes:
        e = o.entry
        size = f"{e.size / 1e6:.1f}" if e.size else "-"
        compiled = f"{e.compile_seconds:.1f}" if e.compile_seconds is not None else "-"
        table.add_row(o.variant.id, e.status, f"{e.seconds:.1f}", compiled, size, e.wheel or "-", (e.sha256 or "")[:16])
    for n in not_built:
        table.add_row(n.variant.id, f"[magenta]{NOT_BUILT}[/]", "-", "-", "-", "-", "")
    out.print(table)
    share = compile_share(outcomes)
    if share:
        out.print(share, markup=False, highlight=False)
    for o in outcomes:
        for warning in o.entry.warnings or ():
            out.print(f"[yellow]{o.variant.id} warning[/]: {escape(warning)}")
        if o.entry.status == "failed":
            out.print(f"[red]{o.variant.id} failed[/]: {escape(o.entry.error or '')}")
            if o.log_tail:
                out.print(o.log_tail, markup=False, highlight=False)
    groups: dict[tuple[str, str], list[str]] = {}
    for n in not_built:
        groups.setdefault((n.reason, n.action), []).append(n.variant.id)
    for (reason, action), ids in groups.items():
        out.print(f"[magenta]{NOT_BUILT}[/] ({len(ids)}): {escape(', '.join(ids))}", highlight=False)
        out.print(f"  why: {reason}", markup=False, highlight=False)
        out.print(f"  to build them: {action}", markup=False, highlight=False)
