"""Presentation of plans: rich tables for people, JSON for machines. No logic lives here."""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table

from .plan import Plan


def console(stderr: bool = False) -> Console:
    # Piped output keeps long rows whole instead of wrapping to 80 columns.
    probe = Console(stderr=stderr)
    return probe if probe.is_terminal else Console(stderr=stderr, width=220, soft_wrap=True)


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
        table.add_row(v.id, v.torch_version, v.backend.build_name,
                      "cxx11" if v.key.cxx11_abi else "cxx98", v.key.python, f"+{v.local_version}", archs)
    out.print(table)
    summary = f"{len(plan.variants)} variant(s), {len(plan.pruned)} pruned combination(s)"
    if plan.pruned and not explain:
        summary += " (--explain shows why)"
    out.print(summary)
    if explain and plan.pruned:
        pruned = Table(title="Pruned", title_justify="left", header_style="bold")
        for column in ("torch", "build", "ABI", "python", "arch", "reason"):
            pruned.add_column(column)
        for p in plan.pruned:
            abi = "any" if p.cxx11_abi is None else ("cxx11" if p.cxx11_abi else "cxx98")
            pruned.add_row(p.torch, p.backend, abi, p.python or "any", p.arch or "any", p.reason)
        out.print(pruned)
