"""The S3-compatible server of tests/support/s3server.py, for the history's object-store tests."""

from support.s3server import s3, s3_checks_keys, s3_endpoint  # noqa: F401
