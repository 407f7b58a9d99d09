"""What kernel.toml's ops need besides a compiler, checked from the project's text when it is read
(plan, build, every command), in milliseconds, naming the file to edit: each op has a reference
implementation (the runtime's fallback, and what verification compares the built op with), each
is registered in a source (a ``.def("op(...)")`` in a TORCH_LIBRARY block), and no source
registers an op that kernel.toml does not list. A newcomer's missing reference used to surface
after the whole compile, as a module name.

The checks read text, they do not import or compile anything: a reference module that defines
its ops dynamically (a module ``__getattr__``) is taken at its word, and sources with no ``.def``
at all (registrations made by macros of the project's own) are not held to the registration rule.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from wheelfactory.errors import ConfigError
from wheelfactory.plan.tomlsource import Table

REFERENCE_MODULE = "_reference.py"  # the runtime's reference module (runtime/_package.py)
# `m.def("scaled_add(Tensor(a!) out, ...) -> ()")`, `m.def("op.overload(...)")`, `m.def("op", &fn)`
_DEF = re.compile(r'\.def\(\s*"([A-Za-z_]\w*)(?:\.[A-Za-z_]\w*)?\s*[("]')
_HEADERS = frozenset({".h", ".hpp", ".hh", ".cuh", ".inl"})


@dataclass(frozen=True)
class Registration:
    op: str
    file: Path  # relative to the project
    line: int


def registrations(root: Path, files: list[Path]) -> list[Registration]:
    """Every ``.def("op...")`` in ``files`` (relative to ``root``), where it is."""
    found = []
    for file in files:
        try:
            text = (root / file).read_text(errors="replace")
        except OSError:
            continue  # a missing source is kernel.toml's own error, raised where it is read
        for match in _DEF.finditer(text):
            found.append(Registration(match.group(1), file, text.count("\n", 0, match.start()) + 1))
    return found


def reference_names(path: Path, root: Path) -> set[str] | None:
    """The names ``path`` binds at module level; None where it defines them dynamically."""
    try:
        tree = ast.parse(path.read_text(errors="replace"), filename=str(path))
    except SyntaxError as exc:
        raise ConfigError(
            f"cannot be parsed ({exc.msg})",
            file=str(path.relative_to(root)),
            line=exc.lineno,
            hint="the reference ops are plain Python: fix the syntax",
        ) from None
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(
                t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)
            )
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return None if "__getattr__" in names else names


def check_ops(
    kernel: Table,
    root: Path,
    package: Path,
    ops: list[str],
    sources: list[Path],
    include_dirs: list[Path],
) -> None:
    """ConfigError naming the file and line to edit for the first op without a reference or a
    registration, or a registration of an op ``ops`` does not list."""
    reference = root / package / REFERENCE_MODULE
    shown = (package / REFERENCE_MODULE).as_posix()
    if not reference.is_file():
        kernel.error(
            "ops",
            f"no reference ops: {shown} does not exist",
            "define each op there in plain PyTorch, with its schema's signature: the runtime's fallback, "
            "and what each built wheel's op is compared with",
        )
    defined = reference_names(reference, root)
    for op in ops:
        if defined is not None and op not in defined:
            kernel.error(
                "ops",
                f"op {op!r} has no reference implementation in {shown}",
                f"define `def {op}(...)` there in plain PyTorch, with the signature of its schema",
            )
    headers = [
        path.relative_to(root)
        for directory in include_dirs
        for path in sorted((root / directory).rglob("*"))
        if path.suffix in _HEADERS and path.is_file()
    ]
    found = registrations(root, [*dict.fromkeys([*sources, *headers])])
    if not found:
        return  # registered by the project's own macros: nothing here to hold it to
    registered = {r.op for r in found}
    for op in ops:
        if op not in registered:
            scanned = ", ".join(sorted({s.as_posix() for s in sources}))
            kernel.error(
                "ops",
                f'op {op!r} is registered in no source (no .def("{op}(...)") in {scanned})',
                "add its schema to the TORCH_LIBRARY block, or remove it from ops",
            )
    for registration in found:
        if registration.op not in ops:
            raise ConfigError(
                f"registers op {registration.op!r}, which kernel.toml's [kernel] ops does not list",
                file=registration.file.as_posix(),
                line=registration.line,
                hint=f"add {registration.op!r} to ops in kernel.toml (the build record carries that "
                "list to the runtime)",
            )


def _names_in(files: list[Path]) -> set[str]:
    """Every identifier, attribute and string constant in ``files`` (those that parse)."""
    found: set[str] = set()
    for file in files:
        try:
            tree = ast.parse(file.read_text(errors="replace"))
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                found.add(node.id)
            elif isinstance(node, ast.Attribute):
                found.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(node.value)
    return found


def coverage_warnings(
    root: Path,
    package: Path,
    ops: tuple[str, ...],
    sample_inputs: tuple[str, str] | None,
    test_sources: tuple[str, ...],
) -> tuple[str, ...]:
    """A warning for each op that neither the sample inputs nor the tests name: each wheel's
    verification then only finds it registered, and nothing compares it with its reference."""
    samples = (
        root / package / Path(*sample_inputs[0].split(".")).with_suffix(".py")
        if sample_inputs
        else None
    )
    sampled = _names_in([samples]) if samples is not None else set()
    test_files = [
        path
        for source in test_sources
        for path in sorted((root / source).rglob("*.py"))
        if path.is_file()
    ] + [root / s for s in test_sources if s.endswith(".py") and (root / s).is_file()]
    tested = _names_in(test_files)
    where_samples = (
        samples.relative_to(root).as_posix()
        if samples is not None
        else "no sample_inputs in kernel.toml"
    )
    where_tests = ", ".join(test_sources) or "no [test]"
    return tuple(
        f"op {op!r} has no sample inputs ({where_samples}) and no test that names it ({where_tests}): "
        "each wheel only checks that it is registered, nothing compares it with its reference"
        for op in ops
        if op not in sampled and op not in tested
    )
