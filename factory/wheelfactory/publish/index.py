"""Package indexes over the output directory, from dist/manifest.json.

``plan_index`` is pure given the manifest and the wheels' bytes: it decides every page and every
file. ``write_index`` publishes a plan as one *generation*: a directory under ``dist/.index/``
holding the pages and hard links to the wheels, which then becomes ``dist/index`` by an atomic
symlink swap. A reader (pip, a browser, ``wheelfactory serve``) sees the old index or the new
one, never a mix; a page never links a wheel that is not in its own generation (a rebuild that
replaces ``dist/<variant>/<wheel>`` leaves the indexed inode alone); the previous generation is
kept so that a download started from it completes.

Layout of a generation (URLs are relative to what ``wheelfactory serve`` serves)::

    index.html                              every variant, with its pip commands
    index.json                              the same for programs (``wheelfactory which``)
    <variant>/simple/index.html             PEP 503 root: the project
    <variant>/simple/<project>/index.html   PEP 503 page: the wheel, #sha256=, requires-python
    <variant>/simple/<project>/<wheel>      the wheel
    <variant>/simple/<project>/<wheel>.intoto.json   its provenance record, where the build wrote one
    <variant>/requirements.txt              name==version --hash=sha256:... (pip --require-hashes)
    whl/torch-<torch>+<backend>[-cxx98].html   find-links pages (PyG / mmcv style)
    variants/...                            wheel-variant metadata (factory/wheelfactory/publish/variant_metadata.py)
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shutil
import time
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.parser import HeaderParser
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename

from wheelfactory._runtime._errors import RecordError
from wheelfactory._runtime._record import load_record_json, partial_record, record_member
from wheelfactory.errors import ConfigError, IndexBuildError
from wheelfactory.plan.identity import InvalidVariantId, VariantId
from wheelfactory.project.keys import file_sha256
from wheelfactory.publish.which import InvalidListing, check_listing
from wheelfactory.runner import manifest
from wheelfactory.runner.provenance import SUFFIX as PROVENANCE_SUFFIX
from wheelfactory.runner.provenance import InvalidProvenance, provenance_path, read_provenance
from wheelfactory.support import paths
from wheelfactory.support.inputs import read_input
from wheelfactory.verify.wheel_identity import wheel_identity_problems

INDEX_LINK = "index"  # dist/index: the current generation (a symlink)
GENERATIONS = ".index"  # dist/.index/<generation>/
KEEP_GENERATIONS = 2  # the current one and the one before it (downloads in flight)
DIGEST_FILE = ".content-sha256"
SCHEMA = 1
DEFAULT_BASE_URL = "http://127.0.0.1:8000"
# A torch release as the manifest records it (PEP 440, normalized; a local label allowed): it
# becomes part of a page's file name, so nothing else (no '/', no '..') may pass.
TORCH_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+)*(?:(?:a|b|rc)[0-9]+)?(?:\.post[0-9]+)?(?:\.dev[0-9]+)?"
                           r"(?:\+[a-z0-9]+(?:\.[a-z0-9]+)*)?")

TOOLKIT_VERSION = re.compile(r"[0-9]+\.[0-9]+(?:\.[0-9]+)*")  # CUDA 13.0, ROCm 6.4


@dataclass(frozen=True)
class IndexedWheel:
    """One built variant's wheel, as the index lists it."""

    variant: VariantId
    project: str  # canonical name, "mykernels"
    version: str  # "0.1.0+cputorch2.13"
    filename: str
    sha256: str
    source: Path  # dist/<variant>/<wheel>
    torch_version: str  # "2.13.0" (or "2.13" where the manifest did not say)
    toolkit: str | None
    requires_python: str | None
    provenance: Path | None = None  # dist/<variant>/<wheel>.intoto.json (runner/provenance.py)

    @property
    def variant_id(self) -> str:
        return str(self.variant)

    @property
    def simple(self) -> str:
        return f"{self.variant_id}/simple"

    @property
    def path(self) -> str:
        """Where the wheel lies in the generation (its URL path)."""
        return f"{self.simple}/{self.project}/{self.filename}"

    @property
    def findlinks_page(self) -> str:
        """PyG's naming, torch-2.4.0+cu121.html; the pre-cxx11 ABI gets its own page because
        wheel tags cannot tell the two ABIs apart (pip would pick either)."""
        backend = self.variant.backend.tag
        head = f"torch-stable-abi{self.variant.torch}" if self.variant.stable_abi else f"torch-{self.torch_version}"
        return f"whl/{head}+{backend}{'' if self.variant.cxx11_abi else '-cxx98'}.html"


