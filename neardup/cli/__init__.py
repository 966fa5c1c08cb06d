"""Command-line interface (``neardup``). Thin shells: parse, call the library, map errors once."""
