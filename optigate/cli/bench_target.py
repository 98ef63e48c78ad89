"""Where `bench` and `bench residency` send requests: the endpoint, its URL and the credentials to sign with."""

from __future__ import annotations

import argparse

from optigate.cli.errors import CANNOT_RESOLVE_EXIT, CliError, UsageError


def check_target_arguments(args: argparse.Namespace) -> None:
    """--endpoint given; --endpoint-url a http(s) URL, or else AWS credentials to sign requests to SageMaker."""
    from urllib.parse import urlsplit

    if not args.endpoint:
        raise UsageError("--endpoint is required: the SageMaker endpoint's name (with --endpoint-url for the emulator)")
    if args.endpoint_url:
        parts = urlsplit(args.endpoint_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(
                f"--endpoint-url {args.endpoint_url!r}: expected http(s)://host[:port], e.g. http://127.0.0.1:8080"
            )
        return
    import botocore.session

    if botocore.session.get_session().get_credentials() is None:
        raise CliError(
            f"no AWS credentials to sign requests to {args.endpoint} in {args.region}: configure them "
            "(aws configure, AWS_PROFILE), or give --endpoint-url http://127.0.0.1:PORT for `optigate emulate`",
            exit_code=CANNOT_RESOLVE_EXIT,
        )
