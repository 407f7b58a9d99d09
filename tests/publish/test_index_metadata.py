"""What installers read without downloading wheels: PEP 658/714 .metadata files and hashes, PEP 691
JSON pages, several releases per variant, percent-encoded links, and a published index.json read back
(wheels_from_listing) so that a new release's pages keep the old ones listed."""

from __future__ import annotations

import hashlib
import json
import zipfile
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin

import pytest
from tests.publish.dist_fakes import WHEELS, make_dist
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.version import Version
from tests.publish.test_index import index
from wheelfactory.errors import ConfigError, IndexBuildError
from wheelfactory.plan.identity import VariantId
from wheelfactory.publish.collect import IndexedWheel, collect
from wheelfactory.publish.generations import INDEX_LINK, write_index
from wheelfactory.publish.listing import wheels_from_listing
from wheelfactory.publish.pages import IndexPlan, plan_index
from wheelfactory.publish.index_json import check_listing, version_key
from wheelfactory.publish.select import choose
from wheelfactory.runner import manifest

CPU = "torch213-cxx11-cpu-x86_64-linux"
BASE = "http://example.test:9"


class Anchors(HTMLParser):
    """Every <a>'s attributes, as a browser or pip reads them (entities decoded)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.found.append(dict(attrs))


def anchors(text: str) -> list[dict[str, str | None]]:
    parser = Anchors()
    parser.feed(text)
    return parser.found


def planned(dist: Path) -> IndexPlan:
    wheels, skipped = collect(dist, manifest.read(dist))
    return plan_index(wheels, skipped, base_url=BASE)


def metadata_in_zip(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return archive.read(name)


# --- PEP 658 / 714 --------------------------------------------------------------------------------


def test_each_wheel_has_its_metadata_file_and_both_hash_attributes(tmp_path: Path) -> None:
    make_dist(tmp_path)
    index(tmp_path)
    project = tmp_path / INDEX_LINK / CPU / "simple" / "tiny"
    (wheel,) = project.glob("*.whl")
    metadata = (project / (wheel.name + ".metadata")).read_bytes()
    assert metadata == metadata_in_zip(wheel)  # byte for byte, as PEP 658 requires
    digest = hashlib.sha256(metadata).hexdigest()
    (link,) = anchors((project / "index.html").read_text())
    assert link["data-core-metadata"] == link["data-dist-info-metadata"] == f"sha256={digest}"
    assert link["data-requires-python"] == ">=3.9"
    href = str(link["href"])
    assert unquote(href.split("#")[0]) == wheel.name and href.endswith(f"#sha256={hashlib.sha256(wheel.read_bytes()).hexdigest()}")
    entry = json.loads((tmp_path / INDEX_LINK / "index.json").read_text())["variants"][0]
    assert (entry["core_metadata_sha256"], entry["size"], entry["requires_python"]) == (
        digest, wheel.stat().st_size, ">=3.9")


def test_find_links_and_top_pages_carry_the_same_attributes_and_encoded_links(tmp_path: Path) -> None:
    make_dist(tmp_path)
    index(tmp_path)
    root = tmp_path / INDEX_LINK
    page = root / "whl" / "torch-2.13.0+cpu.html"
    (link,) = anchors(page.read_text())
    target = urljoin(page.as_uri(), str(link["href"]).split("#")[0])
    assert "%2B" in target and Path(unquote(target.removeprefix("file://"))).is_file()
    assert str(link["data-core-metadata"]).startswith("sha256=") and link["data-dist-info-metadata"]
    top = anchors((root / "index.html").read_text())
    for href in (str(a["href"]).split("#")[0] for a in top):
        assert "+" not in href and (root / unquote(href)).exists(), href


# --- PEP 691 JSON ---------------------------------------------------------------------------------


def test_json_pages_say_what_the_html_pages_say(tmp_path: Path) -> None:
    make_dist(tmp_path)
    index(tmp_path)
    simple = tmp_path / INDEX_LINK / CPU / "simple"
    root = json.loads((simple / "index.json").read_text())
    assert root == {"meta": {"api-version": "1.1"}, "projects": [{"name": "tiny"}]}
    page = json.loads((simple / "tiny" / "index.json").read_text())
    assert page["meta"] == {"api-version": "1.1"} and page["name"] == "tiny"
    assert page["versions"] == ["0.1.0+cputorch2.13"]
    (entry,) = page["files"]
    (link,) = anchors((simple / "tiny" / "index.html").read_text())
    wheel = simple / "tiny" / entry["filename"]
    assert entry["url"] == str(link["href"]).split("#")[0] and unquote(entry["url"]) == wheel.name
    assert entry["hashes"] == {"sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()}
    metadata = {"sha256": hashlib.sha256((simple / "tiny" / (wheel.name + ".metadata")).read_bytes()).hexdigest()}
    assert entry["core-metadata"] == entry["dist-info-metadata"] == metadata
    assert entry["requires-python"] == ">=3.9" and entry["size"] == wheel.stat().st_size
    assert entry["yanked"] is False
    provenance = simple / "tiny" / unquote(entry["_provenance"])
    assert provenance.name == wheel.name + ".intoto.json" and provenance.is_file()
    assert "provenance" not in entry  # PEP 740's key names a PEP 740 object; ours is an in-toto statement


def wheel_of(vid: str, version: str, *, requires_python: str | None = ">=3.9", sha: str = "a" * 64,
             metadata: str | None = "b" * 64, provenance: bool = False) -> IndexedWheel:
    """An IndexedWheel already on a target (no source): pages only, no files needed."""
    key = VariantId.parse(vid)
    filename = f"tiny-{version}-cp39-abi3-manylinux_2_28_x86_64.whl"
    return IndexedWheel(key, "tiny", version, filename, sha, None, WHEELS[vid][1], WHEELS[vid][2], requires_python,
                        core_metadata_sha256=metadata, size=123, provenance_listed=provenance)


LOCAL = st.from_regex(r"[a-z0-9]{1,6}(\.[a-z0-9]{1,4}){0,2}", fullmatch=True)


@settings(max_examples=60, deadline=None)
@given(requires=st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=30),
       local=LOCAL, pre=st.sampled_from(["", "a1", "rc2", ".post3", ".dev4"]))
def test_attributes_and_links_survive_escaping(requires: str, local: str, pre: str) -> None:
    """Any Requires-Python text comes back from the HTML as written (escaped, never breaking out of
    its attribute), and any local label's '+' is sent as %2B and decodes to the file name."""
    wheel = wheel_of(CPU, f"1.0{pre}+{local}", requires_python=requires or None)
    plan = plan_index([wheel], [], base_url=BASE)
    pages = dict(plan.pages)
    (link,) = anchors(pages[f"{CPU}/simple/tiny/index.html"])
    assert link.get("data-requires-python") == (requires or None)
    href = str(link["href"]).split("#")[0]
    assert "+" not in href and unquote(href) == wheel.filename
    (entry,) = json.loads(pages[f"{CPU}/simple/tiny/index.json"])["files"]
    assert entry["url"] == href and entry.get("requires-python") == (requires or None)


