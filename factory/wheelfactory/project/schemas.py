"""The JSON Schemas wheelfactory ships for editors (Taplo / Even Better TOML), one per config file,
written from the key declarations the parsers read (plan/schema.py).

    python -m wheelfactory.project.schemas    # writes them again into wheelfactory/data/schema/

tests/plan/test_schema.py fails while a shipped file differs from what this writes.
"""

from __future__ import annotations

from pathlib import Path

from wheelfactory.plan.matrix_schema import MATRIX_FILE
from wheelfactory.plan.schema import document_schema, render
from wheelfactory.project.kernel_toml import KERNEL_FILE

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "data" / "schema"
REGENERATE = "python -m wheelfactory.project.schemas"


def schema_texts() -> dict[str, str]:
    """File name in data/schema/ -> the text it must hold."""
    return {
        "matrix.schema.json": render(
            document_schema(MATRIX_FILE, title="wheelfactory matrix.toml")
        ),
        "kernel.schema.json": render(
            document_schema(KERNEL_FILE, title="wheelfactory kernel.toml")
        ),
    }


def write_schemas(directory: Path = SCHEMA_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in schema_texts().items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write_schemas():
        print(path)
