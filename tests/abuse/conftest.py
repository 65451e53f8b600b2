"""The abuse suite (issue 12, DESIGN §12): tests marked `abuse` drive ONE real server each through raw stdio.

The default test run includes the bounded campaign (tests/abuse/test_campaign.py, well under two minutes on two
busy cores); `benchmarks/abuse.py` runs the full one and prints its figures. `pytest -m abuse` runs only these.
"""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "abuse: the fuzz and abuse suite against a real server over raw stdio")
