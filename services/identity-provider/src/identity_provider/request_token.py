"""Asks a running identity provider for a token, with the standard library only, for a
container or a shell that needs one (an operator making a Kubernetes Secret, such as the smoke
Job's tokens):

    python -m identity_provider.request_token URL SUB ROLE[,ROLE] [--expires-in S] [--out FILE]

``URL`` is the provider's base URL as this process reaches it (the token's ``iss`` is the
provider's own, whatever the URL). Without ``--out`` the token is printed; with it, it replaces
``FILE`` at once (written beside it, then renamed: a reader never sees half a token).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path


def request_token(base_url: str, sub: str, roles: list[str], expires_in: int | None = None,
                  timeout: float = 10.0) -> str:
    body = {"sub": sub, "roles": roles, **({"expires_in": expires_in} if expires_in else {})}
    request = urllib.request.Request(f"{base_url.rstrip('/')}/token", method="POST",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return str(json.loads(response.read())["access_token"])


def write_token(path: Path, token: str, mode: int) -> None:
    partial = path.with_name(path.name + ".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, token.encode())
    finally:
        os.close(fd)
    os.chmod(partial, mode)  # the umask may have narrowed it
    os.replace(partial, path)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m identity_provider.request_token")
    parser.add_argument("url", help="the identity provider's base URL, as seen from here")
    parser.add_argument("sub", help="the token's subject")
    parser.add_argument("roles", help="its roles, comma-separated: customer, operator")
    parser.add_argument("--expires-in", type=int, help="its lifetime in seconds")
    parser.add_argument("--out", type=Path, help="the file to write it to, instead of stdout")
    parser.add_argument("--mode", type=lambda text: int(text, 8), default=0o600,
                        help="the file's mode, octal (default 600)")
    args = parser.parse_args(argv)
    try:
        token = request_token(args.url, args.sub, args.roles.split(","), args.expires_in)
    except (urllib.error.URLError, OSError, ValueError, KeyError) as exc:
        print(f"no token from {args.url}: {exc}", file=sys.stderr)
        return 1
    if args.out is None:
        print(token)
    else:
        write_token(args.out, token, args.mode)
        print(f"token for {args.sub} written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
