"""The checks every built wheel goes through, whichever engine built it: written once, here.

1. the wheel's own checks (``repair.check_wheel``: tags, record, ``_C``, nothing grafted, glibc,
   op namespace);
2. ``abi3audit --strict`` for abi3 wheels, run by the factory's interpreter (on the host: the
   Docker engine's containers have no network to install it);
3. for CUDA variants, ``cuobjdump``: every library holds exactly the requested SASS, plus PTX
   for ``+PTX`` archs;
4. (at the same time as 2 and 3) a smoke test in a clean environment with only torch and the wheel: the engine says how to
   make one (a fresh container, a fresh venv) and runs the code given to it.

A check whose tool is missing here is not silently skipped: the build log says so.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wheelfactory.errors import Findings, VariantBuildError
from wheelfactory.images.emulation import host_arch
from wheelfactory.plan.identity import Variant
from wheelfactory.project.kind_facts import SmokeProgram
from wheelfactory.project.stage import Stage
from wheelfactory.support.proc import CommandFailed, run
from wheelfactory.support.timeline import Timeline, note
from wheelfactory.verify import byo_smoke, cuda_binary, fatbin
from wheelfactory.verify.project_suite import TestRun, run_project_tests
from wheelfactory.verify.repair import check_wheel
from wheelfactory.verify.stable_symbols import (
    declared_stable_target,
    shim_versions,
    stable_abi_problems,
)
from wheelfactory.verify.wheel_identity import elf_machine_problems, is_shared_library

# Runs the given Python code in a clean environment where only torch and the wheel are installed,
# appending the commands and their output to the log; returns the output.
Smoke = Callable[[str, Path], str]


@dataclass(frozen=True)
class SmokeCheck:
    """One smoke program (project/kind_facts.py SmokeProgram): the code sent to the clean
    environment, and what its JSON result must say (a failure, without the variant id; None: it
    passed); ``note`` is what the log keeps of a passed run."""

    code: Callable[[Stage, tuple[str, ...]], str]
    failure: Callable[[Stage, dict[str, Any]], str | None]
    note: Callable[[dict[str, Any]], str | None]


def _declared_ops_code(stage: Stage, modules: tuple[str, ...]) -> str:
    checks = stage.checks
    return _program(
        "native_smoke.py",
        {
            "package": checks.package,
            "ops": list(checks.declared_ops),
            "sample_inputs": list(checks.sample_inputs) if checks.sample_inputs else None,
        },
    )


def _declared_ops_failure(stage: Stage, result: dict[str, Any]) -> str | None:
    if result.get("problems"):
        return _failed_verification(result)
    if result["mode"] != "prebuilt" or result["variant"] != stage.variant.id:
        return f"smoke test loaded {result['variant']} in mode {result['mode']}, expected the prebuilt library"
    return None


def _op_namespace_code(stage: Stage, modules: tuple[str, ...]) -> str:
    return _program(
        "kernel_builder_smoke.py",
        {
            "package": stage.package,
            "namespace": stage.checks.op_namespace,
            "dispatch_key": "CPU" if stage.variant.key.backend.kind == "cpu" else "CUDA",
        },
    )


def _op_namespace_note(result: dict[str, Any]) -> str:
    keys = result.get("keys", {})
    return (
        f"smoke: {len(result['ops'])} op(s) serving {result['dispatch_key']} under {result['namespace']}: "
        + ", ".join(f"{op} ({keys.get(op, result['dispatch_key'])})" for op in result["ops"])
    )


def _failed_verification(result: dict[str, Any]) -> str | None:
    return (
        f"the wheel failed verification: {'; '.join(result['problems'])}"
        if result.get("problems")
        else None
    )


# The smoke program of each kind (Stage.kind.smoke): a factory-native wheel runs
# verify/native_smoke.py with what kernel.toml declares (no op name of any kernel is written in the
# factory); a kernel-builder wheel verify/kernel_builder_smoke.py with its op namespace; a
# bring-your-own wheel imports its package and each compiled module (verify/byo_smoke.py).
SMOKES: dict[SmokeProgram, SmokeCheck] = {
    "declared-ops": SmokeCheck(
        _declared_ops_code,
        _declared_ops_failure,
        lambda r: (
            f"smoke: {r['ops']} declared op(s) registered and with references, "
            f"{r['samples']} sample input(s) matched their reference"
        ),
    ),
    "op-namespace": SmokeCheck(
        _op_namespace_code, lambda _, r: _failed_verification(r), _op_namespace_note
    ),
    "imports": SmokeCheck(
        lambda stage, modules: byo_smoke.smoke_code(stage.package, modules),
        lambda _, r: None,
        lambda r: None,
    ),
}


# Put after every smoke program (its result line stays the last other line; a program may start with
# `from __future__`): the process says which machine it ran as (platform.machine()), the proof
# that an aarch64 wheel's op ran as aarch64 (under QEMU here) and not as the host.
MACHINE_MARK = "wheelfactory-smoke-machine"
MACHINE_PROBE = f"\nimport platform as _wf_platform\nprint({MACHINE_MARK!r}, _wf_platform.machine(), flush=True)\n"


def smoke_machine(output: str) -> str | None:
    """The arch the smoke program said it ran as (a planner arch), or None if it said nothing."""
    for line in output.splitlines():
        mark, _, machine = line.strip().partition(" ")
        if mark == MACHINE_MARK and machine:
            return host_arch(machine)
    return None


def smoke_check(stage: Stage) -> SmokeCheck:
    if stage.kind.smoke is None:  # the runner never hands such a stage to an engine
        raise VariantBuildError(
            f"{stage.variant.id}: a {stage.kind.describe} project compiles nothing to smoke-test"
        )
    return SMOKES[stage.kind.smoke]


def smoke_code(stage: Stage, modules: tuple[str, ...] = ()) -> str:
    """The code of the stage's smoke program; ``modules``: the wheel's compiled modules (what a
    bring-your-own smoke imports)."""
    return smoke_check(stage).code(stage, modules)


def _program(name: str, request: dict[str, object]) -> str:
    """This folder's smoke program ``name`` with ``main(request)`` appended."""
    program = (Path(__file__).parent / name).read_text(encoding="utf-8")
    return f"{program}\n\nmain(json.loads({json.dumps(json.dumps(request))}))\n"


