"""Checks every network-facing part shares: loopback addresses and bearer tokens."""

from __future__ import annotations

import hmac
import ipaddress


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bearer_matches(header: str | bytes, token: str) -> bool:
    """`Authorization: Bearer <token>`, compared in constant time; an empty token never matches."""
    if isinstance(header, bytes):
        header = header.decode("latin-1")
    scheme, _, given = header.strip().partition(" ")
    given = given.strip()
    # compare_digest: the time taken does not reveal how much of the token matched.
    return bool(token) and scheme.lower() == "bearer" and bool(given) and hmac.compare_digest(given, token)
