"""The packaging tier: builds the .deb/.rpm, inspects them, installs the .deb on this machine (root)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # Registered here so the tier is self-contained under --strict-markers.
    config.addinivalue_line(
        "markers", "packaging: builds and installs the deb/rpm packages (slow, needs root)"
    )
