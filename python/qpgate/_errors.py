# SPDX-License-Identifier: BSD-2-Clause
"""Exceptions, each with the C library's reason."""
import errno
import os

from . import _native as n


class Error(Exception):
    """A request the server or the library refused."""


class ConnectionError(Error, ConnectionError):  # noqa: A001 (qpgate.ConnectionError)
    """The pool could not connect, a connection failed, or the pool closed."""


class KeyTooLarge(Error, ValueError):
    """A key over 250 bytes."""


class ValueTooLarge(Error, ValueError):
    """A value over the server's --kv-max-value, or over the buffer given."""


class StoreFull(Error):
    """The server's store has no room for the value."""


class OverQuota(Error):
    """A value larger than the client's tenant may hold (its quota or its largest value)."""


class Unavailable(Error):
    """A cluster member that serves no key now, or a key with no owner."""


class CorruptValue(Error):
    """A value that did not match its digest: no byte of it is returned."""


_BY_STATUS = {n.KEY_TOO_LARGE: KeyTooLarge, n.VALUE_TOO_LARGE: ValueTooLarge,
              n.STORE_FULL: StoreFull, n.OVER_QUOTA: OverQuota, n.UNAVAILABLE: Unavailable,
              n.WRONG_OWNER: Unavailable, n.CORRUPT: CorruptValue}


def from_status(status, what):
    """The exception for a C status (enum qpg_kv_status, or a negative errno)."""
    if status < 0:
        code = -status
        text = "the pool is closed" if code == errno.ECANCELED else os.strerror(code)
        return ConnectionError(code, f"{what}: {text}")
    if status == n.CORRUPT:
        return CorruptValue(f"{what}: the value did not match its digest (none of it returned)")
    name = n.lib.qpg_kv_status_name(status).decode()
    return _BY_STATUS.get(status, Error)(f"{what}: {name}")
