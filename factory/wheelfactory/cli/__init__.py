"""The `wheelfactory` command line: presentation only (click commands, rich output); every
decision lives in the concern folders beside it."""

from wheelfactory.cli.main import main

__all__ = ["main"]
