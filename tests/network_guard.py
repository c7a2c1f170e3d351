"""A guard that refuses outbound network connections, so that a test or a notebook that tries to
download anything fails the run (the course's data and model ship with the package).

``install(log)`` patches Python's ``socket`` module in the running process: connecting (``connect``,
``connect_ex``, ``sendto``) to anything but a loopback address, and resolving a host name other
than ``localhost`` or this machine's own name (a DNS query goes out to the network too), raise
:class:`NetworkBlocked`. Local sockets stay usable: files (``AF_UNIX``, the IPC transport of the
test kernels), ``127.0.0.0/8`` and ``::1``. Every refused attempt is also appended to the ``log``
file, because code that expects to be offline may catch the error: root ``conftest.py`` reads the
log after each test and each notebook cell (in the nbval kernels too, which run :func:`install` at
start-up) and fails the one during which a connection was attempted.

Python's ``socket`` module is what ``urllib``, ``requests``, ``httpx``, ``huggingface_hub`` and
``torch.hub`` connect through; a C library with its own sockets would not be seen.
"""

import contextlib
import ipaddress
import socket
from pathlib import Path

__all__ = ["NetworkBlocked", "install", "attempts", "mark", "refused_since", "expect_refused"]

_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}
_HOSTNAME = socket.gethostname().lower()
_state = {"log": None, "excused": 0, "installed": False}


class NetworkBlocked(OSError):
    """An outbound connection (or a DNS lookup) refused by the network guard."""


def _is_local(host) -> bool:
    """Whether ``host`` (a name or an address, as ``connect`` and ``getaddrinfo`` take it) stays
    on this machine: loopback addresses, ``localhost``, or no host at all."""
    if host is None or host in ("", b""):
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    name = host.split("%", 1)[0].strip("[]").lower()  # fe80::1%eth0, [::1]
    if name in _LOCAL_NAMES or name.endswith(".localhost") or name == _HOSTNAME:
        return True  # this machine's own name resolves through /etc/hosts
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def _is_numeric(host) -> bool:
    """Whether ``host`` is an address written out (resolving it sends no DNS query)."""
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    try:
        ipaddress.ip_address(str(host).split("%", 1)[0].strip("[]"))
    except ValueError:
        return False
    return True


def _refuse(what: str):
    message = (
        f"network guard: {what} refused. The tests and notebooks run offline: nothing may be "
        "downloaded at run time (tests/network_guard.py)"
    )
    if _state["log"] is not None:
        with open(_state["log"], "a", encoding="utf-8") as log:
            log.write(f"{what}\n")
    raise NetworkBlocked(message)


def _check_address(sock, address, action: str):
    if sock.family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple):
        if not _is_local(address[0]):
            _refuse(f"{action} to {address[0]}:{address[1]}")


def install(log: str | Path | None = None) -> None:
    """Refuse outbound connections in this process from now on; append each refused attempt to
    ``log`` (a file) if given. Installing twice changes only the log."""
    _state["log"] = str(log) if log is not None else None
    if _state["installed"]:
        return
    _state["installed"] = True
    connect, connect_ex, sendto = (
        socket.socket.connect,
        socket.socket.connect_ex,
        socket.socket.sendto,
    )
    getaddrinfo, gethostbyname = socket.getaddrinfo, socket.gethostbyname
    gethostbyname_ex = socket.gethostbyname_ex

    def guarded_connect(self, address):
        _check_address(self, address, "connection")
        return connect(self, address)

    def guarded_connect_ex(self, address):
        _check_address(self, address, "connection")
        return connect_ex(self, address)

    def guarded_sendto(self, data, *args):
        _check_address(self, args[-1], "datagram")
        return sendto(self, data, *args)

    def guarded_getaddrinfo(host, *args, **kwargs):
        if not (_is_local(host) or _is_numeric(host)):
            _refuse(f"DNS lookup of {host}")
        return getaddrinfo(host, *args, **kwargs)

    def guarded(lookup):
        def resolve(host):
            if not (_is_local(host) or _is_numeric(host)):
                _refuse(f"DNS lookup of {host}")
            return lookup(host)

        return resolve

    socket.socket.connect, socket.socket.connect_ex = guarded_connect, guarded_connect_ex
    socket.socket.sendto = guarded_sendto
    socket.getaddrinfo = guarded_getaddrinfo
    socket.gethostbyname, socket.gethostbyname_ex = (
        guarded(gethostbyname),
        guarded(gethostbyname_ex),
    )


def attempts() -> list[str]:
    """Every refused attempt logged so far (by this process and by the kernels it started)."""
    if _state["log"] is None or not Path(_state["log"]).exists():
        return []
    return Path(_state["log"]).read_text(encoding="utf-8").splitlines()


def mark() -> tuple[int, int]:
    """Where the log stands now, for :func:`refused_since`."""
    return len(attempts()), _state["excused"]


def refused_since(then: tuple[int, int]) -> list[str]:
    """The attempts refused since :func:`mark` returned ``then``, unless :func:`expect_refused`
    expected them all."""
    new = attempts()[then[0] :]
    return new if len(new) > _state["excused"] - then[1] else []


@contextlib.contextmanager
def expect_refused():
    """For the guard's own tests: the block must attempt at least one connection, and its refused
    attempts do not fail the test."""
    before = len(attempts())
    yield
    new = len(attempts()) - before
    assert new > 0, "expected the guard to refuse a connection; none was attempted"
    _state["excused"] += new
