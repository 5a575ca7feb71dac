"""Hostile inputs (SECURITY-BAR §4) and misbehaving parsers (§5.5) against the guard.

A package, so its test modules (``test_labels.py`` ...) never collide with the
unit tests of the same basename, and so `hostile._probes` has a module name
a worker can import when a probe extractor is pickled to it (see
`conftest.probes_importable`).
"""
