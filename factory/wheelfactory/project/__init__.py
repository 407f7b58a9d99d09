"""The kinds of input project (native kernel.toml, kernel-builder build.toml, bring-your-own
setup.py/pyproject.toml; project/kinds.py), what a variant's build directory holds (staging), and
the content keys that decide rebuilds."""
