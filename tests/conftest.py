from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
SAMPLES = DATA / "samples"  # copies of ../shared/samples, so the project builds without shared/


@pytest.fixture(autouse=True)
def _no_real_aws(monkeypatch):
    """Tests never reach a real AWS account, whatever the machine's environment holds."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("SPENDLAKE_CONFIG", raising=False)


def require_binary(name: str) -> str:
    """Path of a Debian binary a test needs. Under CI=true a missing binary fails the test
    (CI must install it); elsewhere the test is skipped with the install hint."""
    import shutil

    path = shutil.which(name)
    if path:
        return path
    message = f"{name} not found: apt-get install the package that provides it (see .ci/run)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)