@dataclass(frozen=True)
class Skipped:
    """An entry not listed: not built (``refused`` False), or refused: a check failed, and the
    command that publishes fails after writing the rest (PublishError, exit 7)."""

    variant_id: str
    reason: str
    refused: bool = False


@dataclass(frozen=True)
class IndexPlan:
    wheels: tuple[IndexedWheel, ...]
    skipped: tuple[Skipped, ...]
    pages: tuple[tuple[str, str], ...]  # (relative path, text)
    links: tuple[tuple[str, Path], ...]  # (relative path, wheel to hard-link)
    digest: str = field(default="")  # over pages and linked wheels' hashes: unchanged -> same digest


UNATTESTED_FLAG = "--allow-unattested"


def collect(dist: Path, entries: Mapping[str, manifest.Entry], *, allow_unattested: bool = False
            ) -> tuple[list[IndexedWheel], list[Skipped]]:
    """The wheels the index may list: built or cached, present, with the manifest's sha256, and
    what the entry says they are (verify/wheel_identity.py: file name tags, local label, build
    record, RECORD) with a provenance record of these bytes for this variant. An entry that was not
    built is skipped; one that fails a check is refused (``Skipped.refused``): the caller publishes
    the rest and then fails. ``allow_unattested`` lists a wheel that has no provenance record
    (an older wheelfactory's build); one whose record names other bytes or another variant is
    refused all the same. A listed wheel outside ``dist`` or a torch_version that is not a torch
    release is a ConfigError naming the manifest (support/paths.py): nothing is published from
    such a manifest."""
    wheels: list[IndexedWheel] = []
    skipped: list[Skipped] = []
    for vid, entry in sorted(entries.items()):
        if entry.hub_metadata is not None:
            skipped.append(Skipped(vid, "a pure-Python (noarch) build: `wheelfactory export --hf-layout` lays it out"))
            continue
        try:
            key = VariantId.parse(vid)
        except InvalidVariantId as exc:
            skipped.append(Skipped(vid, str(exc), refused=True))
            continue
        if entry.status not in ("built", "cached") or not entry.wheel or not entry.sha256:
            skipped.append(Skipped(vid, f"status {entry.status}" + (f": {entry.error}" if entry.error else "")))
            continue
        listed = str(dist / manifest.MANIFEST)
        source = paths.inside(dist, entry.wheel, what=f"{vid} names the wheel", file=listed)
        torch_version = entry.torch_version or key.torch
        # It names a find-links page (whl/torch-<it>+cpu.html): a torch release and nothing else.
        if not isinstance(torch_version, str) or not TORCH_VERSION.fullmatch(torch_version):
            raise ConfigError(f"{vid}: torch_version {torch_version!r} is not a torch release (e.g. 2.13.0)",
                              file=listed, hint="rebuild it with `wheelfactory build`")
        # Published in index.json, where select.py reads it as a toolkit release.
        if entry.toolkit is not None and not TOOLKIT_VERSION.fullmatch(entry.toolkit):
            raise ConfigError(f"{vid}: toolkit {entry.toolkit!r} is not a toolkit release (e.g. 13.0)",
                              file=listed, hint="rebuild it with `wheelfactory build`")
        refusal = _refusal(vid, key, entry, source, torch_version, allow_unattested)
        if refusal is not None:
            skipped.append(Skipped(vid, refusal, refused=True))
            continue
        name, version, _, _ = parse_wheel_filename(source.name)  # parsed by the identity check already
        try:
            requires_python = _requires_python(source)
        except ConfigError as exc:
            skipped.append(Skipped(vid, f"{entry.wheel}: {exc.detail}", refused=True))
            continue
        provenance = provenance_path(source)
        wheels.append(IndexedWheel(key, canonicalize_name(name), str(version), source.name, entry.sha256, source,
                                   torch_version, entry.toolkit, requires_python,
                                   provenance if provenance.is_file() else None))
    return wheels, skipped


