"""Suite-wide settings: every test runs offline (pytest-socket, see pyproject.toml)."""

from __future__ import annotations

import os

os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")
