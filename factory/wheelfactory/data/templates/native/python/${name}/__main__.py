"""``python -m ${name} report``: versions, the loaded backend and why, toolchain checks."""

import sys

from . import _package
from ._runtime import main

if __name__ == "__main__":
    sys.exit(main(_package))
