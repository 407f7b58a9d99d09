"""One tree of fatal errors, each class with a fixed exit code; the CLI catches them once.

Messages are one line that says what is wrong, where (file, key, line) and what to do.
"""

from __future__ import annotations


class WheelfactoryError(Exception):
    """Base of every error the CLI turns into a clean message and an exit code."""

    exit_code = 1


class ConfigError(WheelfactoryError):
    """A matrix.toml, kernel declaration or compatibility table that cannot be used."""

    exit_code = 2

    def __init__(self, message: str, *, file: str | None = None, key: str | None = None,
                 line: int | None = None, hint: str | None = None) -> None:
        self.file = file
        self.key = key
        self.line = line
        self.hint = hint
        self.detail = message
        super().__init__(self._format())

    def _format(self) -> str:
        where = ""
        if self.file:
            where = self.file if self.line is None else f"{self.file}:{self.line}"
        parts = [p for p in (where, self.key) if p]
        text = f"{': '.join(parts)}: {self.detail}" if parts else self.detail
        if self.hint:
            text += f"; {self.hint}"
        return text


class UsageError(WheelfactoryError):
    """A command-line argument that cannot be used (e.g. --shard 3/2)."""

    exit_code = 2


class DockerUnavailable(WheelfactoryError):
    """No Docker engine answers (or the Docker SDK is not installed)."""

    exit_code = 3


class ImageBuildFailed(WheelfactoryError):
    """An image could not be made: debootstrap, the rootfs import or a Dockerfile step failed.
    ``tail`` holds the last lines of the log, for the presentation layer to show."""

    exit_code = 1

    def __init__(self, message: str, *, tail: str = "") -> None:
        self.tail = tail
        super().__init__(message)
