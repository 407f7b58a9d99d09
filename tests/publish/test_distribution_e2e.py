"""The release story end to end: wheels built in Docker, indexed, served over real HTTP on
127.0.0.1, installed by real pip into fresh venvs with different torch releases; the selector;
hash-pinned installs; the Hugging Face export through the real `kernels` package; and a torch
changed under an installed wheel (jit with a compiler, reference without one, never a crash).

Venvs with only torch are made once per cache (torch 2.6 from the docker tests' wheelhouse, torch
2.13 from the configured index) and each test installs into a hard-linked copy of one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.docker.docker_helpers import (
    TORCHES,
    check,
    fresh_venv,
    installed,
    run,
    torch_wheels,
    uv_install,
)
from tests.testkit import pip_install

pytestmark = [pytest.mark.docker, pytest.mark.slow]
TORCH_VENVS = True  # it installs into docker_helpers.pristine_venv's torch venvs (tests/docker_tier.py)


@pytest.fixture(scope="module")
def index_url(docker_build: Path) -> Iterator[str]:
    dist = docker_build / "dist"
    run([sys.executable, "-m", "wheelfactory", "index", "-o", str(dist)])
    server = subprocess.Popen([sys.executable, "-m", "wheelfactory", "serve", "-o", str(dist), "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        found = re.search(r"at (http://127\.0\.0\.1:\d+)/", server.stdout.readline())  # type: ignore[union-attr]
        assert found, "serve printed no URL"
        yield found.group(1)
    finally:
        server.terminate()
        server.communicate(timeout=30)


@pytest.mark.parametrize("variant", sorted(TORCHES))
def test_pip_installs_the_variant_from_its_index_and_it_loads_prebuilt(index_url: str, variant: str,
                                                                       tmp_path: Path) -> None:
    venv = fresh_venv(TORCHES[variant], tmp_path / "venv")
    pip_install(venv / "bin" / "python", "--index-url", f"{index_url}/{variant}/simple", "fusedops")
    result = check(venv)
    assert result["mode"] == "prebuilt" and result["variant"] == variant and not result["warnings"], result


@pytest.mark.parametrize("variant", sorted(TORCHES))
def test_the_selector_names_the_variant_of_each_environment(index_url: str, variant: str, tmp_path: Path) -> None:
    venv = fresh_venv(TORCHES[variant], tmp_path / "venv")
    shown = run([sys.executable, "-m", "wheelfactory", "which", "--python", str(venv / "bin" / "python"),
                 "--index", index_url]).stdout
    assert f"pip install --index-url {index_url}/{variant}/simple fusedops" in shown
    served = subprocess.run(["curl", "-fsS", f"{index_url}/select.py"], capture_output=True, check=True).stdout
    quiet = run([str(venv / "bin" / "python"), "-", "--quiet"], input=served.decode()).stdout.strip()
    assert quiet == f"{index_url}/{variant}/simple"


def test_require_hashes_install_with_the_index_hashes(index_url: str, tmp_path: Path) -> None:
    variant = "torch213-cxx11-cpu-x86_64-linux"
    venv = fresh_venv(TORCHES[variant], tmp_path / "venv")
    pip_install(venv / "bin" / "python", "--require-hashes", "--no-deps", "--index-url",
                f"{index_url}/{variant}/simple", "-r", f"{index_url}/{variant}/requirements.txt")
    assert check(venv)["mode"] == "prebuilt"
    pinned = (tmp_path / "wrong.txt")
    text = subprocess.run(["curl", "-fsS", f"{index_url}/{variant}/requirements.txt"], capture_output=True,
                          text=True, check=True).stdout
    pinned.write_text(re.sub(r"sha256:[0-9a-f]{64}", "sha256:" + "0" * 64, text))
    refused = pip_install(venv / "bin" / "python", "--force-reinstall", "--require-hashes", "--no-deps",
                          "--index-url", f"{index_url}/{variant}/simple", "-r", str(pinned), check=False, timeout=600)
    assert refused.returncode != 0 and "DO NOT MATCH THE HASHES" in refused.stdout + refused.stderr


def test_changing_torch_under_an_installed_wheel_jits_then_falls_back(index_url: str, tmp_path: Path) -> None:
    """Install the torch 2.6 wheel with torch 2.6, then upgrade torch to 2.13 in that venv: the
    wheel's runtime compiles its sources for the new torch (mode jit, correct results); with no
    compiler on PATH it runs the reference ops with one warning. Never an undefined-symbol crash."""
    venv = fresh_venv("2.6.0", tmp_path / "venv")
    python = venv / "bin" / "python"
    pip_install(python, "--index-url", f"{index_url}/torch26-cxx98-cpu-x86_64-linux/simple", "fusedops")
    assert check(venv)["mode"] == "prebuilt"
    pip_install(python, "-q", "--no-index", "--find-links", str(torch_wheels("2.13.0")), "torch==2.13.0")
    cache = {"FUSEDOPS_CACHE_DIR": str(tmp_path / "jit-cache")}
    jit = check(venv, cache)
    assert jit["torch"].startswith("2.13") and jit["mode"] == "jit" and not jit["warnings"], jit
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python").symlink_to(venv / "bin" / "python")
    no_compiler = {"PATH": str(bare), "FUSEDOPS_CACHE_DIR": str(tmp_path / "empty-cache")}
    reference = check(venv, no_compiler)
    assert reference["mode"] == "reference" and len(reference["warnings"]) == 1, reference  # type: ignore[arg-type]


def test_hf_layout_export_loads_through_the_kernels_package(docker_build: Path, tmp_path: Path) -> None:
    """These wheels are built on Debian bookworm (GCC 12, glibc 2.36): the Hub's checker
    (kernel-abi-check) refuses their libraries (libstdc++'s __libc_single_threaded needs GLIBC_2.32,
    beyond manylinux_2_28), so a plain export exits 7 and writes no variant. With --skip-abi-check the
    real `kernels` loader picks this interpreter's variant (torch 2.13, cxx11, cpu) from the export,
    imports it under its op namespace, and the op matches the reference."""
    layout = tmp_path / "hf"
    export = [sys.executable, "-m", "wheelfactory", "export", "-o", str(docker_build / "dist"),
              "--hf-layout", str(layout)]
    plain = {k: v for k, v in os.environ.items() if k != "FORCE_COLOR"}  # piped: one line per refusal, no ANSI
    refused = subprocess.run(export, capture_output=True, text=True, timeout=1800, check=False, env=plain)
    output = refused.stdout + refused.stderr
    assert refused.returncode == 7, output
    for variant in TORCHES:
        prefix = f"refused {variant}: fails kernel-abi-check: "
        (line,) = [text for text in refused.stdout.splitlines() if text.startswith(prefix)]
        assert "__libc_single_threaded" in line or "GLIBC_2.3" in line, line
    assert "variant(s) refused" in refused.stderr and "Traceback" not in output, output
    assert not (layout / "build").exists() or not list((layout / "build").iterdir())  # no variant, no temp dir
    forced = run([*export, "--skip-abi-check"])
    assert "--skip-abi-check" in forced.stderr and "refused" not in forced.stdout, forced.stdout + forced.stderr
    assert sorted(p.name for p in (layout / "build").iterdir()) == sorted(TORCHES)
    code = (
        "import json, torch; from pathlib import Path; from kernels import get_local_kernel\n"
        f"m = get_local_kernel(Path({str(layout)!r}), backend='cpu')\n"
        "x = torch.randn(5, 66)\n"
        "torch.testing.assert_close(m.silu_and_mul(x), torch.nn.functional.silu(x[:, :33]) * x[:, 33:])\n"
        "print(json.dumps({'module': m.__name__, **{k: m.backend_info()[k] for k in ('mode', 'variant')}}))\n")
    result = run([sys.executable, "-c", code], env={**os.environ, "HF_HUB_OFFLINE": "1"}, cwd=tmp_path)
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    metadata = json.loads((layout / "build" / "torch213-cxx11-cpu-x86_64-linux" / "metadata.json").read_text())
    assert loaded == {"module": metadata["id"], "mode": "prebuilt", "variant": "torch213-cxx11-cpu-x86_64-linux"}


def test_variantlib_accepts_the_variant_wheels_the_index_publishes(index_url: str, docker_build: Path,
                                                                    tmp_path: Path) -> None:
    """The real consumer of wheel-variant metadata, variantlib (the reference implementation),
    over the labelled wheels of the Docker-built variants (on a copy: generate-index-json writes)."""
    served = docker_build / "dist" / "index" / "variants" / "simple" / "fusedops"
    wheels = sorted(served.glob("*.whl"))
    assert wheels, f"no labelled wheels under {served}"
    variantlib = str(Path(sys.executable).parent / "variantlib")
    for wheel in wheels:
        shutil.copy2(wheel, tmp_path / wheel.name)
        analyzed = subprocess.run([variantlib, "analyze-wheel", "-i", str(wheel)], capture_output=True, text=True,
                                  timeout=300, check=False)
        assert analyzed.returncode == 0, analyzed.stdout + analyzed.stderr
    generated = subprocess.run([variantlib, "generate-index-json", "-d", str(tmp_path)], capture_output=True,
                               text=True, timeout=300, check=False)
    assert generated.returncode == 0 and "WARNING" not in generated.stderr and "ERROR" not in generated.stderr, \
        generated.stderr
    written = json.loads(next(tmp_path.glob("fusedops-*-variants.json")).read_text())
    assert sorted(written["variants"]) == sorted({w.name[:-len(".whl")].rsplit("-", 1)[1] for w in wheels})


def listing(index_url: str) -> dict[str, dict[str, object]]:
    from urllib.request import urlopen

    with urlopen(f"{index_url}/index.json", timeout=60) as answer:
        return {entry["id"]: entry for entry in json.load(answer)["variants"]}


@pytest.mark.parametrize("variant", sorted(TORCHES))
def test_uv_installs_what_pip_installs_from_the_index_the_find_links_page_and_hash_pinned(
        index_url: str, variant: str, tmp_path: Path) -> None:
    """The same picks as pip, by uv: from the variant's PEP 503 index, from its find-links page (only
    that page: --no-index), and with --require-hashes from the index's requirements.txt; each loads
    prebuilt as this variant. A wrong hash is refused."""
    from urllib.request import urlopen

    by_pip = fresh_venv(TORCHES[variant], tmp_path / "pip")
    pip_install(by_pip / "bin" / "python", "--index-url", f"{index_url}/{variant}/simple", "fusedops")
    expected = installed(by_pip)
    entry = listing(index_url)[variant]
    with urlopen(f"{index_url}/{entry['requirements']}", timeout=60) as answer:
        pinned = tmp_path / "requirements.txt"
        pinned.write_bytes(answer.read())
    cache = tmp_path / "uv-cache"
    ways = {
        "index": ("--index-url", f"{index_url}/{variant}/simple", "fusedops"),
        "find-links": ("--no-index", "--find-links", f"{index_url}/{entry['find_links']}", "fusedops"),
        "hash-pinned": ("--require-hashes", "--no-deps", "--index-url", f"{index_url}/{variant}/simple",
                        "-r", str(pinned)),
    }
    for way, args in ways.items():
        venv = fresh_venv(TORCHES[variant], tmp_path / way)
        uv_install(venv, cache, *args)
        assert installed(venv) == expected, way
        result = check(venv)
        assert result["mode"] == "prebuilt" and result["variant"] == variant and not result["warnings"], (way, result)
    wrong = tmp_path / "wrong.txt"
    wrong.write_text(re.sub(r"sha256:[0-9a-f]{64}", "sha256:" + "0" * 64, pinned.read_text()))
    venv = fresh_venv(TORCHES[variant], tmp_path / "wrong-hash")
    refused = uv_install(venv, tmp_path / "uv-cache-2", "--require-hashes", "--no-deps", "--index-url",
                         f"{index_url}/{variant}/simple", "-r", str(wrong), check=False)
    assert refused.returncode != 0 and "hash" in (refused.stdout + refused.stderr).lower(), refused.stderr


def test_each_served_wheel_has_its_provenance_record_beside_it(index_url: str) -> None:
    """The index lists an in-toto statement per wheel, served beside it, whose subject is the
    served wheel's sha256 and whose predicate names the build image and the torch wheel it used."""
    import hashlib
    from urllib.request import urlopen

    for variant in TORCHES:
        entry = listing(index_url)[variant]
        assert entry["provenance"], entry
        with urlopen(f"{index_url}/{entry['wheel']}", timeout=120) as answer:
            digest = hashlib.sha256(answer.read()).hexdigest()
        with urlopen(f"{index_url}/{entry['provenance']}", timeout=60) as answer:
            statement = json.load(answer)
        assert statement["subject"] == [{"name": Path(str(entry["wheel"])).name, "digest": {"sha256": digest}}]
        definition = statement["predicate"]["buildDefinition"]
        assert definition["externalParameters"]["variant"]["id"] == variant
        names = [d["name"] for d in definition["resolvedDependencies"]]
        assert "image" in names and any(n.startswith(f"torch-{TORCHES[variant]}") for n in names), names
        tools = statement["predicate"]["runDetails"]["builder"]["version"]
        assert {"wheelfactory", "cibuildwheel", "auditwheel", "setuptools", "torch"} <= set(tools), tools
