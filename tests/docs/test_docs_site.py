"""The docs: README.md stays a front door (at most 200 lines, every relative link resolves, its
transcript is what the scaffold plans), and the mkdocs site in docs/ builds in strict mode, where a
broken link, an unknown anchor or a page left out of the nav fails the build (each planted in a copy,
so that the check is seen to fail). Most pages' claims are checked where the code is tested:
tests/test_public_api.py (api.md, the exit codes), tests/test_readme_kernel_library.py
(reference/kernel-toml.md), tests/plan/test_torch_pin.py (reference/matrix.md),
tests/test_readme_release_matrix.py (the two commands)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from tests.testkit import REPO, docs_text, markdown_section
from wheelfactory import load_plan
from wheelfactory.project.scaffold import plan_scaffold, write_scaffold

README = (REPO / "README.md").read_text()
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")  # [text](target)


def prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code spans, whose brackets are not links."""
    text = re.sub(r"^ *```.*?^ *```", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def mkdocs_build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=root, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture
def site_copy(tmp_path: Path) -> Path:
    root = tmp_path / "copy"
    root.mkdir()
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copytree(REPO / "docs", root / "docs")
    return root


# --- the site ---------------------------------------------------------------------------------


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    result = mkdocs_build(REPO, tmp_path / "site")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "reference" / "matrix" / "index.html").is_file()


@pytest.mark.parametrize("planted, message", [
    ("[a broken link](no-such-page.md)", "no-such-page.md"),
    ("[an unknown anchor](commands.md#no-such-section)", "no-such-section"),
])
def test_a_broken_link_or_anchor_fails_the_build(site_copy: Path, tmp_path: Path, planted: str,
                                                  message: str) -> None:
    page = site_copy / "docs" / "index.md"
    page.write_text(page.read_text() + f"\n{planted}\n")
    result = mkdocs_build(site_copy, tmp_path / "site")
    assert result.returncode != 0 and message in result.stderr, result.stderr


def test_a_page_left_out_of_the_nav_fails_the_build(site_copy: Path, tmp_path: Path) -> None:
    (site_copy / "docs" / "orphan.md").write_text("# Not in the nav\n")
    result = mkdocs_build(site_copy, tmp_path / "site")
    assert result.returncode != 0 and "orphan.md" in result.stderr, result.stderr


def test_ci_builds_the_site_in_strict_mode() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    assert re.search(r"^\.venv/bin/python -m mkdocs build --strict ", ci, re.M)
    # README: mkdocs comes with the test extra, which .ci/run installs
    assert re.search(r'^ *"mkdocs>=1\.6",', (REPO / "pyproject.toml").read_text(), re.M)
    assert "pip install -e '.[test]'" in README and "pip install -q -e '.[test]'" in ci


# --- README.md --------------------------------------------------------------------------------


def test_readme_is_a_front_door_of_at_most_200_lines() -> None:
    assert len(README.splitlines()) <= 200


def test_every_relative_link_in_the_readme_is_a_file_of_the_checkout() -> None:
    targets = [t for t in LINK.findall(prose(README)) if "://" not in t and not t.startswith("#")]
    assert len(targets) >= 10  # the links to the docs pages are found
    missing = [t for t in targets if not (REPO / t.split("#", 1)[0]).is_file()]
    assert not missing, missing


def test_readme_links_into_the_docs_name_anchors_the_pages_have(tmp_path: Path) -> None:
    """An anchor in a README link to a docs page is one mkdocs gives that page's headings."""
    result = mkdocs_build(REPO, tmp_path / "site")
    assert result.returncode == 0, result.stderr
    anchored = [t for t in LINK.findall(prose(README)) if t.startswith("docs/") and "#" in t]
    assert anchored
    for target in anchored:
        page, anchor = target.removeprefix("docs/").split("#", 1)
        html = tmp_path / "site" / (page.removesuffix(".md").removesuffix("index")) / "index.html"
        assert f'id="{anchor}"' in html.read_text(), target


def test_the_readme_keeps_the_command_ci_runs() -> None:
    """.ci/run runs README's test command ("The two commands", command 2) as README writes it."""
    commands = re.findall(r"```bash\n(.*?)```", markdown_section(README, "## The two commands"), re.S)
    assert len(commands) == 2 and commands[1].strip() == "python -m pytest -q"
    assert '# README.md, "The two commands", command 2:\npython -m pytest -q\n' in (REPO / ".ci" / "run").read_text()
    # CONTRIBUTING.md says more of the same two commands
    described = re.findall(r"```bash\n(.*?)```",
                           markdown_section((REPO / "CONTRIBUTING.md").read_text(), "## The two commands"), re.S)
    assert [c.strip() for c in described] == [c.strip() for c in commands]


