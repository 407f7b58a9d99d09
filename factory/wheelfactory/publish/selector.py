"""`wheelfactory which`: the index's own selector (select.py) run by the interpreter of the
environment a user installs into, as `curl URL/select.py | python -` does: it imports that
interpreter's torch, so it sees exactly what the kernel's runtime will see."""

from __future__ import annotations

import sys
from pathlib import Path

from wheelfactory.errors import UsageError
from wheelfactory.publish.select_script import DEFAULT_BASE_URL, select_script
from wheelfactory.support.proc import TimeoutExpired, call

_PROBE = "wheelfactory-which-probe"
_PROBE_SECONDS = 60  # a cold interpreter on a slow disk; this is not the torch import yet


def which(
    python: str = sys.executable,
    index: str | None = None,
    *,
    quiet: bool = False,
    project: str | None = None,
    gpus: tuple[str, ...] = (),
) -> int:
    """``wheelfactory which``: run select.py (standard library only, the runtime's fit rule in it)
    with ``python`` on ``index`` (default: a local `serve`); its output goes to ours; its exit
    code. ``project``: the name the index must serve (select.py refuses an index of another
    project; default, with no ``index``: the kernel project this directory builds, if any).
    ``gpus``: the compute capabilities to choose for instead of the machine's (``--gpu``)."""
    # the default index is whatever answers on 127.0.0.1:8000: another project's `serve`, perhaps
    if project is None and index is None:
        project = project_here(Path.cwd())
    check_interpreter(python)
    command = [
        python,
        "-",
        "--index",
        index or DEFAULT_BASE_URL,
        *(["--quiet"] if quiet else []),
        *(["--project", project] if project else []),
        *(arg for gpu in gpus for arg in ("--gpu", gpu)),
    ]
    try:
        return call(
            command, input=select_script(DEFAULT_BASE_URL), capture=False, tied=False
        ).returncode
    except OSError as exc:
        raise UsageError(f"--python {python}: cannot run it ({exc.strerror or exc})") from None


def check_interpreter(python: str) -> None:
    """The program must be a Python 3 interpreter, else one line (UsageError) naming it. Without
    this, a program that ignores its arguments (/bin/echo, a wrapper that prints something and
    exits 0) would be taken for an answer."""
    hint = (
        "give the interpreter of the environment you install into, e.g. --python .venv/bin/python"
    )
    probe = f"import sys; sys.stdout.write('{_PROBE} %d' % sys.version_info[0])"
    try:
        done = call([python, "-c", probe], timeout=_PROBE_SECONDS, tied=False)
    except TimeoutExpired:
        raise UsageError(
            f"--python {python}: no answer to a one-line Python test in {_PROBE_SECONDS} s; {hint}"
        ) from None
    except (OSError, ValueError) as exc:  # not found, not executable; ValueError: a NUL in the name
        reason = getattr(exc, "strerror", None) or str(exc)
        raise UsageError(f"--python {python}: cannot run it ({reason}); {hint}") from None
    said = done.stdout.strip()
    if done.returncode != 0:
        raise UsageError(
            f"--python {python}: exited {done.returncode} on a one-line Python test, so it is "
            f"not a working Python interpreter; {hint}"
        )
    if said != f"{_PROBE} 3":
        shown = " ".join(said.split())[:60] or "nothing"
        raise UsageError(
            f"--python {python}: not a Python 3 interpreter (a one-line test printed {shown!r}); {hint}"
        )


def project_here(directory: Path) -> str | None:
    """The name of the kernel project ``directory`` builds: its kernel.toml's, else that of the
    project its matrix.toml's [project] path names (a kernel.toml, or a pyproject.toml [project]);
    None where there is none or it cannot be read."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib

    def read(path: Path, *keys: str) -> str | None:
        try:
            data: object = tomllib.loads(path.read_text())
        except (OSError, ValueError, UnicodeDecodeError):
            return None
        for key in keys:
            data = data.get(key) if isinstance(data, dict) else None
        return data if isinstance(data, str) and data else None

    named = read(directory / "kernel.toml", "kernel", "name")
    if named is not None:
        return named
    project = read(directory / "matrix.toml", "project", "path")
    if project is None:
        return None
    root = directory / project
    return read(root / "kernel.toml", "kernel", "name") or read(
        root / "pyproject.toml", "project", "name"
    )