def warn(log: Path, text: str) -> None:
    """Something the user must see that does not fail the build: a ``# WARNING:`` line in the log
    now (the build's result lists it for the manifest entry's ``warnings``)."""
    note(log, f"WARNING: {text}")


class Said:
    """The warnings one build's step says, in order: each written to the log as it is said
    (``warn``), all of them found (``found``) for the step's result or its error."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self._said: list[str] = []

    def __call__(self, text: str) -> None:
        warn(self.log, text)
        self._said.append(text)

    @property
    def found(self) -> Findings:
        return Findings(warnings=tuple(self._said))


def verify_wheel(
    stage: Stage,
    wheel: Path,
    log: Path,
    *,
    smoke: Smoke,
    glibc_floor: str | None = None,
    error: type[VariantBuildError] = VariantBuildError,
    timeline: Timeline | None = None,
    run_tests: TestRun | None = None,
    torch_include: Path | None = None,
) -> Findings:
    """Run every check on one finished wheel; what they found (the project's tests, warnings), or
    ``error`` naming what failed, carrying what was found before.

    The wheel's own checks come first (fast; a broken wheel is never smoke-tested). Then the
    checks that run tools on the wheel (abi3audit, cuobjdump) and the smoke test run at the same
    time: both only read the wheel. The tools write their own log, appended after the smoke's.
    ``torch_include``: the build's torch headers, where a stable-ABI wheel's imports are checked
    against the shims they declare (verify/stable_symbols.py)."""
    timeline = timeline or Timeline(log)
    said = Said(log)
    try:
        for warning in stage.checks.coverage_warnings:
            said(warning)
        with timeline.phase("verify"):
            libs, device_code = _wheel_checks(
                stage, wheel, log, said, glibc_floor, torch_include, error
            )
        output = _tools_and_smoke(stage, wheel, log, smoke, timeline, libs, device_code, error)
        _smoke_verdict(stage, log, output, error)
        tests = stage.checks.tests_for(stage.variant.id)
        if tests is None:
            return said.found
        if run_tests is None:
            raise error(
                f"{stage.variant.id}: {tests.declared_in} [test] is set, and this engine cannot "
                "run tests"
            )
        record = run_project_tests(stage, tests, wheel, log, run_tests, timeline, error)
    except VariantBuildError as exc:
        exc.add_earlier(said.found)
        raise
    return said.found.then(Findings(tests=record))


def _wheel_checks(
    stage: Stage,
    wheel: Path,
    log: Path,
    said: Callable[[str], None],
    glibc_floor: str | None,
    torch_include: Path | None,
    error: type[VariantBuildError],
) -> tuple[dict[str, bytes], bool]:
    """The wheel's own checks (tags, record, layout, glibc, machine, stable ABI); its libraries,
    and whether cuobjdump has device code to read in them."""
    variant = stage.variant
    problems = check_wheel(
        wheel,
        package=stage.package,
        abi3=variant.key.python == "abi3",
        native=stage.kind.factory_layout,
        glibc_floor=glibc_floor,
        abi3_fix=stage.build_system.abi3_fix(),
    )
    # read once: the device-code check, the smoke's module list, cuobjdump
    libs = libraries(wheel)
    problems += elf_machine_problems(libs, variant.key.arch)
    # a stable-ABI variant's target, or the one a project's own build files declare
    target = (
        variant.key.torch if variant.key.stable_abi else declared_stable_target(stage.source_root)
    )
    if target is not None and torch_include is not None:
        shims = shim_versions(torch_include)
        outside = stable_abi_problems(libs, shims, target)
        problems += outside
        if not outside:
            note(
                log,
                f"stable ABI {target}: the libraries import only torch's C shim at or below it "
                f"({len(shims)} shims declared in {torch_include}) and the C/C++, Python and CUDA runtimes",
            )
    host_only = (
        cuda_binary.missing_device_code(variant.key.backend.kind, libs)
        if stage.kind.own_arch_flags
        else None
    )
    if host_only:  # a CPU-only fallback is the project's own build's choice: said, not failed
        said(host_only)
    note(log, f"wheel size: {wheel.stat().st_size / 1e6:.1f} MB")
    if problems:
        raise error(f"{variant.id}: the wheel failed verification: {'; '.join(problems)}")
    return libs, variant.key.backend.kind == "cuda" and not host_only


def _tools_and_smoke(
    stage: Stage,
    wheel: Path,
    log: Path,
    smoke: Smoke,
    timeline: Timeline,
    libs: dict[str, bytes],
    cuda: bool,
    error: type[VariantBuildError],
) -> str:
    """abi3audit and cuobjdump beside the smoke test; the smoke's output, or ``error`` naming
    what failed (the tools' verdict first)."""
    variant = stage.variant
    abi3 = variant.key.python == "abi3"
    tools_log = log.with_name(log.name + ".tools")
    tools_log.unlink(missing_ok=True)

    def tool_checks() -> list[str]:
        with timeline.phase("audit"):
            if abi3:
                abi3audit(wheel, tools_log)
            return (
                cuda_problems(variant, wheel, tools_log, libs, own_archs=stage.kind.own_arch_flags)
                if cuda
                else []
            )

    check = smoke_check(stage)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="wheelfactory-audit") as pool:
        audit = pool.submit(tool_checks) if abi3 or cuda else None
        smoke_failure: BaseException | None = None
        output = ""
        try:
            with timeline.phase("smoke"):
                output = smoke(
                    check.code(stage, byo_smoke.extension_modules(libs)) + MACHINE_PROBE, log
                )
        except BaseException as exc:  # the audit's verdict comes first: wait for it
            smoke_failure = exc
        tool_problems: list[str] = []
        if audit is not None:
            try:
                tool_problems = audit.result()
            finally:
                _append(log, tools_log)
    if tool_problems:
        raise error(f"{variant.id}: the wheel failed verification: {'; '.join(tool_problems)}")
    # its message is the whole smoke program: say what it died of
    if isinstance(smoke_failure, CommandFailed):
        where = f" (the whole output: {smoke_failure.log})" if smoke_failure.log else ""
        raise error(
            f"{variant.id}: the smoke test failed: {died_of(smoke_failure.tail)}{where}"
        ) from None
    if smoke_failure is not None:
        raise smoke_failure
    return output


def _smoke_verdict(stage: Stage, log: Path, output: str, error: type[VariantBuildError]) -> None:
    """What the smoke program said: the arch it ran as, and its own check of the wheel."""
    variant = stage.variant
    ran_as = smoke_machine(output)
    if ran_as != variant.key.arch:  # an emulator that ran nothing, or the host's arch in its place
        raise error(
            f"{variant.id}: the smoke test ran as {ran_as or 'an unknown machine'}, not {variant.key.arch}"
        )
    note(log, f"smoke: ran as {ran_as}")
    result = json.loads(
        [line for line in output.strip().splitlines() if not line.startswith(MACHINE_MARK)][-1]
    )
    check = smoke_check(stage)
    failure = check.failure(stage, result)
    if failure:
        raise error(f"{variant.id}: {failure}")
    said = check.note(result)
    if said:
        note(log, said)


# A traceback's frame: where the exception was raised, as ``File "x.py", line 9, in <module>``.
_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+)')
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b")