# --- several releases --------------------------------------------------------------------------


def two_releases(tmp_path: Path) -> tuple[IndexPlan, IndexPlan, Path]:
    """0.1.0 indexed from one dist; 0.2.0 from another, planned with 0.1.0 read back from the
    first index's index.json (what a publish does with a target's listing)."""
    first, second = tmp_path / "first", tmp_path / "second"
    make_dist(first)
    make_dist(second, version="0.2.0")
    old = planned(first)
    listing = json.loads(dict(old.pages)["index.json"])
    wheels, skipped = collect(second, manifest.read(second))
    merged = plan_index(wheels_from_listing(listing, where="target/index.json") + wheels, skipped, base_url=BASE)
    return old, merged, second


def test_a_new_release_keeps_the_old_one_listed_everywhere(tmp_path: Path) -> None:
    old, merged, second = two_releases(tmp_path)
    pages = dict(merged.pages)
    page = pages[f"{CPU}/simple/tiny/index.html"]
    names = [str(a["href"]).split("#")[0] for a in anchors(page)]
    assert [unquote(n).split("-")[1] for n in names] == ["0.1.0+cputorch2.13", "0.2.0+cputorch2.13"]  # oldest first
    project = json.loads(pages[f"{CPU}/simple/tiny/index.json"])
    assert project["versions"] == ["0.1.0+cputorch2.13", "0.2.0+cputorch2.13"] and len(project["files"]) == 2
    listing = json.loads(pages["index.json"])
    assert [v["version"] for v in listing["variants"] if v["id"] == CPU] == ["0.1.0+cputorch2.13", "0.2.0+cputorch2.13"]
    assert len(listing["variants"]) == 6
    findlinks = anchors(pages["whl/torch-2.13.0+cpu.html"])
    assert len(findlinks) == 2
    top = pages["index.html"]
    assert "3 variant(s), 6 wheel(s)" in top
    assert f"{BASE}/{CPU}/simple tiny==0.1.0</code>" in top and f"{BASE}/{CPU}/simple tiny</code>" in top
    # Only the new release's files travel: the old ones are already on the target.
    assert all("0.2.0" in path for path, _ in merged.links) and len(merged.links) == 6  # 3 wheels, 3 records
    assert sorted(path for path, _ in merged.blobs) == sorted(p + ".metadata" for p, s in merged.links
                                                               if p.endswith(".whl"))
    for path, data in merged.blobs:
        local = second / dict(merged.links)[path.removesuffix(".metadata")].relative_to(second)
        assert data == metadata_in_zip(local)
    old_pin = dict(old.pages)[f"{CPU}/requirements.txt"].splitlines()[1]
    assert pages[f"{CPU}/requirements-0.1.0.txt"].splitlines()[1] == old_pin
    assert pages[f"{CPU}/requirements.txt"].splitlines()[1] == pages[f"{CPU}/requirements-0.2.0.txt"].splitlines()[1]
    assert pages[f"{CPU}/requirements.txt"].splitlines()[1].startswith("tiny==0.2.0+cputorch2.13 --hash=sha256:")
    assert pages[f"{CPU}/requirements-0.1.0.txt"].startswith(f"# {CPU}: pip install ") and \
        f"-r {BASE}/{CPU}/requirements-0.1.0.txt\n" in pages[f"{CPU}/requirements-0.1.0.txt"]


