"""Fixtures the ci tests share."""

from tests.ci.torch_index_kit import http_index  # noqa: F401 (a fixture: a torch index over HTTP on 127.0.0.1)
