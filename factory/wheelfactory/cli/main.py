"""The ``wheelfactory`` command line: each command parses its options, calls its function of the
API (wheelfactory/__init__.py) and renders the result. The commands live by job: cli/build_cli.py
(plan, build, new), publish_cli.py (index, report, export, publish), serve_cli.py (serve, which),
ci_cli.py (bake, ci github, merge), compat_cli.py and machine_cli.py. Fatal errors are caught
once, in ``main``."""

from __future__ import annotations

import errno
import os
import sys

import click

from wheelfactory import __version__
from wheelfactory.cli import build_cli, ci_cli, publish_cli, serve_cli
from wheelfactory.cli.compat_cli import compat_group
from wheelfactory.cli.machine_cli import base_image, engine_group, gc_command, rocm_check_command
from wheelfactory.errors import ConfigError, UsageError, WheelfactoryError, WriteFailed


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="wheelfactory")
def cli() -> None:
    """Build one repaired, verified wheel per torch x backend x ABI variant of a kernel project."""


for command in (
    *build_cli.COMMANDS,
    *publish_cli.COMMANDS,
    *serve_cli.COMMANDS,
    *ci_cli.COMMANDS,
    compat_group,
    engine_group,
    rocm_check_command,
    base_image,
    gc_command,
):
    cli.add_command(command)


# errno values of a write to standard output or error that cannot go on: the disk or device is full
# or failing. A closed pipe (EPIPE) is not an error: the reader has what it wanted.
OUTPUT_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG)
CLOSED_PIPE_EXIT = 141  # 128 + SIGPIPE: what a Unix tool killed by the closed pipe exits with


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI; turn known failures into one line on stderr and an exit code."""
    for stream in (sys.stdout, sys.stderr):  # a name the locale cannot encode is printed escaped
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        try:
            # make_context + invoke is click's main without its handlers: a closed pipe reaches ours
            # (click's would exit 1, the code of a failed build)
            with cli.make_context("wheelfactory", args) as context:
                cli.invoke(context)
        finally:
            # a full or closed standard output fails here, inside the handlers below
            sys.stdout.flush()
    except WheelfactoryError as exc:
        label = "config error" if isinstance(exc, ConfigError) else "error"
        _say_and_exit(f"wheelfactory: {label}: {exc}", exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt, EOFError):
        from wheelfactory.runner.cancel import CANCEL  # ctypes: not for every command's start

        if CANCEL.event.is_set():  # a build: its children were stopped, and nothing earlier changed
            _say_and_exit(
                f"wheelfactory: interrupted by {CANCEL.described}: the builds under way were stopped; "
                "earlier wheels and their manifest entries are kept",
                CANCEL.exit_code,
            )
        _say_and_exit("wheelfactory: interrupted", 130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        _silence_output()
        sys.exit(CLOSED_PIPE_EXIT)
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            shown = str(exc.filename or "a path")
            shown = shown if len(shown) <= 80 else shown[:80] + "..."
            _say_and_exit(
                f"wheelfactory: error: {shown}: a name longer than the filesystem allows; use a shorter "
                "path or name",
                UsageError.exit_code,
            )
        if exc.errno not in OUTPUT_ERRNOS:
            raise
        where = exc.filename or "standard output"
        _silence_output()
        _say_and_exit(
            f"wheelfactory: error: cannot write {where}: {exc.strerror}", WriteFailed.exit_code
        )
    sys.exit(0)


def _silence_output() -> None:
    """Point standard output at /dev/null: what is still buffered for a full or closed output is
    dropped instead of failing again when the interpreter exits."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)


def _say_and_exit(line: str, code: int) -> None:
    """The one line on standard error, where it can be written at all; then the exit code."""
    try:  # not click.echo: its stream prints what the locale cannot encode as "?", ours escapes it
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # standard error is gone too: the exit code is all that is left to say it
    sys.exit(code)
