"""Progress events of long side-effecting steps (image builds): library code reports them through
``Progress``; the CLI decides how they look (``ConsoleProgress``), tests pass ``NullProgress``."""

from __future__ import annotations

from typing import Protocol

from rich.console import Console
from rich.markup import escape


class Progress(Protocol):
    def step(self, title: str) -> None:
        """A new step begins (e.g. "debootstrap bookworm")."""

    def command(self, command: str) -> None:
        """A command (already quoted) or a build instruction runs now."""

    def result(self, text: str) -> None:
        """A step ended; ``text`` says what it gave and how long it took."""


class NullProgress:
    def step(self, title: str) -> None:
        pass

    def command(self, command: str) -> None:
        pass

    def result(self, text: str) -> None:
        pass


class ConsoleProgress:
    """One line an event: steps in bold, commands dimmed behind ``$``, results in green."""

    def __init__(self, out: Console) -> None:
        self.out = out

    def step(self, title: str) -> None:
        self.out.print(f"[bold]==> {escape(title)}[/bold]")

    def command(self, command: str) -> None:
        self.out.print(f"[dim]  $ {escape(command)}[/dim]", soft_wrap=True)

    def result(self, text: str) -> None:
        self.out.print(f"[green]  {escape(text)}[/green]")
