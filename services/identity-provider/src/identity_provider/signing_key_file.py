"""Makes the identity provider's signing key file when there is none, for a container that
keeps it in a volume (docker-compose.yml runs this before the provider starts):

    python -m identity_provider.signing_key_file /data/identity-signing.key

An existing file is left as it is, so that the key, and every token it signed, outlives a
restart. The file is written whole with ``O_EXCL`` and mode 0600: two starts at once agree on
one key, and no other user of the machine reads it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from identity_provider.keys import SigningKey, new_private_key_pem


def ensure(path: Path) -> bool:
    """Makes a new key at ``path`` unless a file is there; True when it made one. An existing
    file that holds no RSA key stops the process (naming the file), rather than be replaced."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        SigningKey.from_file(path)
        return False
    try:
        os.write(fd, new_private_key_pem())
    finally:
        os.close(fd)
    return True


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m identity_provider.signing_key_file PATH", file=sys.stderr)
        return 2
    path = Path(argv[0])
    print(f"identity provider: {'made a new' if ensure(path) else 'kept the'} signing key "
          f"{path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
