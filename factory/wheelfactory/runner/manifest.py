"""dist/manifest.json: what was built, under which key, with which result.

Written atomically (support/atomic.py: a temp file per write, then a rename) so a reader never sees
half of it. Within a run one ManifestRecorder owns the entries and serializes the writes of the
build threads; across processes the whole output directory is locked for the duration of a build
so two runs cannot interleave.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Literal, get_args

from filelock import FileLock, Timeout

from wheelfactory.errors import ConfigError, OutputLocked, UsageError
from wheelfactory.support import atomic
from wheelfactory.support.inputs import read_input

MANIFEST = "manifest.json"
LOCK = ".wheelfactory.lock"
Status = Literal["built", "cached", "failed"]


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One variant's line in the manifest; the field order is the JSON's key order."""

    status: Status
    wheel: str | None  # relative to the output directory
    sha256: str | None
    seconds: float
    key: str
    log: str | None
    error: str | None = None
    engine: str | None = None
    image: str | None = None  # the build image's id (docker engine): pins the toolchain exactly
    # What the variant id does not say, for the index pages: "2.13.0", "12.8" (None: cpu).
    torch_version: str | None = None
    toolkit: str | None = None
    size: int | None = None  # the wheel's bytes
    # Seconds per phase of the build (support/timeline.py), in the order they ran; "compile" is the
    # build backend's run. None: not built in this run (cached) or by an older wheelfactory.
    phases: dict[str, float] | None = None
    # The project's own tests against this wheel ([test]): command, passed, seconds, and an
    # excerpt of their output when they failed. None: no tests configured for this variant.
    tests: dict[str, object] | None = None
    # What verification found that the user must see and that does not fail the build (e.g. a
    # bring-your-own CUDA wheel with no device code). None: nothing.
    warnings: list[str] | None = None
    # A pure-Python build (a kernel-builder noarch kernel, engines/pure_python.py): the Hugging Face
    # layout's metadata.json, which `wheelfactory export --hf-layout` writes beside its package.
    # None: a compiled variant (its layout metadata comes from the wheel's build record).
    hub_metadata: dict[str, object] | None = None
    # A stable-ABI variant: its wheel's verification on each torch release of the gate, by torch
    # version ({"2.15.0": {"passed": true, "tests": {...}}}), the build's own first. None: no gate.
    gate: dict[str, object] | None = None

    @property
    def compile_seconds(self) -> float | None:
        return self.phases.get("compile") if self.phases else None


SCHEMA = 1
_SCALARS: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "float": (int, float)}


def read(out: Path) -> dict[str, Entry]:
    """The manifest's entries ({} when there is none), each checked against ``Entry``: a file that
    is not a wheelfactory manifest is a ConfigError naming the file and the key, never a traceback."""
    path = out / MANIFEST
    shown = str(path)

    def bad(message: str, hint: str = "move it away and rebuild") -> ConfigError:
        return ConfigError(message, file=shown, hint=hint)

    try:
        text = read_input(path).decode("utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise bad(f"cannot read it ({reason})") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise bad(f"not JSON ({_one_line(str(exc))})") from None
    not_ours = "not a wheelfactory manifest: move it away and rebuild"
    if not isinstance(data, dict):
        raise bad(f"expected a JSON object, got {_kind(data)}", not_ours)
    # JSON's \ud800 escapes decode to lone surrogates, which no page or log can be written with
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise bad(
            "holds text that is not valid Unicode (a lone surrogate escape)", not_ours
        ) from None
    for key in data:
        if key not in ("schema", "variants"):
            raise ConfigError("unknown key", file=shown, key=_key(key))
    schema = data.get("schema")
    if type(schema) is not int or schema != SCHEMA:
        raise ConfigError(
            f"unknown manifest schema {_shown(schema)} (this wheelfactory reads {SCHEMA})",
            file=shown,
            key="schema",
            hint="rebuild with this wheelfactory",
        )
    variants = data.get("variants", {})
    if not isinstance(variants, dict):
        raise ConfigError(f"expected an object, got {_kind(variants)}", file=shown, key="variants")
    return {vid: _entry(raw, shown, f"variants.{_key(vid)}") for vid, raw in variants.items()}


def _entry(raw: object, shown: str, where: str) -> Entry:
    if not isinstance(raw, dict):
        raise ConfigError(f"expected an object, got {_kind(raw)}", file=shown, key=where)
    declared = {f.name: f for f in fields(Entry)}
    for key in raw:
        if key not in declared:
            raise ConfigError("unknown key", file=shown, key=f"{where}: {_key(key)}")
    for name, spec in _FIELD_TYPES.items():
        if name not in raw:
            if declared[name].default is MISSING:
                raise ConfigError(f"missing key {name}", file=shown, key=where)
            continue
        problem = _check(raw[name], spec)
        if problem:
            raise ConfigError(problem, file=shown, key=f"{where}: {name}")
    return Entry(**raw)


# Each Entry field's JSON shape: "str", "int", "float", "status", "dict:<value>" (string keys),
# "list:<item>"; a trailing "?" allows null. tests/runner/test_manifest.py checks it covers Entry.
_FIELD_TYPES: dict[str, str] = {
    "status": "status",
    "wheel": "str?",
    "sha256": "str?",
    "seconds": "float",
    "key": "str",
    "log": "str?",
    "error": "str?",
    "engine": "str?",
    "image": "str?",
    "torch_version": "str?",
    "toolkit": "str?",
    "size": "int?",
    "phases": "dict:float?",
    "tests": "dict:any?",
    "warnings": "list:str?",
    "hub_metadata": "dict:any?",
    "gate": "dict:any?",
}


def _check(value: object, spec: str) -> str | None:
    """Why ``value`` does not have the shape ``spec`` (None: it has)."""
    if spec.endswith("?"):
        if value is None:
            return None
        spec = spec[:-1]
    if spec == "any":
        return None
    if spec == "status":
        if value in get_args(Status) and isinstance(value, str):
            return None
        return f"expected one of {', '.join(get_args(Status))}, got {_shown(value)}"
    if spec.startswith("dict:"):
        if not isinstance(value, dict):
            return f"expected an object, got {_kind(value)}"
        for key, item in value.items():
            problem = _check(item, spec[5:])
            if problem:
                return f"{_key(key)}: {problem}"
        return None
    if spec.startswith("list:"):
        if not isinstance(value, list):
            return f"expected a list, got {_kind(value)}"
        for index, item in enumerate(value):
            problem = _check(item, spec[5:])
            if problem:
                return f"[{index}]: {problem}"
        return None
    if isinstance(value, bool) or not isinstance(value, _SCALARS[spec]):
        return (
            f"expected {'an integer' if spec == 'int' else 'a number' if spec == 'float' else 'a string'}, "
            f"got {_shown(value)}"
        )
    return None


def _kind(value: object) -> str:
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        type(None): "null",
        int: "a number",
        float: "a number",
    }.get(type(value), type(value).__name__)


