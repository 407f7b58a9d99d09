"""The kinds of input project (factory-native kernel.toml, bring-your-own setup.py/pyproject),
what a variant's build directory holds (staging), and the content keys that decide rebuilds."""