def test_a_listing_read_back_gives_the_same_pages_byte_for_byte(tmp_path: Path) -> None:
    """The contract a publish relies on: the pages of a dist equal the pages of its own index.json."""
    make_dist(tmp_path)
    plan = planned(tmp_path)
    again = plan_index(wheels_from_listing(json.loads(dict(plan.pages)["index.json"]), where="index.json"), [],
                       base_url=BASE)
    assert plan.skipped == () and again.pages == plan.pages
    assert again.links == () and again.blobs == ()  # nothing to upload: it is all on the target


def test_the_same_wheel_from_both_sides_is_listed_once_and_keeps_its_file(tmp_path: Path) -> None:
    make_dist(tmp_path)
    wheels, _ = collect(tmp_path, manifest.read(tmp_path))
    plan = plan_index(wheels, [], base_url=BASE)
    listed = wheels_from_listing(json.loads(dict(plan.pages)["index.json"]), where="index.json")
    both = plan_index(listed + wheels, [], base_url=BASE)
    assert both.pages == plan.pages and both.links == plan.links and both.blobs == plan.blobs
    unattested = [replace(w, provenance=None) for w in wheels]  # the target has the records, this dist not
    merged = plan_index(unattested + listed, [], base_url=BASE)
    assert merged.pages == plan.pages and not any(p.endswith(".intoto.json") for p, _ in merged.links)


def test_one_file_name_with_other_bytes_is_refused() -> None:
    listed = wheel_of(CPU, "0.1.0+cputorch2.13")
    with pytest.raises(IndexBuildError, match="listed twice with different bytes"):
        plan_index([listed, replace(listed, sha256="c" * 64)], [])


def test_the_digest_covers_the_metadata_files(tmp_path: Path) -> None:
    make_dist(tmp_path)
    wheels, _ = collect(tmp_path, manifest.read(tmp_path))
    plan = plan_index(wheels, [], base_url=BASE)
    assert plan.blobs and dict(plan.blobs) == {w.path + ".metadata": w.core_metadata for w in wheels}
    changed = plan_index([replace(w, core_metadata=w.core_metadata + b"\n", core_metadata_sha256=hashlib.sha256(
        (w.core_metadata or b"") + b"\n").hexdigest()) if w.variant_id == CPU else w for w in wheels], [],
        base_url=BASE)
    assert changed.digest != plan.digest
    generation, _ = write_index(tmp_path, plan)
    for path, data in plan.blobs:
        assert (generation / path).read_bytes() == data