def _shown(value: object, limit: int = 60) -> str:
    """A value as the message quotes it: JSON, one line, cut short."""
    try:
        text = json.dumps(value, ensure_ascii=True)
    except (ValueError, TypeError, RecursionError):
        text = _kind(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _key(key: str) -> str:
    """A key as the message names it: printable ASCII, one line, cut short."""
    text = json.dumps(key, ensure_ascii=True)[1:-1]
    return text if len(text) <= 80 else text[:80] + "..."


def _one_line(text: str) -> str:
    return " ".join(text.split())


def write(out: Path, entries: Mapping[str, Entry]) -> None:
    """Replace the manifest with ``entries``. One writer at a time: in a run, use ManifestRecorder."""
    _write(out, {vid: _fragment(vid, entry) for vid, entry in entries.items()})


def _fragment(variant_id: str, entry: Entry) -> str:
    """One variant's part of the file, laid out as ``json.dumps(..., indent=2)`` lays it at its depth
    (strings escape their newlines, so every newline here is the layout's)."""
    return f"{json.dumps(variant_id)}: " + json.dumps(asdict(entry), indent=2).replace(
        "\n", "\n    "
    )


def _write(out: Path, fragments: Mapping[str, str]) -> None:
    """The file from each variant's fragment: the bytes ``json.dumps({"schema": 1, "variants": ...},
    indent=2)`` gives, without encoding every entry again on each write (a run rewrites the file
    after every variant)."""
    variants = (
        "{\n    " + ",\n    ".join(f for _, f in sorted(fragments.items())) + "\n  }"
        if fragments
        else "{}"
    )
    atomic.write_text(
        out / MANIFEST,
        f'{{\n  "schema": {SCHEMA},\n  "variants": {variants}\n}}\n',
        what="the manifest",
    )


class ManifestRecorder:
    """The one owner of a run's manifest: the build threads record through it, each record updates
    the entries and rewrites the file under one lock, so no update is lost and no two writes race."""

    def __init__(self, out: Path, entries: Mapping[str, Entry] | None = None) -> None:
        self.out = out
        self._entries = dict(entries if entries is not None else read(out))
        self._fragments = {vid: _fragment(vid, entry) for vid, entry in self._entries.items()}
        self._lock = threading.Lock()

    def get(self, variant_id: str) -> Entry | None:
        with self._lock:
            return self._entries.get(variant_id)

    def snapshot(self) -> dict[str, Entry]:
        with self._lock:
            return dict(self._entries)

    def record(self, variant_id: str, entry: Entry) -> None:
        """Set one variant's entry and write the manifest (a killed run keeps what finished)."""
        with self._lock:
            self._entries[variant_id] = entry
            self._fragments[variant_id] = _fragment(variant_id, entry)
            _write(self.out, self._fragments)


@contextlib.contextmanager
def locked(out: Path) -> Iterator[None]:
    """The output directory held exclusively for the block (a build, an index, a merge, an
    export, a publish); released on the way out, and by the OS if the process dies."""
    out.mkdir(parents=True, exist_ok=True)
    lock_ = FileLock(str(out / LOCK))
    try:
        lock_.acquire(timeout=0)
    except Timeout:
        raise OutputLocked(
            f"{out} is in use by another wheelfactory build; wait for it or use another -o"
        ) from None
    except OSError as exc:  # filelock opens it O_NOFOLLOW: a link planted there is ELOOP
        raise UsageError(
            f"{out / LOCK}: the build's lock cannot be opened ({exc.strerror}): remove it, a build "
            "makes its own"
        ) from None
    try:
        yield
    finally:
        lock_.release()


def read_listed(out: Path, *, shown: Path | None = None) -> dict[str, Entry]:
    """The manifest's entries for a command that works on what was built: none is a UsageError
    saying to build first (``shown``: the output directory as the user named it)."""
    entries = read(out)
    if not entries:
        raise UsageError(
            f"{out / MANIFEST} lists nothing: run `wheelfactory build -o {shown or out}` first"
        )
    return entries