def died_of(output: str) -> str:
    """What a failed Python program died of, from its output's tail: the last traceback's exception
    line and the frame that raised it (``ModuleNotFoundError: No module named 'packaging' (at
    /tmp/smoke/pkg/__init__.py:9)``); else an exception line alone; else the last line said."""
    lines = [line.rstrip() for line in output.splitlines() if line.strip()]
    starts = [
        index
        for index, line in enumerate(lines)
        if line.startswith("Traceback (most recent call last)")
    ]
    if starts:
        block = lines[starts[-1] + 1 :]
        frames = [index for index, line in enumerate(block) if _FRAME.match(line)]
        after = block[frames[-1] + 1 :] if frames else block
        raised = next((line for line in after if not line[0].isspace()), None)
        if raised is not None:
            frame = _FRAME.match(block[frames[-1]]) if frames else None
            return f"{raised} (at {frame['file']}:{frame['line']})" if frame else raised
    said = [line.strip() for line in lines if _EXCEPTION.match(line.strip())]
    if said:
        return said[-1]
    return lines[-1].strip() if lines else "it printed nothing"


def _append(log: Path, part: Path) -> None:
    try:
        text = part.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return
    with log.open("a", encoding="utf-8") as sink:
        sink.write(text)
    part.unlink(missing_ok=True)