def _refusal(vid: str, key: VariantId, entry: manifest.Entry, source: Path, torch_version: str,
             allow_unattested: bool) -> str | None:
    """Why the wheel ``entry`` names may not be listed under ``vid`` (one line); None: it may."""
    if not source.is_file():
        return f"{entry.wheel} is missing"
    if file_sha256(source) != entry.sha256:
        return f"{entry.wheel} does not match the manifest's sha256 (rebuild it)"
    problems = wheel_identity_problems(source, key, torch_version if entry.torch_version else None,
                                       entry.toolkit)
    if problems:
        return f"{entry.wheel} is not a wheel of {vid}: {'; '.join(problems)}"
    try:
        if read_provenance(source, entry.sha256 or "", vid) is None and not allow_unattested:
            return (f"{entry.wheel} has no provenance record ({provenance_path(source).name}): rebuild it with "
                    f"`wheelfactory build`, or pass {UNATTESTED_FLAG} to list it without one")
    except InvalidProvenance as exc:
        return f"{provenance_path(source).name}: {exc} (rebuild it)"
    return None


# What reading a damaged or hostile zip can raise (bad headers, bad deflate data, an unsupported
# compression or encryption, a member that claims more bytes than it has).
ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, ValueError, OSError)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def wheel_build_record(archive: zipfile.ZipFile, package: str, wheel: Path) -> dict[str, object] | None:
    """The build record of the wheel's package ``package`` (None: it has none), read and checked
    by the runtime's reader (``partial_record``); ConfigError naming the wheel otherwise. Raises
    what ZIP_ERRORS lists when the archive is damaged."""
    name = record_member(package)
    if name not in archive.namelist():
        return None
    try:
        return partial_record(load_record_json(archive.read(name), name), name)
    except RecordError as exc:
        raise ConfigError(str(exc), file=str(wheel), hint="rebuild it with `wheelfactory build`") from None


