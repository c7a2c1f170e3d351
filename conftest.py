"""pytest set-up shared by the unit tests, nbval and the browser test.

nbval starts one Jupyter kernel per notebook. Kernels started side by side (``pytest -n 2``) pick
TCP ports independently and can collide ("Address already in use"); giving each kernel IPC transport
on a unique socket path removes that race. ZeroMQ has no IPC transport on Windows: there the kernels
keep TCP.
"""

import os
import tempfile
import uuid

import pytest

try:
    import nbval.kernel
    from jupyter_client.manager import KernelManager
except ImportError:  # nbval is a test dependency; the unit tests run without it
    nbval = None


if nbval is not None and os.name != "nt":

    class _IPCKernelManager(KernelManager):
        """A KernelManager whose sockets are files in a private temporary folder, never TCP
        ports."""

        def __init__(self, *args, **kwargs):
            socket_dir = tempfile.mkdtemp(prefix="nbk-")
            super().__init__(
                *args, transport="ipc", ip=os.path.join(socket_dir, uuid.uuid4().hex[:8]), **kwargs
            )

    nbval.kernel.KernelManager = _IPCKernelManager


def pytest_addoption(parser):
    parser.addoption(
        "--run-browser",
        action="store_true",
        help="run the JupyterLab browser test (make test-browser)",
    )


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "browser: drives JupyterLab in Chromium; runs only with --run-browser"
    )


def pytest_collection_modifyitems(config, items):
    """Browser tests start JupyterLab and Chromium: they run only when asked for
    (``make test-browser``)."""
    if config.getoption("--run-browser"):
        return
    skip = pytest.mark.skip(reason="browser test: run it with `make test-browser`")
    for item in items:
        if item.get_closest_marker("browser"):
            item.add_marker(skip)