def test_a_wheel_cannot_claim_metadata_it_does_not_carry() -> None:
    local = replace(wheel_of(CPU, "0.1.0+cputorch2.13", metadata=None), source=Path("w.whl"))
    with pytest.raises(ValueError, match="must carry its bytes"):
        replace(local, core_metadata_sha256="b" * 64)
    with pytest.raises(ValueError, match="does not match"):
        replace(local, core_metadata_sha256="b" * 64, core_metadata=b"other")


# --- reading a target's listing (untrusted) ------------------------------------------------------


def good_listing(tmp_path: Path) -> dict[str, object]:
    make_dist(tmp_path, variants=(CPU,))
    return json.loads(dict(planned(tmp_path).pages)["index.json"])  # type: ignore[no-any-return]


@pytest.mark.parametrize("key, value, message", [
    ("wheel", f"{CPU}/simple/tiny/../../../etc/x.whl", "is not torch213"),
    ("wheel", "torch26-cxx98-cpu-x86_64-linux/simple/tiny/tiny-0.1.0+cputorch2.13-cp39-abi3-manylinux_2_28_x86_64.whl",
     "is not torch213"),
    ("wheel", f"{CPU}/simple/tiny/other-0.1.0+cputorch2.13-cp39-abi3-manylinux_2_28_x86_64.whl", "is not a file name of tiny"),
    ("wheel", f"{CPU}/simple/tiny/tiny-0.1.0.tar.gz", "is not a wheel's file name"),
    ("wheel", f"{CPU}/simple/tiny/tiny-0.1.0+cputorch2.13-cp39-abi3-manylinux_2_28_x86_64\n.whl", "is not torch213"),
    ("sha256", "A" * 64, "is not a sha256"),
    ("core_metadata_sha256", "0" * 63, "is not a sha256"),
    ("size", True, "has the wrong type"),
    ("size", -1, "is negative"),
    ("provenance", f"{CPU}/simple/tiny/elsewhere.intoto.json", "is not"),
    ("torch", "2.6", "does not match the variant id"),
    ("stable_abi", None, "has the wrong type"),
    ("index", "other/simple/", "does not match the variant id"),
    ("find_links", "whl/torch-2.13.0+cu130.html", "is not whl/torch-2.13.0+cpu.html"),
    ("id", "torch213-cxx11-cpu-x86_64-linux-extra", "is not a variant id"),
    ("version", "0.1.0+CPUtorch2.13", "is not normalized"),
    ("version", "not a version", "is not a version"),
    ("project", "Tiny", "is not a normalized project name"),
    ("torch_version", "2.13/../x", "is not a torch release"),
    ("requires_python", ">=3.9\x1b[2J", "holds control characters"),
    ("core_metadata_sha256", 5, "has the wrong type"),
])
def test_a_listing_that_is_not_what_index_writes_is_one_line_naming_it(tmp_path: Path, key: str, value: object,
                                                                        message: str) -> None:
    listing = good_listing(tmp_path)
    entry = listing["variants"][0]  # type: ignore[index]
    entry[key] = value
    with pytest.raises(ConfigError) as info:
        wheels_from_listing(listing, where="s3://bucket/kernels/index.json")
    text = str(info.value)
    assert text.startswith(f"s3://bucket/kernels/index.json: variants[0]: {key}: ") and message in text, text
    assert "\n" not in text and "\x1b" not in text


@pytest.mark.parametrize("change", ["missing", "twice", "not a list", "not an object"])
def test_a_listing_of_the_wrong_shape_is_one_line(tmp_path: Path, change: str) -> None:
    listing = good_listing(tmp_path)
    entries = listing["variants"]
    assert isinstance(entries, list)
    if change == "missing":
        del entries[0]["size"]  # an index.json written before sizes were listed
    elif change == "twice":
        entries.append(dict(entries[0]))
    elif change == "not a list":
        listing["variants"] = {"a": 1}
    else:
        entries[0] = [1]
    with pytest.raises(ConfigError) as info:
        wheels_from_listing(listing, where="t/index.json")
    assert str(info.value).startswith("t/index.json: ") and "\n" not in str(info.value)
    if change == "missing":
        assert "missing key size: an older wheelfactory wrote this index.json" in str(info.value)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=6)


@settings(max_examples=150, deadline=None)
@given(key=st.sampled_from(["id", "project", "version", "wheel", "sha256", "size", "provenance", "torch",
                            "torch_version", "toolkit", "requires_python", "core_metadata_sha256", "find_links",
                            "cxx11_abi", "arch", "python", "index", "requirements", "stable_abi", "backend"]),
       value=JSON)