def _requires_python(wheel: Path) -> str | None:
    """The wheel's Requires-Python, after checking that it is a zip whose METADATA and build
    records can be read: ConfigError naming the wheel otherwise."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
            metadata = next((n for n in names if n.endswith(".dist-info/METADATA")), None)
            if metadata is None:
                raise ConfigError("has no .dist-info/METADATA: not a wheel", file=str(wheel))
            text = archive.read(metadata).decode("utf-8", errors="replace")
            tops = {n.split("/", 1)[0] for n in names if "/" in n}
            for top in sorted(tops):
                wheel_build_record(archive, top, wheel)
    except ZIP_ERRORS as exc:
        raise ConfigError(f"is not a readable wheel ({_one_line(exc)})", file=str(wheel)) from None
    requires = HeaderParser().parsestr(text).get("Requires-Python")
    return requires if isinstance(requires, str) else None


def plan_index(wheels: list[IndexedWheel], skipped: list[Skipped], *, base_url: str = DEFAULT_BASE_URL,
               extra_pages: tuple[tuple[str, str], ...] = (), extra_links: tuple[tuple[str, Path], ...] = ()
               ) -> IndexPlan:
    pages: dict[str, str] = {}
    for wheel in wheels:
        pages[f"{wheel.simple}/index.html"] = _page(f"Simple index: {wheel.variant_id}",
                                                    [_anchor(f"{wheel.project}/", wheel.project)])
        pages[f"{wheel.simple}/{wheel.project}/index.html"] = _page(
            f"Links for {wheel.project} ({wheel.variant_id})", [_wheel_anchor(wheel, wheel.filename)])
        pages[f"{wheel.variant_id}/requirements.txt"] = (
            f"# {wheel.variant_id}: pip install --require-hashes --no-deps --index-url "
            f"{base_url}/{wheel.simple} -r {base_url}/{wheel.variant_id}/requirements.txt\n"
            f"{wheel.project}=={wheel.version} --hash=sha256:{wheel.sha256}\n")
    by_page: dict[str, list[IndexedWheel]] = {}
    for wheel in wheels:
        by_page.setdefault(wheel.findlinks_page, []).append(wheel)
    for page, members in sorted(by_page.items()):
        pages[page] = _page(Path(page).stem, [_wheel_anchor(w, f"../{w.path}") for w in members])
    pages.update(extra_pages)
    pages["select.py"] = select_script(base_url)
    pages["index.json"] = json.dumps(_index_json(wheels, skipped, sorted(by_page)), indent=2) + "\n"
    try:  # what select.py and serve will read: never publish a listing they refuse
        check_listing(pages["index.json"].encode())
    except InvalidListing as exc:
        raise IndexBuildError(f"the index.json this manifest makes would be refused by its readers: {_one_line(exc)}"
                              ) from None
    pages["index.html"] = _top_page(wheels, skipped, sorted(by_page), base_url, [p for p, _ in extra_pages])
    links = (tuple((w.path, w.source) for w in wheels)
             + tuple((w.path + PROVENANCE_SUFFIX, w.provenance) for w in wheels if w.provenance) + extra_links)
    digest = hashlib.sha256(json.dumps([sorted(pages.items()), [(p, file_sha256(s)) for p, s in links]],
                                       sort_keys=True).encode()).hexdigest()
    return IndexPlan(tuple(wheels), tuple(skipped), tuple(sorted(pages.items())), links, digest)


def _anchor(href: str, text: str, attributes: str = "") -> str:
    return f'<a href="{html.escape(href)}"{attributes}>{html.escape(text)}</a><br/>'


def _wheel_anchor(wheel: IndexedWheel, href: str) -> str:
    requires = f' data-requires-python="{html.escape(wheel.requires_python)}"' if wheel.requires_python else ""
    return _anchor(f"{href}#sha256={wheel.sha256}", wheel.filename, requires)


def _page(title: str, body: list[str]) -> str:
    lines = "\n    ".join(body)
    return (f'<!DOCTYPE html>\n<html>\n  <head><meta name="pypi:repository-version" content="1.0">'
            f"<title>{html.escape(title)}</title></head>\n  <body>\n    <h1>{html.escape(title)}</h1>\n    {lines}\n"
            "  </body>\n</html>\n")


def _index_json(wheels: list[IndexedWheel], skipped: list[Skipped], findlinks: list[str]) -> dict[str, object]:
    return {
        "schema": SCHEMA,
        "variants": [{
            "id": w.variant_id, "project": w.project, "version": w.version, "torch": w.variant.torch,
            "torch_version": w.torch_version, "backend": w.variant.backend.kind, "toolkit": w.toolkit,
            "cxx11_abi": w.variant.cxx11_abi, "python": w.variant.python, "arch": w.variant.arch,
            "stable_abi": w.variant.stable_abi, "wheel": w.path, "sha256": w.sha256, "index": w.simple + "/",
            "find_links": w.findlinks_page, "requirements": f"{w.variant_id}/requirements.txt",
            "provenance": w.path + PROVENANCE_SUFFIX if w.provenance else None,
        } for w in wheels],
        "find_links": findlinks,
        "skipped": [{"id": s.variant_id, "reason": s.reason} for s in skipped],
    }


def pip_command(wheel: IndexedWheel, base_url: str) -> str:
    return f"pip install --index-url {base_url}/{wheel.simple} {wheel.project}"


def _top_page(wheels: list[IndexedWheel], skipped: list[Skipped], findlinks: list[str], base_url: str,
              extra: list[str]) -> str:
    rows = []
    for w in wheels:
        cells = [w.variant_id, w.torch_version, w.variant.backend.build_name if w.toolkit is None else
                 f"{w.variant.backend.kind} {w.toolkit}", "cxx11" if w.variant.cxx11_abi else "pre-cxx11",
                 w.variant.python, w.variant.arch]
        tds = "".join(f"<td>{html.escape(c)}</td>" for c in cells)
        command = html.escape(pip_command(w, base_url))
        rows.append(f'<tr>{tds}<td><a href="{html.escape(w.path)}#sha256={w.sha256}">{html.escape(w.filename)}</a>'
                    f'</td><td><code>{command}</code><br/><a href="{html.escape(w.variant_id)}/requirements.txt">'
                    "hash-pinned requirements</a>" + (f'<br/><a href="{html.escape(w.path + PROVENANCE_SUFFIX)}">'
                                                      "provenance</a>" if w.provenance else "") + "</td></tr>")
    header = "".join(f"<th>{h}</th>" for h in ("variant", "torch", "backend", "C++ ABI", "python", "arch", "wheel",
                                               "install"))
    pages = "\n".join(f'    <li><a href="{html.escape(p)}">{html.escape(p)}</a>: <code>pip install '
                      f'{html.escape(wheels[0].project if wheels else "")} -f {html.escape(base_url)}/'
                      f"{html.escape(p)}</code></li>" for p in findlinks)
    extras = "\n".join(f'    <li><a href="{html.escape(p)}">{html.escape(p)}</a></li>' for p in extra)
    missing = "\n".join(f"    <li>{html.escape(s.variant_id)}: {html.escape(s.reason)}</li>" for s in skipped)
    return f"""<!DOCTYPE html>
