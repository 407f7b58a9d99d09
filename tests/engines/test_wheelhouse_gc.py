"""`wheelfactory gc` and the wheel sets: a set no build used lately goes, and with it the stored
wheels no other set holds; a set in use, and wheels shared with one, stay."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from wheelfactory.engines.wheelhouse import ContainerPython, Wheelhouse, WheelhouseRequest

# Stands in for `python -m pip download --dest DIR ... REQ...`: one wheel per requirement, and
# every set also gets the same `common` dependency (as torch's sets share nvidia-* wheels); and for
# `python -m pip config list` (no configuration).
FAKE_PIP = """#!{python}
import sys, zipfile
args = sys.argv[1:]
if args[2:4] == ["config", "list"]:
    sys.exit(0)
dest = args[args.index("--dest") + 1]
last_option = max(i for i, a in enumerate(args) if a == "--platform")  # requirements follow the options
for name in args[last_option + 2:] + ["common"]:
    with zipfile.ZipFile(f"{{dest}}/{{name}}-1.0-py3-none-any.whl", "w") as wheel:
        # fixed times: the same release downloaded again is the same bytes, as on an index
        wheel.writestr(zipfile.ZipInfo(f"{{name}}-1.0.dist-info/METADATA", (1980, 1, 1, 0, 0, 0)),
                       f"Metadata-Version: 2.1\\nName: {{name}}\\nVersion: 1.0\\n")
        wheel.writestr(zipfile.ZipInfo(f"{{name}}/payload.bin", (1980, 1, 1, 0, 0, 0)),
                       b"x" * 50_000 if name != "common" else b"c")  # stored: 50 kB
"""


@pytest.fixture
def fake_python(tmp_path: Path) -> str:
    path = tmp_path / "python"
    path.write_text(FAKE_PIP.format(python=sys.executable))
    path.chmod(0o755)
    return str(path)


def request(*requirements: str) -> WheelhouseRequest:
    return WheelhouseRequest(requirements, (), ContainerPython("3.11"))


def age(path: Path, days: float) -> None:
    then = time.time() - days * 86400
    os.utime(path, (then, then))


def test_gc_removes_unused_sets_and_only_the_wheels_no_other_set_holds(tmp_path: Path, fake_python: str) -> None:
    house = Wheelhouse(tmp_path / "wh")
    old = house.ensure(request("alpha"), python=fake_python)
    fresh = house.ensure(request("beta"), python=fake_python)
    assert old.downloaded and fresh.downloaded
    age(old.path / "wheelhouse.json", 8)
    killed_set = house.sets / ".deadbeef.123.partial"
    killed_download = house.root / "tmp" / "deadbeef.123.partial"
    live_download = house.root / "tmp" / "cafe.456.partial"
    for path in (killed_set, killed_download, live_download):
        path.mkdir(parents=True)
    age(killed_set, 1)
    age(killed_download, 1)
    (house.sets / "someone-elses").mkdir()  # no wheelhouse.json: not ours, kept

    dry = house.collect_garbage(unused_for_s=7 * 86400, dry_run=True)
    assert {r.path for r in dry} == {old.path, killed_set, killed_download} and old.path.exists()
    removed = house.collect_garbage(unused_for_s=7 * 86400)
    assert {r.path for r in removed} == {old.path, killed_set, killed_download}
    freed = next(r.bytes for r in removed if r.path == old.path)
    alpha = next(name for name, _ in old.wheels if name.startswith("alpha"))
    assert freed >= 40_000  # alpha's wheel (compressed), never the shared one's
    assert not old.path.exists() and not (house.store / alpha).exists()
    assert sorted(p.name for p in house.store.iterdir()) == ["beta-1.0-py3-none-any.whl", "common-1.0-py3-none-any.whl"]
    assert (house.store / "common-1.0-py3-none-any.whl").exists()  # beta's set still holds it
    assert live_download.exists() and (house.sets / "someone-elses").exists()
    assert house.ensure(request("beta"), python=fake_python).downloaded is False

    again = house.ensure(request("alpha"), python=fake_python)  # a build that needs it fetches it again
    assert again.downloaded and again.wheels == old.wheels


def test_a_reused_set_counts_as_used(tmp_path: Path, fake_python: str) -> None:
    house = Wheelhouse(tmp_path / "wh")
    made = house.ensure(request("alpha"), python=fake_python)
    age(made.path / "wheelhouse.json", 8)
    assert house.ensure(request("alpha"), python=fake_python).downloaded is False  # refreshes the mark
    assert house.collect_garbage(unused_for_s=7 * 86400) == []
    assert house.collect_garbage(unused_for_s=0, now=time.time() + 1)[0].path == made.path


def test_the_gc_command_collects_wheel_sets_beside_environments(tmp_path: Path, fake_python: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from tests.testkit import run_cli

    house = Wheelhouse(tmp_path / "wh")
    made = house.ensure(request("alpha"), python=fake_python)
    options = ["--wheelhouse", str(house.root), "-m", str(tmp_path / "absent.toml")]
    assert run_cli("gc", *options) == 0  # used just now: kept
    assert "0 prepared environment(s), 0 wheel set(s)" in capsys.readouterr().out and made.path.exists()
    assert run_cli("gc", *options, "--unused-days", "0") == 0
    out = capsys.readouterr().out
    assert f"removed {made.path}" in out and "1 wheel set(s)" in out, out
    assert not made.path.exists() and not list(house.store.iterdir())


def test_the_gc_command_collects_host_tool_environments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The host engine's tool environments (a project's build system installed with the host's
    pip) live beside the wheelhouse: one unused for the given days goes; a reused one stays."""
    from tests.testkit import run_cli
    from wheelfactory.support.host_env import COMPLETE, HostEnvRequest, ensure_host_env

    tools = tmp_path / "wh" / "host-tools"
    old, used = HostEnvRequest(("old-tool",)), HostEnvRequest(("used-tool",))
    for request in (old, used):
        (tools / request.key).mkdir(parents=True)
        (tools / request.key / COMPLETE).write_text("")
        os.utime(tools / request.key / COMPLETE, (time.time() - 30 * 86400,) * 2)
    assert ensure_host_env(tools, used) == tools / used.key  # reused: no install, and now its last use
    assert run_cli("gc", "--wheelhouse", str(tmp_path / "wh"), "-m", str(tmp_path / "absent.toml")) == 0
    out = capsys.readouterr().out
    assert f"removed {tools / old.key}" in out and "1 host tool environment(s)" in out, out
    assert not (tools / old.key).exists() and (tools / used.key).exists()
