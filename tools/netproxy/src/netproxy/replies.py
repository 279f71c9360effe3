"""Answers that are not the target's own, for a route's reply faults: what a misconfigured or
failing middlebox in front of an HTTP API answers (a captive portal, a load balancer's error
page served with 200, a cache that mixed two bodies up).

The proxy is a TCP proxy; for these faults it reads just enough of HTTP/1.1 to tell where a
request ends and which idempotency key it carried. Each fault answers and closes the
connection (``Connection: close``): one exchange per faulted connection, so the client's next
call opens a new one.
"""

from __future__ import annotations

import random
import re

HTML = "html"
"""The request is forwarded, the target's reply thrown away, and ``200 OK`` with an HTML page
answered instead: the call may have done what it asked (a charge made) and the caller cannot
tell."""
GARBAGE = "garbage"
"""The request is not forwarded; ``200 OK`` with a body of random bytes is answered."""

_PAGE = (b"<!DOCTYPE html>\n<html><head><title>Service Unavailable</title></head>\n"
         b"<body><h1>Please wait</h1><p>The site you are trying to reach is temporarily "
         b"unavailable. Reference #18.2f1e3b17.1712345678</p></body></html>\n")
_HEAD_END = b"\r\n\r\n"
_CONTENT_LENGTH = re.compile(rb"(?im)^content-length:[ \t]*(\d+)[ \t]*\r?$")
_IDEMPOTENCY_KEY = re.compile(rb"(?im)^idempotency-key:[ \t]*([^\r\n]*?)[ \t]*\r?$")


def _response(content_type: bytes, body: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Type: " + content_type
            + b"\r\nContent-Length: " + str(len(body)).encode()
            + b"\r\nConnection: close\r\n\r\n" + body)


def html_page() -> bytes:
    return _response(b"text/html; charset=utf-8", _PAGE)


def garbage(rng: random.Random, size: int = 96) -> bytes:
    """Random bytes labelled as JSON, as a body mixed up with another one would be."""
    return _response(b"application/json", rng.randbytes(size))


def request_length(buffer: bytes) -> int | None:
    """How many bytes the HTTP/1.1 request at the start of ``buffer`` takes (its head and a
    ``Content-Length`` body); None while its head is not complete."""
    end = buffer.find(_HEAD_END)
    if end < 0:
        return None
    head = buffer[:end]
    length = _CONTENT_LENGTH.search(head)
    return end + len(_HEAD_END) + (int(length.group(1)) if length else 0)


def idempotency_key(head: bytes) -> str | None:
    """The ``Idempotency-Key`` the request (its first bytes) carries, if it says."""
    found = _IDEMPOTENCY_KEY.search(head)
    return found.group(1).decode(errors="replace") if found else None