<html>
  <head><meta charset="utf-8"><title>wheelfactory index</title></head>
  <body>
    <h1>{len(wheels)} variant(s)</h1>
    <p>Pick the row matching your torch (<code>python -c "import torch; print(torch.__version__,
    torch.version.cuda, torch.compiled_with_cxx11_abi())"</code>), or let the index pick it:
    <code>curl -s {html.escape(base_url)}/select.py | python -</code> (in the environment you install into).</p>
    <table>
      <tr>{header}</tr>
      {chr(10).join(rows)}
    </table>
    <h2>Find-links pages</h2>
    <ul>
{pages}
    </ul>
    <h2>Other formats</h2>
    <ul>
    <li><a href="index.json">index.json</a></li>
{extras}
    </ul>
    <h2>Not listed</h2>
    <ul>
{missing or "    <li>none</li>"}
    </ul>
  </body>
</html>
"""


FIT_MODULE = "wheelfactory._runtime._fit"


def select_script(base_url: str) -> str:
    """publish/which.py as the index's select.py: one standard-library file, defaulting to this
    index's URL, with the runtime's fit rule (runtime/_fit.py) pasted over which.py's import of it."""
    import ast

    from wheelfactory._runtime import _fit
    from wheelfactory.publish import which

    source = Path(which.__file__).read_text(encoding="utf-8")
    default = f'DEFAULT_INDEX = "{DEFAULT_BASE_URL}"'
    if default not in source:
        raise IndexBuildError("publish/which.py lost its DEFAULT_INDEX line; select.py cannot be made")
    imports = [node for node in ast.parse(source).body if isinstance(node, ast.ImportFrom) and node.module == FIT_MODULE]
    if len(imports) != 1 or imports[0].end_lineno is None:
        raise IndexBuildError(f"publish/which.py must import the fit rule with one `from {FIT_MODULE} import ...` "
                              f"(found {len(imports)}); select.py cannot embed it")
    future = "from __future__ import annotations\n"
    fit = Path(_fit.__file__).read_text(encoding="utf-8")
    if future not in fit:
        raise IndexBuildError("runtime/_fit.py lost its __future__ import; select.py cannot embed it")
    embedded = ("# ---- runtime/_fit.py, embedded by wheelfactory index (the kernel runtime's fit rule) ----\n"
                + fit.replace(future, "", 1).strip() + "\n# ---- end of runtime/_fit.py ----\n")
    lines = source.splitlines(keepends=True)
    lines[imports[0].lineno - 1:imports[0].end_lineno] = [embedded]
    return "".join(lines).replace(default, f"DEFAULT_INDEX = {base_url!r}", 1)


