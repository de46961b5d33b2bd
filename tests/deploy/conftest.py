"""Fixtures shared by the deployment checks."""

from __future__ import annotations

from typing import Any

import pytest
from deploy_tools import missing


@pytest.fixture(scope="module")
def helm() -> Any:
    """The Helm SDK (PyPI helm-python-sdk) that renders the chart offline."""
    try:
        import helm_python
    except ImportError:
        missing("helm-python-sdk", "pip install helm-python-sdk")
    return helm_python
