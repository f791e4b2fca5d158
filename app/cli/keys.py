"""``looping-keys``: generate the edge's Ed25519 signing key, or print its public JWKS.

    looping-keys [--kid KID] [--env] [--out FILE]   generate a private JWK (CONTRACT §4)
    looping-keys --public [--key-file FILE]         print the public JWKS of a private JWK

Generated keys go to stdout as one JSON line, as a shell line ``A2A_SIGNING_KEY='…'`` with
``--env``, or to a new file created with mode 0600 with ``--out`` (then nothing secret is
printed). ``--public`` reads ``--key-file``, else ``A2A_SIGNING_KEY``, else the file named by
``A2A_SIGNING_KEY_FILE``. Bad input exits 2 with one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from app.errors import ConfigError
from app.security.keys import SigningKey, default_kid, generate_private_jwk, validate_kid

PROG = "looping-keys"


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, exit 2 (argparse's default prints the whole usage block).
        raise _UsageError(message)


def _parser() -> _Parser:
    parser = _Parser(prog=PROG, description="Generate or inspect the edge's Ed25519 signing key.")
    parser.add_argument("--kid", help="key id (default a2a-YYYY-MM-DD, UTC)")
    parser.add_argument("--env", action="store_true", help="print as A2A_SIGNING_KEY='…'")
    parser.add_argument("--out", type=Path, help="write the private JWK to a new 0600 file")
    parser.add_argument("--public", action="store_true", help="print the public JWKS")
    parser.add_argument("--key-file", type=Path, help="private JWK file for --public")
    return parser


def _write_private(path: Path, text: str) -> None:
    # O_EXCL: never overwrite (or follow a planted symlink to) an existing file; 0600 from the
    # first byte, so the key is never readable by others even briefly.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise _UsageError(f"{path} already exists; refusing to overwrite a key file") from None
    except OSError as exc:
        raise _UsageError(f"cannot create {path}: {exc.strerror}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def _generate(args: argparse.Namespace) -> int:
    if args.key_file is not None:
        raise _UsageError("--key-file is only used with --public")
    if args.env and args.out is not None:
        raise _UsageError("--env and --out are exclusive (--out writes the JSON key file)")
    kid = args.kid if args.kid is not None else default_kid()
    try:
        validate_kid(kid)
    except ValueError as exc:
        raise _UsageError(f"--kid: {exc}") from None
    line = json.dumps(generate_private_jwk(kid), separators=(",", ":"))
    if args.out is not None:
        _write_private(args.out, line + "\n")
        print(f"wrote private JWK kid={kid} to {args.out} (mode 0600)")
    elif args.env:
        # The JWK alphabet (base64url, the kid rule, JSON punctuation) has no single quote.
        print(f"A2A_SIGNING_KEY='{line}'")
    else:
        print(line)
    return 0


def _read_key_text(key_file: Path | None) -> tuple[str, str]:
    """The key's text and where it came from (named in errors)."""
    if key_file is None:
        text = os.environ.get("A2A_SIGNING_KEY", "")
        if text.strip():
            return text, "A2A_SIGNING_KEY"
        named = os.environ.get("A2A_SIGNING_KEY_FILE", "")
        if not named:
            raise _UsageError("no key: pass --key-file or set A2A_SIGNING_KEY")
        key_file = Path(named)
    try:
        return key_file.read_text(encoding="utf-8"), f"key file {key_file}"
    except (OSError, UnicodeDecodeError):
        raise _UsageError(f"cannot read key file {key_file}") from None


def _public(args: argparse.Namespace) -> int:
    if args.kid is not None or args.env or args.out is not None:
        raise _UsageError("--public takes only --key-file")
    text, source = _read_key_text(args.key_file)
    try:
        key = SigningKey.from_jwk_json(text)
    except ConfigError as exc:
        # The loader names the variable; the defect is the same wherever the key came from.
        raise _UsageError(f"{source}: {exc.message.removeprefix('A2A_SIGNING_KEY: ')}") from None
    print(key.jwks_json.decode("utf-8"))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        return _public(args) if args.public else _generate(args)
    except _UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
