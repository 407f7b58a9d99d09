"""Does a compiled library meet the Hugging Face Hub's kernel requirements? Asked of the Hub's own
checker, ``kernel-abi-check`` (a compiled module, imported only when a check runs).

The rules (https://huggingface.co/docs/kernels/kernel-requirements, "Compatibility with Linux
distributions" and "Python ABI"): every compiled extension must be manylinux_2_28-compatible (its
symbol versions no newer than that policy allows: GLIBC 2.28 and the GLIBCXX/CXXABI/GCC versions
of the same policy) and must use only the Python stable ABI as of Python 3.9 (abi3). A library
the checker cannot read (not ELF, truncated) does not conform either: it is reported, never raised.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from wheelfactory.errors import PublishError

# The Hub's policies, from https://huggingface.co/docs/kernels/kernel-requirements: the manylinux
# policy every compiled extension must satisfy and the oldest Python whose stable ABI it may use.
MANYLINUX_POLICY = "manylinux_2_28"
PYTHON_ABI = "3.9"

INSTALL_HINT = "pip install 'kernel-abi-check>=0.14'"


@dataclass(frozen=True)
class AbiFinding:
    """One library's findings: ``library`` is its path inside the package's directory
    (``mykernels/_C.abi3.so``), ``problems`` the checker's findings as short strings."""

    library: str
    problems: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.library}: {'; '.join(self.problems)}"


def require_checker() -> None:
    """Raise PublishError (exit 7) unless kernel-abi-check can be imported."""
    try:
        import kernel_abi_check  # noqa: F401
    except ImportError as exc:
        raise PublishError(
            f"kernel-abi-check (the Hugging Face kernels ABI checker) is not installed "
            f"({exc}): {INSTALL_HINT}, or export with --skip-abi-check"
        ) from None


def check_hub_conformance(
    library: Path, *, manylinux: str = MANYLINUX_POLICY, python_abi: str = PYTHON_ABI
) -> list[str]:
    """The checker's findings for one library, one short string each; empty when it conforms.

    e.g. ``manylinux_2_28: __libc_single_threaded needs GLIBC_2.32``,
    ``Python 3.9 abi3: PyObject_Vectorcall is in the stable ABI from 3.12 only``.
    """
    require_checker()
    from kernel_abi_check import (
        BinaryFormat,
        IncompatibleAbi3Symbol,
        ObjectFile,
    )

    try:
        objfile = ObjectFile(library)
        binary_format = objfile.format()
    except (OSError, ValueError) as exc:  # unreadable, or not an object file at all
        return [f"not a library kernel-abi-check can read ({_one_line(exc, library)})"]
    if binary_format != BinaryFormat.ELF:
        kind = str(binary_format).rsplit(".", 1)[-1]
        return [f"a {kind} object, not ELF: the Hub's Linux builds hold ELF libraries only"]
    problems: list[str] = []
    try:
        for symbol in objfile.check_manylinux(manylinux):
            problems.append(f"{manylinux}: {symbol.name} needs {symbol.dep}_{symbol.version}")
        for abi in objfile.check_python_abi(python_abi):
            if isinstance(abi, IncompatibleAbi3Symbol):
                problems.append(
                    f"Python {python_abi} abi3: {abi.name} is in the stable ABI from "
                    f"{abi.version_added} only"
                )
            else:  # NonAbi3Symbol
                problems.append(f"Python {python_abi} abi3: {abi.name} is not in the stable ABI")
    except ValueError as exc:  # a malformed ELF, or a policy name this checker does not know
        problems.append(f"kernel-abi-check could not check it ({_one_line(exc, library)})")
    return problems


def check_package(
    directory: Path,
    package: str,
    *,
    manylinux: str = MANYLINUX_POLICY,
    python_abi: str = PYTHON_ABI,
) -> list[AbiFinding]:
    """Check every ``*.so`` under ``directory/package`` (as the Hub's check does); one finding per
    library that does not conform, in path order."""
    findings: list[AbiFinding] = []
    for library in sorted((directory / package).rglob("*.so")):
        if not library.is_file():
            continue
        problems = check_hub_conformance(library, manylinux=manylinux, python_abi=python_abi)
        if problems:
            findings.append(AbiFinding(library.relative_to(directory).as_posix(), tuple(problems)))
    return findings


def _one_line(exc: BaseException, library: Path) -> str:
    """The checker's message on one line, naming the library by its file name (the caller says where)."""
    return " ".join(str(exc).replace(str(library), library.name).split()) or type(exc).__name__
