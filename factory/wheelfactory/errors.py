"""One tree of fatal errors, each class with a fixed exit code; the CLI catches them once.

Messages are one line that says what is wrong, where (file, key, line) and what to do. The exit
codes are part of the interface (README, "Exit codes"); each means one thing:

    0  everything selected was built (or was already built) and verified
    1  BuildFailed: at least one variant failed to build or verify; the others were delivered
    2  ConfigError, UsageError: bad input (matrix.toml, kernel.toml, a flag, a dist file)
    3  DockerUnavailable: the command needs a Docker engine and none answers
    4  OutputLocked: another wheelfactory run holds the output directory
    5  VariantsNotBuilt: what this machine can build was built; other selected variants were not,
       for want of an engine or of a way to run their arch (each listed with the reason and what to do)
    6  ImageBuildFailed: a build image could not be made (debootstrap, import, a Dockerfile step)
    7  PublishError: dist/ cannot be published as asked (a conflict, a missing or foreign file)
    8  WorkflowStale: `ci github --check` found the committed workflow out of date
    9  EnvironmentProblem: the machine lacks something a build needs (a wheel the registry does
       not serve, a host interpreter without torch, room or permission to write an output file,
       standard output included)
  130  interrupted (Ctrl-C)
  141  standard output was closed by its reader (`| head`): output stops quietly, as a Unix tool's
"""

from __future__ import annotations

from dataclasses import dataclass


class WheelfactoryError(Exception):
    """Base of every error the CLI turns into a clean message and an exit code."""

    exit_code = 1


class ConfigError(WheelfactoryError):
    """A matrix.toml, kernel declaration, compatibility table or dist file that cannot be used."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        key: str | None = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
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


class BuildFailed(WheelfactoryError):
    """At least one variant failed; its log and the manifest say why."""

    exit_code = 1


@dataclass(frozen=True)
class Findings:
    """What verifying a wheel found besides its verdict, for the variant's manifest entry: the
    project's tests (``tests``), the stable-ABI gate's verdict per torch (``gate``) and the
    warnings its log says (``warnings``). A failed build carries those it had (``found``)."""

    tests: dict[str, object] | None = None
    gate: dict[str, object] | None = None
    warnings: tuple[str, ...] = ()

    def then(self, later: Findings) -> Findings:
        """These findings followed by ``later``'s: its tests and gate where it has them."""
        return Findings(
            self.tests if later.tests is None else later.tests,
            self.gate if later.gate is None else later.gate,
            self.warnings + later.warnings,
        )


class VariantBuildError(WheelfactoryError):
    """One variant's build or verification failed (recorded in the manifest as "failed"; the run
    goes on with the others and ends in BuildFailed). ``found``: what the build had found when it
    failed (the failed tests' record, the warnings said before), which the entry keeps."""

    exit_code = 1

    def __init__(
        self, message: str, *, explained: bool = False, found: Findings | None = None
    ) -> None:
        super().__init__(message)
        # the message says all a person needs (a diagnosis): the log's tail is not shown under it
        self.explained = explained
        self.found = found or Findings()

    def add_earlier(self, earlier: Findings) -> None:
        """Put ``earlier`` (what the build found before the step that raised this) first."""
        self.found = earlier.then(self.found)


class DockerBuildError(VariantBuildError):
    """The Docker engine could not build one variant (cibuildwheel, repair or a check failed)."""


class HostEngineError(VariantBuildError):
    """The host engine could not build one variant."""


class DockerUnavailable(WheelfactoryError):
    """No Docker engine answers (or the Docker SDK is not installed)."""

    exit_code = 3


class OutputLocked(WheelfactoryError):
    """Another wheelfactory run holds the output directory's lock."""

    exit_code = 4


class VariantsNotBuilt(WheelfactoryError):
    """The run built what this machine can; the other selected variants need an engine it lacks."""

    exit_code = 5


class ImageBuildFailed(WheelfactoryError):
    """An image could not be made: debootstrap, the rootfs import or a Dockerfile step failed.
    ``tail`` holds the last lines of the log, for the presentation layer to show."""

    exit_code = 6

    def __init__(self, message: str, *, tail: str = "") -> None:
        self.tail = tail
        super().__init__(message)


class PublishError(WheelfactoryError):
    """dist/ cannot be published as asked."""

    exit_code = 7


class IndexBuildError(PublishError):
    """The index cannot be written from this dist/ (a manifest entry names a missing wheel...)."""


class MergeConflict(PublishError):
    """Two parts (or a part and the output) disagree: two wheels for one variant, or two files
    with one name; or a part's manifest names a file it does not hold."""


class WorkflowStale(WheelfactoryError):
    """``--check``: the committed workflow is not what the plan generates (or is missing)."""

    exit_code = 8


class EnvironmentProblem(WheelfactoryError):
    """The machine lacks something a build needs."""

    exit_code = 9


class WriteFailed(EnvironmentProblem):
    """An output file could not be written (no space left, a read-only directory...); the old file,
    if any, is left as it was and no partial file remains."""


class WheelhouseError(EnvironmentProblem):
    """The wheelhouse could not be filled (the registry does not serve a wheel a build needs)."""
