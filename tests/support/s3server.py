"""A real S3-compatible server for the history's object-store tests: moto's server mode on a local port.

Not a mock of the client: s3fs and botocore make real HTTP requests, signed with real (dummy) keys, to a server
that answers as S3 does, so the tests cover the endpoint setting, the error codes a server sends and the
connection a client makes. One server per session (starting it takes a second); each test gets a bucket of its
own and the AWS settings pointed at the server, with the host's own AWS configuration out of reach.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Iterator

import pytest

# Every setting through which a host's own AWS configuration could reach a test, emptied for each one.
_HOST_AWS = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL_S3",
             "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "PARITY_KIT_STORAGE_OPTIONS", "PARITY_KIT_PUBLISH")
ACCESS_KEY = "testing-key"
SECRET_KEY = "testing-secret"


@dataclass(frozen=True)
class S3:
    """The server's endpoint and this test's bucket."""

    endpoint: str
    bucket: str

    def url(self, prefix: str = "") -> str:
        return f"s3://{self.bucket}/{prefix}" if prefix else f"s3://{self.bucket}"

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)

    def keys(self, prefix: str = "") -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """moto's threaded server on a free port of 127.0.0.1, for the whole session."""
    pytest.importorskip("moto.server", reason="moto[server] is in the test extra: pip install parity-kit[test]")
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def point_aws_at(monkeypatch: pytest.MonkeyPatch, endpoint: str, tmp_path) -> None:
    """The standard AWS settings a user would set for an S3-compatible server, and nothing from this host."""
    for name in _HOST_AWS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no credential lookup on a link-local address


@pytest.fixture
def s3(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path) -> S3:
    """A fresh bucket on the session's server, and the AWS settings pointed at it."""
    pytest.importorskip("s3fs", reason="s3fs is the s3 extra: pip install parity-kit[s3]")
    point_aws_at(monkeypatch, s3_endpoint, tmp_path)
    store = S3(s3_endpoint, f"runs-{uuid.uuid4().hex[:12]}")
    store.client().create_bucket(Bucket=store.bucket)
    return store


@dataclass(frozen=True)
class Keys:
    """A user the server's IAM knows, with no policy: its key is known, but it may do nothing."""

    access_key: str
    secret_key: str


@pytest.fixture
def s3_checks_keys(s3: S3, monkeypatch: pytest.MonkeyPatch) -> Keys:
    """The same server, now checking every request's signature and key against its IAM users: moto checks
    credentials only past INITIAL_NO_AUTH_ACTION_COUNT requests, which is unbounded by default. The setting is
    read at each request, so patching it turns the check on for this test alone. Returns a user's keys (made
    before the check starts); the test's dummy keys are unknown to the server."""
    import boto3
    from moto import settings
    from moto.core.responses import ActionAuthenticatorMixin

    iam = boto3.client("iam", endpoint_url=s3.endpoint, region_name="us-east-1",
                       aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)
    user = f"reader-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=user)
    made = iam.create_access_key(UserName=user)["AccessKey"]
    monkeypatch.setattr(settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)
    monkeypatch.setattr(ActionAuthenticatorMixin, "request_count", 0)
    return Keys(made["AccessKeyId"], made["SecretAccessKey"])
