"""Helpers every layer may use: paths, provenance, the result store, the console, the names of choices."""
