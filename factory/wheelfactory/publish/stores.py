"""Where a static index lives: a directory or a bucket over the S3 API, behind one small protocol.

A store holds files under relative paths (``<variant>/simple/<project>/index.html``). It answers
what it holds (a sha256 per path, to tell unchanged, new and conflicting files apart), reads the
one file publishing needs back (``index.json``, the listing of every earlier release) and writes a
file so that it appears whole or not at all: a directory by a hidden temp name and a rename, a
bucket because an S3 PUT is atomic per object. Nothing here decides what to write
(publish/release.py does).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from wheelfactory.errors import PublishError
from wheelfactory.plan.compile_cache_settings import mask_password
from wheelfactory.plan.publish_config import BucketTarget, DirectoryTarget
from wheelfactory.project.keys import file_sha256
from wheelfactory.support import confined, paths
from wheelfactory.support.digests import stream_sha256

LOCK_FILE = ".wheelfactory-publish.lock"
TEMP_MARK = ".wf-partial-"  # a directory store's temp names: .<name>.wf-partial-<pid>
LISTING_LIMIT = 64 << 20  # bytes of index.json read back from a target
_CHUNK = 1 << 20


class Store(Protocol):
    """A place a static index is published to."""

    def held(self, path: str) -> str | None:
        """The sha256 of the file at ``path``; None when there is none."""

    def holds(self, path: str) -> bool:
        """Whether there is a file at ``path`` (its bytes not read)."""

    def read(self, path: str, limit: int = LISTING_LIMIT) -> bytes | None:
        """The file at ``path`` (None: there is none); PublishError past ``limit`` bytes."""

    def put(self, path: str, body: bytes | Path, sha256: str, content_type: str) -> None:
        """Write ``body`` (bytes, or a file's contents) at ``path``, appearing whole or not at all."""

    def default_base_url(self) -> str:
        """Where the store's files are reached when the target names no base_url."""

    def session(self) -> contextlib.AbstractContextManager[None]:
        """Held while publishing: one publisher at a time where the store can say so."""


def sha256_of(body: bytes | Path) -> str:
    return hashlib.sha256(body).hexdigest() if isinstance(body, bytes) else file_sha256(body)


@dataclass(frozen=True)
class DirectoryStore:
    """A directory a static host serves. Files are written as hidden temp names, fsynced, then
    renamed: a reader (or a killed publish) sees the old file or the new one. Temp names a killed
    publish left are removed when the next one starts; nothing is followed out of the directory."""

    target: DirectoryTarget

    @property
    def root(self) -> Path:
        return self.target.path

    def _parts(self, rel: str) -> tuple[str, ...]:
        """``rel`` as path components under the root (links below it are confined's to refuse)."""
        member = paths.safe_member(rel)
        if member is None:
            raise PublishError(
                f"{self.root}: {rel!r} is not a path inside it (a listing names a file outside)"
            )
        return member.parts

    def _regular(self, path: str) -> int | None:
        """A read descriptor of the regular file at ``path``; None when there is none; PublishError
        naming it when a link, a folder or a special file is there (or on its way)."""
        try:
            return confined.open_regular(self.root, "/".join(self._parts(path)))
        except confined.Refused as exc:
            raise PublishError(
                f"{exc}: move it away (a publish never follows a link or opens a special file)"
            ) from None
        except OSError as exc:
            raise PublishError(f"{self.root / path}: cannot read it ({exc.strerror})") from None

    def held(self, path: str) -> str | None:
        fd = self._regular(path)
        if fd is None:
            return None
        with os.fdopen(fd, "rb") as stream:
            return stream_sha256(stream).hex()

    def holds(self, path: str) -> bool:
        fd = self._regular(path)
        if fd is not None:
            os.close(fd)
        return fd is not None

    def read(self, path: str, limit: int = LISTING_LIMIT) -> bytes | None:
        fd = self._regular(path)
        if fd is None:
            return None
        with os.fdopen(fd, "rb") as stream:
            data = stream.read(limit + 1)
        if len(data) > limit:
            raise PublishError(
                f"{self.root / path} is over {limit >> 20} MiB: not a listing wheelfactory wrote"
            )
        return data

    def put(self, path: str, body: bytes | Path, sha256: str, content_type: str) -> None:
        *folders, name = self._parts(path)
        target = self.root / path
        temp = f".{name}{TEMP_MARK}{os.getpid()}"
        try:
            with confined.directory(self.root, tuple(folders), create=True) as parent:
                _write_whole(parent, temp, name, body, target)
        except confined.Refused as exc:
            raise PublishError(
                f"{exc}: move it away (a publish never follows a link or opens a special file)"
            ) from None
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise PublishError(
                    f"{target}: no space left on the device while writing it (nothing of it was "
                    "kept): free space there and publish again; files already written are whole"
                ) from None
            raise PublishError(f"{target}: cannot write it ({exc.strerror})") from None

    def default_base_url(self) -> str:
        return self.root.as_uri()

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        if self.root.is_symlink() or (self.root.exists() and not self.root.is_dir()):
            raise PublishError(
                f"{self.root} is not a directory: publish to a directory (or remove the link)"
            )
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # under a regular file, under /proc, read-only, no space
            raise PublishError(
                f"{self.root}: cannot make the target directory ({exc.strerror}): "
                "publish to a directory you can write"
            ) from None
        with os.fdopen(_open_lock(self.root / LOCK_FILE), "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise PublishError(
                    f"{self.root}: another publish is writing here; wait for it"
                ) from None
            self._remove_partials()
            yield

    def _remove_partials(self) -> None:
        """Temp files a killed publish left (ours, by their mark); we hold the lock."""
        for folder, dirs, files in os.walk(self.root):
            dirs[:] = [d for d in dirs if d != ".git"]
            for name in files:
                if TEMP_MARK in name and name.startswith("."):
                    (Path(folder) / name).unlink(missing_ok=True)


def _write_whole(parent: int, temp: str, name: str, body: bytes | Path, target: Path) -> None:
    """``body`` into the directory ``parent`` as ``temp``, fsynced, then renamed over ``name``: a
    reader sees the old file or the new one. Whatever is at ``name`` must be a regular file (a
    rename would replace a link or refuse a folder)."""
    fd = os.open(
        temp,
        os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o644,
        dir_fd=parent,
    )
    try:
        with os.fdopen(fd, "wb") as stream:
            if isinstance(body, bytes):
                stream.write(body)
            else:
                with body.open("rb") as source:
                    shutil.copyfileobj(source, stream, _CHUNK)
            stream.flush()
            os.fchmod(stream.fileno(), 0o644)
            os.fsync(stream.fileno())
        try:
            mode = os.lstat(name, dir_fd=parent).st_mode
        except FileNotFoundError:
            mode = stat.S_IFREG
        if not stat.S_ISREG(mode):
            raise confined.Refused(target, confined.kind(mode), "a regular file")
        os.replace(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=parent)
        raise


def _open_lock(path: Path) -> int:
    """The publish lock's descriptor: created or opened as a regular file, never through a link
    (O_NOFOLLOW: a link planted there would have us create what it names) and never waiting on a
    FIFO (O_NONBLOCK); PublishError naming it otherwise."""
    try:
        fd = os.open(
            path,
            os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            0o644,
        )
    except OSError as exc:
        kind = (
            "a symbolic link"
            if exc.errno == errno.ELOOP
            else "a directory"
            if exc.errno == errno.EISDIR
            else None
        )
        raise PublishError(
            f"{path}: the publish lock cannot be opened ({kind or exc.strerror}): "
            "remove it, a publish makes its own"
        ) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise PublishError(
            f"{path}: the publish lock is not a regular file: remove it, a publish makes its own"
        )
    os.set_blocking(fd, True)
    return fd


@dataclass(frozen=True)
class BucketStore:
    """A bucket over the S3 API (boto3): any S3-compatible store. Each object carries its sha256
    as user metadata, so what a bucket holds is known without downloading it (objects someone else
    wrote are hashed by reading them). Each ``<dir>/index.html`` is also written as the object
    ``<dir>/``: an index URL ending in a slash then works over the plain S3 REST API, without
    website hosting."""

    target: BucketTarget
    # a boto3 S3 client; made from the target when None
    client: Any = field(default=None, compare=False)

    @classmethod
    def open(cls, target: BucketTarget) -> BucketStore:
        try:
            import boto3
            from botocore.config import Config
        except ImportError:
            raise PublishError(
                "publishing to a bucket needs boto3: pip install 'wheelfactory[publish]'"
            ) from None
        client = boto3.client(
            "s3",
            endpoint_url=target.endpoint_url,
            config=Config(retries={"max_attempts": 3, "mode": "standard"}),
        )
        return cls(target, client)

    def _failed(self, exc: Exception, doing: str) -> PublishError:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        endpoint = mask_password(str(getattr(self.client.meta, "endpoint_url", "") or ""))
        return PublishError(f"{self.target} ({endpoint}): {doing} failed: {detail}")

    def _errors(self) -> tuple[type[Exception], ...]:
        from botocore.exceptions import BotoCoreError, ClientError

        return (BotoCoreError, ClientError)

    def holds(self, path: str) -> bool:
        key = self.target.key(path)
        try:
            self.client.head_object(Bucket=self.target.bucket, Key=key)
        except self._errors() as exc:
            if _status(exc) == 404:
                return False
            raise self._failed(exc, f"reading {key}") from None
        return True

    def held(self, path: str) -> str | None:
        key = self.target.key(path)
        try:
            head = self.client.head_object(Bucket=self.target.bucket, Key=key)
        except self._errors() as exc:
            if _status(exc) == 404:
                return None
            raise self._failed(exc, f"reading {key}") from None
        recorded = (head.get("Metadata") or {}).get("sha256")
        if isinstance(recorded, str) and len(recorded) == 64:
            return recorded
        body = self.read(path, limit=1 << 40)
        return None if body is None else sha256_of(body)

    def read(self, path: str, limit: int = LISTING_LIMIT) -> bytes | None:
        key = self.target.key(path)
        try:
            answer = self.client.get_object(Bucket=self.target.bucket, Key=key)
            if int(answer.get("ContentLength") or 0) > limit:
                raise PublishError(
                    f"{self.target}/{path} is over {limit >> 20} MiB: not a listing wheelfactory wrote"
                )
            data = answer["Body"].read()
        except self._errors() as exc:
            if _status(exc) == 404:
                return None
            raise self._failed(exc, f"reading {key}") from None
        return data if isinstance(data, bytes) else bytes(data)

    def put(self, path: str, body: bytes | Path, sha256: str, content_type: str) -> None:
        keys = [self.target.key(path)]
        if path == "index.html" or path.endswith("/index.html"):
            keys.append(self.target.key(path[: -len("index.html")]) or "")
        for key in keys:
            if not key:
                continue  # the bucket's root page: served as index.html only
            try:
                with contextlib.ExitStack() as stack:
                    stream = (
                        body if isinstance(body, bytes) else stack.enter_context(body.open("rb"))
                    )
                    self.client.put_object(
                        Bucket=self.target.bucket,
                        Key=key,
                        Body=stream,
                        ContentType=content_type,
                        Metadata={"sha256": sha256},
                    )
            except self._errors() as exc:
                raise self._failed(exc, f"writing {key}") from None

    def default_base_url(self) -> str:
        endpoint = str(self.client.meta.endpoint_url).rstrip("/")
        return "/".join(p for p in (endpoint, self.target.bucket, self.target.prefix) if p)

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        try:
            self.client.head_bucket(Bucket=self.target.bucket)
        except self._errors() as exc:
            if _status(exc) == 404:
                raise PublishError(
                    f"{self.target}: the bucket {self.target.bucket} does not exist; create it "
                    "first (wheelfactory never creates buckets)"
                ) from None
            raise self._failed(exc, "reaching the bucket") from None
        # S3 has no lock: two publishers at once are the caller's to avoid (one CI job publishes)
        yield


def _status(exc: Exception) -> int | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        code = response.get("Error", {}).get("Code")
        if code in ("404", "NoSuchKey", "NotFound", "NoSuchBucket"):
            return 404
        return int(status) if isinstance(status, int) else None
    return None


def open_store(target: DirectoryTarget | BucketTarget) -> Store:
    return (
        DirectoryStore(target) if isinstance(target, DirectoryTarget) else BucketStore.open(target)
    )
