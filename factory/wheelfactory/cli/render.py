"""Presentation: rich tables for people, JSON for machines, and the progress channel's events
(support/progress.py) as lines or a live table. No logic lives here; nothing else imports rich."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from wheelfactory.errors import PublishError
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
    from collections.abc import Callable, Mapping, Sequence

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


def plain(out: Console, text: str) -> None:
    """``text`` as it is: no markup read in it, nothing highlighted."""
    out.print(text, markup=False, highlight=False)


def tagged(out: Console, tag: str, variant_id: str, reason: str) -> None:
    """``tag variant_id: reason``, the tag in its colour (``[red]refused[/]``)."""
    out.print(f"{tag} {escape(variant_id)}: {escape(reason)}", highlight=False)


def unattested_warning(count: int, verb: str) -> None:
    """The opt-out is said in the summary, so that a log shows what was published unattested."""
    if count:
        console(stderr=True).print(
            f"[yellow]warning[/] --allow-unattested: {count} wheel(s) {verb} without a "
            "provenance record",
            highlight=False,
        )


def refused_error(refused: list[str], command: str) -> None:
    """The exit (PublishError, 7) of a command that wrote what it could and refused ``refused``."""
    if refused:
        raise PublishError(
            f"{len(refused)} variant(s) refused ({', '.join(refused)}): each is not what its "
            f"manifest entry says it is (the reasons are above); `{command}` wrote the rest. "
            "Rebuild them with `wheelfactory build`"
        )


def plan_json(plan: Plan) -> str:
    return json.dumps(plan.as_dict(), indent=2)


def github_json(plan: Plan) -> str:
    return json.dumps(plan.github_matrix(), separators=(",", ":"))


def print_plan(out: Console, plan: Plan, *, explain: bool, title: str) -> None:
    table = Table(title=title, title_justify="left", header_style="bold")
    for column in (
        "variant",
        "torch",
        "build",
        "ABI",
        "python",
        "local version",
        "archs / targets",
    ):
        table.add_column(column, no_wrap=column in ("variant", "local version"))
    for v in plan.variants:
        archs = ";".join(v.shipped_arch_list) or "-"
        if v.notes:
            archs += " (" + "; ".join(v.notes) + ")"
        # Cells are escaped: user text such as "[cuda].toolkits" must not be read as rich markup.
        table.add_row(
            *map(
                escape,
                (
                    v.id,
                    v.torch_version,
                    v.backend.build_name,
                    "cxx11" if v.key.cxx11_abi else "cxx98",
                    v.key.python,
                    f"+{v.local_version}",
                    archs,
                ),
            )
        )
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
            pruned.add_row(
                *map(
                    escape, (p.torch, p.backend, abi, p.python or "any", p.arch or "any", p.reason)
                )
            )
        out.print(pruned)


@dataclass
class _Row:
    status: str = "queued"
    detail: str = ""
    started: float | None = None
    ended: float | None = None


NOT_BUILT = "not built"
UNITS = re.compile(r"^\[(\d+)/(\d+)\] ")  # ninja's progress: units done / all, before each command
UNITS_EVERY_S = 10.0  # a plain (non-terminal) output's compile progress line at most this often
# A variant's statuses after which nothing runs for it; any other after "building" is a phase under way.
FINISHED = frozenset({"built", "cached", "failed", "cancelled", NOT_BUILT})


class BuildView:
    """Per-variant status while a matrix runs: a live table on a terminal, one line per event
    otherwise (CI logs), each with the seconds since the run started, and a summary at the end.
    ``quiet``: nothing until the summary. ``verbose``: each variant's build.log is streamed as
    it is written (the tools' own output), each line behind the variant's id."""

    def __init__(
        self,
        out: Console,
        variant_ids: list[str],
        title: str = "",
        not_built: Mapping[str, str] | None = None,
        *,
        quiet: bool = False,
        verbose: bool = False,
        out_dir: Path | None = None,
    ) -> None:
        """``not_built``: selected variants no engine here builds (id -> why), shown as such."""
        from rich.live import Live

        self.out = out
        self.quiet = quiet
        self.started = time.monotonic()
        # the run's parallelism and memory (factory/wheelfactory/engines/capacity.py)
        self.title = title
        self.rows = {vid: _Row() for vid in variant_ids}
        self.rows.update({vid: _Row(NOT_BUILT, why) for vid, why in (not_built or {}).items()})
        # streamed lines and a live table do not mix
        live = out.is_terminal and not quiet and not verbose
        self.live = Live(self._table(), console=out, refresh_per_second=2) if live else None
        self.verbose = verbose
        self.units_said: dict[str, float] = {}  # when a plain line last said them
        self.follower = (
            LogFollower(out_dir, variant_ids, self._log_line) if out_dir is not None else None
        )
        if self.live is None and title and not quiet:
            out.print(title, markup=False)
        if self.live is None and not_built and not quiet:
            out.print(
                f"{len(not_built)} selected variant(s) not built here (listed in the summary)",
                markup=False,
            )

    def __enter__(self) -> BuildView:
        if self.live:
            self.live.__enter__()
        if self.follower:
            self.follower.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.follower:
            self.follower.stop()
        if self.live:
            self.live.update(self._table())
            self.live.__exit__(None, None, None)

    def _table(self) -> Table:
        table = Table(header_style="bold", title=escape(self.title) or None, title_justify="left")
        for column in ("variant", "status", "elapsed", "detail"):
            table.add_column(column)
        now = time.monotonic()
        for vid, row in self.rows.items():
            elapsed = f"{(row.ended or now) - row.started:.0f} s" if row.started is not None else ""
            active = row.started is not None and row.status not in FINISHED
            style = {"built": "green", "cached": "cyan", "failed": "red", NOT_BUILT: "magenta"}.get(
                row.status, "yellow" if active else ""
            )
            status = f"[{style}]{row.status}[/]" if style else row.status
            table.add_row(escape(vid), status, elapsed, escape(row.detail[:80]))
        return table

    def _log_line(self, variant_id: str, line: str) -> None:
        """A line of a variant's build log: printed with -v; ninja's ``[N/M]`` counts the compile's units."""
        if self.verbose:
            self.out.print(f"{variant_id} | {line}", markup=False, highlight=False, soft_wrap=True)
        found = UNITS.match(line)
        row = self.rows.get(variant_id)
        if found is None or row is None or row.status in FINISHED:
            return
        done, total = int(found.group(1)), int(found.group(2))
        row.detail = f"{done}/{total} units"
        if self.live:
            self.live.update(self._table())
        elif not self.quiet and not self.verbose:  # a plain line now and then, and at the last unit
            now = time.monotonic()
            if done == total or now - self.units_said.get(variant_id, 0.0) >= UNITS_EVERY_S:
                self.units_said[variant_id] = now
                plain(self.out, f"{self.stamp()} {variant_id}: compile {done}/{total} units")

    def stamp(self) -> str:
        """``[  12.3s]``: the seconds since the run started, for a plain line."""
        return f"[{time.monotonic() - self.started:7.1f}s]"

    def show(self, event: VariantPhase) -> None:
        variant_id, phase, detail = event.variant, event.phase, event.detail
        if variant_id not in self.rows:  # about the run, not a variant (e.g. reclaimed containers)
            if not self.quiet:
                plain(self.out, f"{self.stamp()} {phase}: {detail}")
            return
        row = self.rows[variant_id]
        row.status, row.detail = phase, detail
        if phase == "building" or (row.started is None and phase not in FINISHED):
            row.started, row.ended = time.monotonic(), None
            if self.follower:
                self.follower.restart(variant_id)
        if phase in FINISHED and row.started is not None:
            row.ended = time.monotonic()
        if self.live:
            self.live.update(self._table())
        elif not self.quiet:
            plain(
                self.out,
                f"{self.stamp()} {variant_id}: {phase}" + (f" ({detail})" if detail else ""),
            )


class LogFollower:
    """Each building variant's build.log, its new whole lines handed to ``on_line(variant, line)``
    as they are written (every 0.2 s). A log starts over when its variant's build starts."""

    def __init__(
        self, out_dir: Path, variant_ids: list[str], on_line: Callable[[str, str], None]
    ) -> None:
        import threading

        self.on_line = on_line
        self.logs = {vid: out_dir / vid / "build.log" for vid in variant_ids}
        self.offsets: dict[str, int] = {}
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.thread = threading.Thread(
            target=self._run, name="wheelfactory-log-follower", daemon=True
        )

    def start(self) -> None:
        self.thread.start()

    def restart(self, variant_id: str) -> None:
        with self.lock:
            self.offsets[variant_id] = 0

    def stop(self) -> None:
        self.done.set()
        self.thread.join(5)
        self.read_all()  # what was written after the last look

    def _run(self) -> None:
        while not self.done.wait(0.2):
            self.read_all()

    def read_all(self) -> None:
        with self.lock:
            for vid, offset in list(self.offsets.items()):
                try:
                    with self.logs[vid].open("rb") as log:
                        log.seek(offset)
                        data = log.read()
                except OSError:
                    continue
                complete = data[: data.rfind(b"\n") + 1]  # whole lines only; the rest next time
                self.offsets[vid] = offset + len(complete)
                for line in complete.decode("utf-8", errors="replace").splitlines():
                    self.on_line(vid, line)


class EventRenderer:
    """The progress channel as a person reads it: steps in bold, commands dimmed behind ``$``,
    results in green, a failed tool's output as it printed it; a variant's phases go to the build
    view while one is open (``view``), else one line each."""

    def __init__(self, out: Console, *, quiet: bool = False) -> None:
        self.out = out
        self.quiet = quiet  # build -q: the summary and errors only
        self.view: BuildView | None = None

    def __call__(self, event: Event) -> None:
        if self.quiet:
            return
        if isinstance(event, VariantPhase):
            if self.view is not None:
                self.view.show(event)
            else:
                self.out.print(
                    f"{event.variant}: {event.phase}"
                    + (f" ({event.detail})" if event.detail else ""),
                    markup=False,
                )
        elif isinstance(event, StepStarted):
            self.out.print(f"[bold]==> {escape(event.title)}[/bold]")
        elif isinstance(event, CommandRun):
            self.out.print(f"[dim]  $ {escape(event.command)}[/dim]", soft_wrap=True)
        elif isinstance(event, StepDone):
            self.out.print(f"[green]  {escape(event.text)}[/green]")
        elif isinstance(event, (ToolOutput, Notice)):
            plain(self.out, event.text)


def phase_times(phases: Mapping[str, float] | None) -> str:
    """A variant's phases that took a second or more, with their seconds: ``compile 18, smoke 3``."""
    shown = [f"{name} {seconds:.0f}" for name, seconds in (phases or {}).items() if seconds >= 1]
    return ", ".join(shown) or "-"


def compile_share(outcomes: Sequence[Outcome]) -> str:
    """One line: how much of the built variants' time the compiler had (the rest is overhead)."""
    timed = [
        o.entry
        for o in outcomes
        if o.entry.status != "cached" and o.entry.compile_seconds is not None
    ]
    if not timed:
        return ""
    wall = sum(e.seconds for e in timed)
    compiled = sum(e.compile_seconds or 0.0 for e in timed)
    return (
        f"compile {compiled:.1f} s of {wall:.1f} s over {len(timed)} variant(s) ({compiled / wall:.0%} of the "
        f"time; the rest: images, environments, repair, checks, smoke test; per phase in dist/manifest.json)"
        if wall
        else ""
    )


def print_build_summary(
    out: Console, outcomes: list[Outcome], out_dir: str, *, not_built: Sequence[NotBuilt] = ()
) -> None:
    table = Table(title=f"Build summary ({out_dir})", title_justify="left", header_style="bold")
    for column in ("variant", "status", "seconds", "phases (s)", "MB", "wheel", "sha256"):
        table.add_column(column)
    for o in outcomes:
        e = o.entry
        size = f"{e.size / 1e6:.1f}" if e.size else "-"
        table.add_row(
            o.variant.id,
            e.status,
            f"{e.seconds:.1f}",
            phase_times(e.phases),
            size,
            e.wheel or "-",
            (e.sha256 or "")[:16],
        )
    for n in not_built:
        table.add_row(n.variant.id, f"[magenta]{NOT_BUILT}[/]", "-", "-", "-", "-", "")
    out.print(table)
    share = compile_share(outcomes)
    if share:
        plain(out, share)
    for o in outcomes:
        for warning in o.entry.warnings or ():
            out.print(f"[yellow]{o.variant.id} warning[/]: {escape(warning)}")
        if o.entry.status == "failed":
            out.print(f"[red]{o.variant.id} failed[/]: {escape(o.entry.error or '')}")
            if o.log_tail:
                plain(out, o.log_tail)
    groups: dict[tuple[str, str], list[str]] = {}
    for n in not_built:
        groups.setdefault((n.reason, n.action), []).append(n.variant.id)
    for (reason, action), ids in groups.items():
        out.print(
            f"[magenta]{NOT_BUILT}[/] ({len(ids)}): {escape(', '.join(ids))}", highlight=False
        )
        plain(out, f"  why: {reason}")
        plain(out, f"  to build them: {action}")
