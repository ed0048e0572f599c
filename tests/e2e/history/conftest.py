"""The S3-compatible server of tests/support/s3server.py, for `gate --publish` end to end."""

from support.s3server import s3, s3_endpoint  # noqa: F401
