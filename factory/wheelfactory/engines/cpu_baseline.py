"""Portable CPU code: a build's ``-march=native`` rewritten to the variant's CPU baseline.

A project that compiles with ``-march=native`` (DeepSpeed's and ColossalAI's CPU Adam, many
hand-written setup.py files) makes a wheel for the build machine's CPU: built on an AVX-512
machine, it dies with an illegal instruction on one without. A wheel is for every machine of its
platform tag, so the Docker engine puts shims of its own first on the build's PATH, named after
the compilers the build calls (as the compile cache's are, and in front of them): each rewrites
``-march=native`` (and ``-mcpu=native``) to the baseline of the variant's arch (``[build]
cpu_baseline``; x86-64-v2 and armv8-a by default) and ``-mtune=native`` to ``-mtune=generic``,
notes the flag and the unit in a file the engine reads after the build, then runs the compiler it
stands for. Units a project compiles on purpose for a higher level (``-mavx512f``, a Hub
kernel's AVX-512 unit it dispatches to at run time) are left as they are: only ``native`` names
the build machine.

Pure: from the settings to the shell script that makes the shims, and from the notes to what
the build log says.
"""

from __future__ import annotations

from collections.abc import Mapping

from wheelfactory.engines.compile_cache import ALWAYS, COMPILER_NAMES, NVCC_HOST
from wheelfactory.plan.build_config import DEFAULT_CPU_BASELINES

FLAG_SHIMS = "/tmp/wheelfactory-flags"  # inside the container, first on PATH
NOTES_MOUNT = "/wf-flags"  # mounted: the setup script, and the notes the shims write
SETUP = "flags-setup.sh"
NOTES = "native-flags.txt"
# where cibuildwheel's container has the project: units are named relative to it
PROJECT = "/project/"
# After the compile cache's COMPILER_NAMES (which names each compiler a build calls, resolved to
# what runs now: the cache's shim, or the compiler): a shim in front of each.
_SETUP = r"""set -e
{names}for pair in $resolved; do
  c="${{pair%%=*}}" real="${{pair#*=}}"
  case "$real" in {shims}/*) continue ;; esac
  cat > {shims}/"$c" <<EOF
#!/bin/sh
# wheelfactory: -march=native is the build machine's CPU; the wheel is for {baseline}
native=""
for a do
  shift
  case "\$a" in
    -march=native) native="\$a"; a="-march={baseline}" ;;
    -mcpu=native) native="\$a"; a="-mcpu={cpu}" ;;
    -mtune=native) native="\${{native:-\$a}}"; a="-mtune=generic" ;;
  esac
  set -- "\$@" "\$a"
done
if [ -n "\$native" ]; then
  unit=""
  for a do case "\$a" in *.c|*.cc|*.cpp|*.cxx|*.cu|*.C) unit="\$a" ;; esac; done
  printf '%s %s\n' "\$native" "\${{unit:-(a link)}}" >> {notes}
fi
exec "$real" "\$@"
EOF
  chmod +x {shims}/"$c"
done
"""


def baseline_for(arch: str, chosen: Mapping[str, str]) -> str:
    """The CPU baseline of ``arch``'s wheels: [build] cpu_baseline's, else the default."""
    return chosen.get(arch, DEFAULT_CPU_BASELINES.get(arch, ""))


def shims_script(
    baseline: str, *, shims: str = FLAG_SHIMS, notes: str = f"{NOTES_MOUNT}/{NOTES}"
) -> str:
    """The sh script that makes the flag shims (in ``shims``) in front of whatever each compiler
    name resolves to now (the compile cache's shims, or the compiler); they append to ``notes``."""
    names = COMPILER_NAMES.format(always=" ".join((*ALWAYS, *NVCC_HOST)), skip="", shims=shims)
    return _SETUP.format(names=names, shims=shims, baseline=baseline, cpu="generic", notes=notes)


def rewritten(notes: str, project: str = PROJECT) -> list[tuple[str, str]]:
    """(flag, unit) of each compile the shims rewrote, in order, each once; units named relative
    to ``project`` (where the build has the project's copy)."""
    seen: dict[tuple[str, str], None] = {}
    for line in notes.splitlines():
        flag, _, unit = line.strip().partition(" ")
        if flag:
            seen[(flag, unit.removeprefix(project))] = None
    return list(seen)


def refusal(note: str, baseline: str, failure: object) -> str:
    """The error of a build that failed once its -march=native was rewritten (``note``: what
    ``rewrite_note`` said): the project's code needs more than the baseline."""
    return (
        f"{note}, and code that needs more than {baseline} (intrinsics the project enables for the build "
        "machine's CPU) does not build for it: set [build] cpu_baseline to what the wheel may require "
        f"(x86-64-v4: AVX-512 machines only), or turn the project's own CPU detection off ({failure})"
    )


def rewrite_note(notes: str, baseline: str, project: str = PROJECT) -> str | None:
    """What the build log says of the rewritten flags; None when the build asked for none."""
    found = rewritten(notes, project)
    if not found:
        return None
    flags = sorted({flag for flag, _ in found})
    units = list(dict.fromkeys(unit for _, unit in found))
    shown = ", ".join(units[:4]) + (f" and {len(units) - 4} more" if len(units) > 4 else "")
    return (
        f"the project's build asks for {' and '.join(flags)} (the build machine's CPU) in {shown}: compiled "
        f"for {baseline} instead, the variant's CPU baseline ([build] cpu_baseline)"
    )
