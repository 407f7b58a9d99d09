"""``ci github --watch-torch``: a scheduled job that notices new torch releases.

Once a week (and on a manual run) the job runs ``wheelfactory compat refresh`` against the
compatibility table the workflow builds with. When the table knows everything it passes. When it
is behind:

- the findings and the ready ``[torch."X.Y"]`` fragments go to the job summary, and the job fails,
  so that somebody sees it;
- where the workflow builds with a table of its own (``--compat FILE``, kept in the repository)
  and the repository has a secret named ``WHEELFACTORY_WATCH_TOKEN`` (a token that may push a
  branch and open a pull request), the job instead commits the refreshed table on a branch and
  opens a pull request with the fragments as its description; merging it (after checking the
  facts marked unverified) makes the next tag build the new release.

Pure: options in, job (a dict for github.py's YAML) out.
"""

from __future__ import annotations

import shlex
from typing import Any

SCHEDULE = "17 6 * * 1"  # Mondays 06:17 UTC: off the hour, as GitHub asks of scheduled workflows
TOKEN_SECRET = "WHEELFACTORY_WATCH_TOKEN"
FRAGMENT = "torch-refresh.toml"  # what refresh printed: the findings and the fragments
# the same for people: the job summary and the pull request's description
REPORT = "torch-refresh.md"
REFRESHED = "refreshed-compat.toml"  # the table with the new releases appended (--write)
BOT_NAME = "github-actions[bot]"
BOT_EMAIL = "41898282+github-actions[bot]@users.noreply.github.com"  # the bot's own commit address


def watch_job(setup: list[dict[str, Any]], compat_file: str | None, runner: str) -> dict[str, Any]:
    """The ``watch-torch`` job. ``setup``: the steps that check out and install wheelfactory."""
    refresh = [
        "wheelfactory",
        "compat",
        "refresh",
        *(["--compat", compat_file] if compat_file else []),
        "--write",
        REFRESHED,
    ]
    run_refresh = (
        "\n".join(
            [
                "status=0",
                f"{shlex.join(refresh)} > {FRAGMENT} || status=$?",
                'echo "status=$status" >> "$GITHUB_OUTPUT"',
                'if [ "$status" = 1 ]; then',
                "  {",
                '    echo "## The compatibility table is behind the torch indexes"',
                "    echo",
                "    echo '```toml'",
                f"    cat {FRAGMENT}",
                "    echo '```'",
                f"  }} > {REPORT}",
                f'  cat {REPORT} >> "$GITHUB_STEP_SUMMARY"',
                "fi",
                'if [ "$status" -gt 1 ]; then exit "$status"; fi',
            ]
        )
        + "\n"
    )
    steps: list[dict[str, Any]] = [
        *setup,
        {
            "name": "Compare the compatibility table with the torch indexes",
            "id": "refresh",
            "run": run_refresh,
        },
    ]
    behind = "steps.refresh.outputs.status == '1'"
    pull_request = f"{behind} && env.WATCH_TOKEN != ''"
    if compat_file is not None:
        quoted = shlex.quote(compat_file)
        steps.append(
            {
                "name": "Open a pull request with the refreshed table",
                "if": f"${{{{ {pull_request} }}}}",
                "env": {"GH_TOKEN": "${{ env.WATCH_TOKEN }}"},
                "run": "\n".join(
                    [
                        'branch="wheelfactory/torch-refresh-$(date -u +%Y%m%d)"',
                        f'git config user.name "{BOT_NAME}"',
                        f'git config user.email "{BOT_EMAIL}"',
                        'git checkout -b "$branch"',
                        f"cp {REFRESHED} {quoted}",
                        f"git add {quoted}",
                        'git commit -m "compat: torch releases found by wheelfactory compat refresh"',
                        'git push --force origin "$branch"',
                        'gh pr create --head "$branch" --title "New torch releases for the compatibility table" '
                        f"--body-file {REPORT}",
                    ]
                )
                + "\n",
            }
        )
        fail_if = f"{behind} && env.WATCH_TOKEN == ''"
    else:
        fail_if = behind
    steps.append(
        {
            "name": "Fail while the table is behind (the summary has the fragments)",
            "if": f"${{{{ {fail_if} }}}}",
            "run": 'echo "::error::the compatibility table is behind: see the job summary"; exit 1',
        }
    )
    return {
        "name": "watch torch releases",
        "if": "${{ github.event_name == 'schedule' || github.event_name == 'workflow_dispatch' }}",
        "runs-on": runner,
        # The token, where configured, checks out with push rights and opens the pull request.
        "env": {"WATCH_TOKEN": f"${{{{ secrets.{TOKEN_SECRET} }}}}"},
        "steps": steps,
    }


def with_token_checkout(setup: list[dict[str, Any]], checkout: str) -> list[dict[str, Any]]:
    """``setup`` whose checkout uses the token when there is one (so that the branch can be pushed)."""
    return [
        {**step, "with": {"token": f"${{{{ secrets.{TOKEN_SECRET} || github.token }}}}"}}
        if step.get("uses") == checkout
        else step
        for step in setup
    ]