def abi3audit(wheel: Path, log: Path) -> bool:
    """``abi3audit --strict`` on the wheel (raises CommandFailed on a violation); False, with a
    note in the log, where abi3audit is not installed for the factory's interpreter."""
    if importlib.util.find_spec("abi3audit") is None:
        note(
            log,
            f"abi3audit: NOT RUN: abi3audit is not installed for {sys.executable} "
            "(pip install abi3audit, a dependency of wheelfactory)",
        )
        return False
    run([sys.executable, "-m", "abi3audit", "--strict", "--report", str(wheel)], log=log)
    return True


def cuda_problems(
    variant: Variant,
    wheel: Path,
    log: Path,
    libs: dict[str, bytes] | None = None,
    *,
    own_archs: bool = False,
) -> list[str]:
    """Every CUDA library in the wheel holds exactly the requested SASS, plus PTX for +PTX archs.
    ``libs``: the wheel's libraries when the caller has read them already. ``own_archs``: the
    project passes its own arch flags (a bring-your-own setup.py's -gencode wins over
    TORCH_CUDA_ARCH_LIST): a mismatch then says which setting of the plan would match them."""
    wanted = cuda_binary.expected(variant.shipped_arch_list)
    found_libs = libs or libraries(wheel)
    found = {
        name: cuda_binary.contents(data, log=log)
        for name, data in found_libs.items()
        if cuda_binary.device_code(data).cuda
    }  # cuobjdump fails on a host-only library
    device = {name: f for name, f in found.items() if f.sass or f.ptx}  # not host-only libraries
    if not device:
        return ["no library in the wheel holds CUDA device code"]
    out = []
    for name, contents in device.items():
        note(log, f"cuobjdump {name}: {contents.describe()} (asked: {wanted.describe()})")
        stored, unpacked = fatbin.device_code_sizes(found_libs[name])
        if unpacked > stored:
            note(
                log,
                f"device code {name}: {stored} bytes, {unpacked} unpacked ({unpacked - stored} saved by "
                "nvcc's fat binary compression)",
            )
        mismatch = cuda_binary.problems(contents, wanted, exact_ptx=bool(variant.key.gpu))
        if mismatch and own_archs:
            mismatch[-1] += (
                f" (the project's own arch flags decide what it compiles: set [cuda] arch_list = "
                f'"{contents.arch_list()}" in matrix.toml to plan what it builds, or drop the '
                "project's -gencode/-arch flags so that TORCH_CUDA_ARCH_LIST applies)"
            )
        out += [f"{name}: {p}" for p in mismatch]
    return out


def libraries(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as archive:
        return {n: archive.read(n) for n in archive.namelist() if is_shared_library(n)}