def read_listing(dist: Path) -> dict[str, object]:
    """dist/index/index.json (what ``serve`` announces), checked as select.py checks it
    (publish/which.py ``check_listing``): ConfigError naming the file when corrupt or wrong-shaped."""
    path = dist / INDEX_LINK / "index.json"
    try:
        raw = read_input(path)
    except OSError as exc:
        raise ConfigError(f"cannot read it ({exc.strerror or exc})", file=str(path),
                          hint=f"run `wheelfactory index -o {dist}` again") from None
    try:
        return check_listing(raw)
    except InvalidListing as exc:
        raise ConfigError(_one_line(exc), file=str(path), hint=f"run `wheelfactory index -o {dist}` again") from None


def current_generation(dist: Path) -> Path | None:
    link = dist / INDEX_LINK
    return link.resolve() if link.is_symlink() else None


def _remove_leftover(path: Path) -> None:
    """A killed run's temp name: a link (never followed) or file is unlinked, a directory removed."""
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def write_index(dist: Path, plan: IndexPlan) -> tuple[Path, bool]:
    """Publish ``plan`` as ``dist/index``; returns (generation directory, changed)."""
    link = dist / INDEX_LINK
    if link.exists() and not link.is_symlink():
        raise IndexBuildError(f"{link} exists and is not an index wheelfactory made (a symlink to a generation): "
                          "move it away")
    current = current_generation(dist)
    if current is not None and (current / DIGEST_FILE).is_file() and \
            (current / DIGEST_FILE).read_text().strip() == plan.digest:
        return current, False
    generations = dist / GENERATIONS
    if generations.is_symlink():  # nothing under dist is followed out of it
        raise IndexBuildError(f"{generations} is a symlink: the index is written only inside {dist}; remove the link")
    generations.mkdir(parents=True, exist_ok=True)
    for leftover in generations.glob(".tmp-*"):  # a killed run's half generation (we hold the lock)
        _remove_leftover(leftover)
    name = f"g{time.time_ns()}"
    temp = generations / f".tmp-{name}"
    temp.mkdir()
    # A fresh generation nobody reads until the rename below: its pages (index.json, the variants
    # json...) are written plainly; the generation as a whole is what appears atomically.
    for rel, text in plan.pages:  # each name checked again: whatever made it, nothing lands outside
        target = paths.inside(temp, rel, what="the index page", file=str(dist / manifest.MANIFEST))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    for rel, source in plan.links:
        target = paths.inside(temp, rel, what="the index file", file=str(dist / manifest.MANIFEST))
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, target)  # the same inode: a later rebuild cannot change what we list
        except OSError:
            shutil.copy2(source, target)  # another filesystem
    (temp / DIGEST_FILE).write_text(plan.digest + "\n")
    generation = generations / name
    os.rename(temp, generation)
    # Not support/atomic.py: the target is a symlink, replaced by a symlink (atomic.py refuses to
    # replace one with a file). The per-process name is enough: we hold the output directory's lock.
    swap = dist / f".{INDEX_LINK}.{os.getpid()}.tmp"
    for leftover in dist.glob(f".{INDEX_LINK}.*.tmp"):  # ours, and any a killed run left between link and rename
        _remove_leftover(leftover)
    os.symlink(os.path.relpath(generation, dist), swap)
    os.replace(swap, link)  # the atomic step: readers switch from one complete index to the other
    for old in sorted(p for p in generations.iterdir() if p.name.startswith("g"))[:-KEEP_GENERATIONS]:
        shutil.rmtree(old, ignore_errors=True)
    return generation, True