def test_the_python_the_readme_names_is_the_one_the_project_requires() -> None:
    requires = re.search(r'^requires-python = ">=(\d+\.\d+)"', (REPO / "pyproject.toml").read_text(), re.M)
    assert requires and f"(Python {requires.group(1)} or newer)" in README


def test_the_readmes_transcript_is_what_the_scaffold_plans(tmp_path: Path) -> None:
    transcript = markdown_section(README, "## A kernel author's path: `new` -> `plan` -> `build` -> `index` / `serve`")
    project = write_scaffold(plan_scaffold("mykernels"), tmp_path / "mykernels")
    (tmp_path / "typed").mkdir()
    plan = load_plan(project / "matrix.toml")
    counts = re.search(r"^(\d+) variant\(s\), (\d+) pruned combination\(s\)", transcript, re.M)
    assert counts and (int(counts.group(1)), int(counts.group(2))) == (len(plan.variants), len(plan.pruned))
    rows = re.findall(r"^│ (\S+) +│ (\S+) +│ (\S+) +│ (\S+) +│ (\S+) +│ (\S+) +│", transcript, re.M)
    assert len(rows) >= 4
    planned = {v.id: v for v in plan.variants}
    for variant_id, torch, build, abi, python, local in rows:
        variant = planned[variant_id]
        assert (variant.backend.build_name, "+" + variant.local_version) == (build, local)
    # no machine's own paths: a reader's differ (trimmed ones show as .../)
    assert not re.findall(r"(?<![.\w])/(?:tmp|home|work|root|usr|opt)/", transcript), "an absolute path in the transcript"
    first = transcript.split("$ wheelfactory new mykernels\n", 1)[1].splitlines()[0]
    said = subprocess.run([sys.executable, "-m", "wheelfactory", "new", "mykernels"], cwd=tmp_path / "typed",
                          capture_output=True, text=True, timeout=120, check=True).stdout.strip()
    assert first == said, (first, said)  # what `new` prints on a machine with torch 2.13 CPU, as CI's
    built = re.search(r"built \((mykernels-[^)]+\.whl)\)", transcript)
    assert built and built.group(1).startswith(f"mykernels-0.1.0+{planned['torch213-cxx11-cpu-x86_64-linux'].local_version}-cp39-abi3-")


# --- what the pages say of the command line and the checkout ----------------------------------


def cli_commands() -> set[str]:
    from wheelfactory.cli.main import cli

    def leaves(group: click.Group, prefix: str) -> set[str]:
        found: set[str] = set()
        for name, command in group.commands.items():
            found |= leaves(command, f"{prefix}{name} ") if isinstance(command, click.Group) else {prefix + name}
        return found

    return leaves(cli, "")


def test_the_commands_page_lists_every_command_and_no_other() -> None:
    table = markdown_section(docs_text("commands.md"), "# Commands")
    documented: set[str] = set()
    for line in table.splitlines():
        first = line.split("|")[1] if line.startswith("| `wheelfactory") else ""
        names = re.findall(r"`([^`]+)`", first)
        if names:
            documented.add(names[0].removeprefix("wheelfactory "))
            documented |= set(names[1:])
    assert documented == cli_commands()


def test_the_layout_names_the_folders_of_the_checkout() -> None:
    block = markdown_section(docs_text("architecture.md"), "## Layout").split("```\n", 2)[1]
    top = "factory/wheelfactory/"
    named = 0
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip())
        if indent in (0, 2) and line.strip():  # a name (at the top, or under factory/wheelfactory/)
            name = line.split()[0]
            assert (REPO / name if indent == 0 else REPO / top / name).exists(), line
            named += 1
    assert named >= 15
    for link, target in (("_docker", "docker"), ("_runtime", "runtime")):  # README's Architecture line
        assert (REPO / top / link).resolve() == (REPO / target).resolve()
    assert "the source is `factory/wheelfactory/`" in README


def test_no_page_indents_a_code_fence() -> None:
    """mkdocs' Markdown renders a fence indented into a list item as plain text: keep fences at the margin."""
    indented = [f"{page.relative_to(REPO)}:{number}" for page in sorted((REPO / "docs").rglob("*.md"))
                for number, line in enumerate(page.read_text().splitlines(), start=1)
                if line.startswith(" ") and line.lstrip().startswith("```")]
    assert not indented, indented