def test_any_value_under_any_key_is_accepted_only_as_plan_index_wrote_it(key: str, value: object) -> None:
    """A hostile listing: a ConfigError, or an entry that plans to exactly the pages it came from."""
    wheel = wheel_of(CPU, "0.1.0+cputorch2.13", provenance=True)
    listing = json.loads(dict(plan_index([wheel], [], base_url=BASE).pages)["index.json"])
    listing["variants"][0][key] = value
    try:
        (back,) = wheels_from_listing(listing, where="index.json")
    except ConfigError as exc:
        assert "\n" not in str(exc)
        return
    assert json.loads(dict(plan_index([back], [], base_url=BASE).pages)["index.json"]) == listing


# --- the selector with several releases ----------------------------------------------------------


ENV = {"torch": "2.13", "torch_version": "2.13.0", "backend": "cuda", "toolkit": "13.0", "cxx11_abi": True,
       "python": "3.11", "arch": "x86_64"}


def row(vid: str, version: str, **changes: object) -> dict[str, object]:
    base = {"id": vid, "project": "tiny", "version": version, "torch": "2.13", "backend": "cuda", "toolkit": "13.0",
            "cxx11_abi": True, "python": "abi3", "arch": "x86_64", "stable_abi": False, "index": f"{vid}/simple/"}
    return {**base, **changes}


def test_the_newest_release_of_the_best_variant_is_chosen_whatever_the_order() -> None:
    rows = [row("cu130", "0.2.0+cu130torch2.13"), row("cu130", "0.10.0+cu130torch2.13"),
            row("cu130", "0.9.0+cu130torch2.13"), row("cpu", "0.11.0+cputorch2.13", backend="cpu", toolkit=None)]
    for ordered in (rows, rows[::-1]):
        best, others = choose(ENV, ordered)
        assert best is not None and (best["id"], best["version"]) == ("cu130", "0.10.0+cu130torch2.13")
        assert not others
    # A better fit still wins over a newer release of a worse one (the rule users already know).
    best, _ = choose(ENV, [row("cu128", "0.3.0+cu128torch2.13", toolkit="12.8"), *rows])
    assert best is not None and best["id"] == "cu130"


def test_a_variant_that_does_not_fit_is_named_once_however_many_releases() -> None:
    rows = [row("cu131", f"0.{n}.0+cu131torch2.13", toolkit="13.1") for n in range(4)]
    best, others = choose(ENV, rows)
    assert best is None and [(v["id"], v["version"]) for v, _ in others] == [("cu131", "0.3.0+cu131torch2.13")]


VERSIONS = st.builds(
    lambda epoch, release, pre, post, dev, local: Version(
        (f"{epoch}!" if epoch else "") + ".".join(map(str, release)) + pre + post + dev + (f"+{local}" if local else "")),
    st.integers(0, 2), st.lists(st.integers(0, 12), min_size=1, max_size=4),
    st.sampled_from(["", "a0", "a1", "b2", "rc1", "rc10"]), st.sampled_from(["", ".post0", ".post1", ".post12"]),
    st.sampled_from(["", ".dev0", ".dev3"]), st.sampled_from(["", "cu130torch2.13", "1.a", "a.1", "g1234.cpu", "7"]))


@settings(max_examples=300, deadline=None)
@given(a=VERSIONS, b=VERSIONS)
def test_select_py_orders_versions_as_packaging_does(a: Version, b: Version) -> None:
    assert (version_key(str(a)) < version_key(str(b))) == (a < b)
    assert (version_key(str(a)) == version_key(str(b))) == (a == b)


def test_old_and_new_listings_are_both_readable(tmp_path: Path) -> None:
    listing = good_listing(tmp_path)
    check_listing(json.dumps(listing).encode())
    old = {"schema": 1, "variants": [{k: v for k, v in entry.items()  # type: ignore[attr-defined]
                                      if k not in ("requires_python", "core_metadata_sha256", "size")}
                                     for entry in listing["variants"]]}  # type: ignore[attr-defined]
    check_listing(json.dumps(old).encode())
    for key, bad in (("size", "12"), ("core_metadata_sha256", 1), ("requires_python", 3), ("version", "1.0-final")):
        changed = json.loads(json.dumps(listing))
        changed["variants"][0][key] = bad
        with pytest.raises(ValueError, match=key):
            check_listing(json.dumps(changed).encode())
