"""pytest set-up shared by the unit tests, nbval and the browser test.

nbval starts one Jupyter kernel per notebook. Kernels started side by side (``pytest -n 2``) pick
TCP ports independently and can collide ("Address already in use"); giving each kernel IPC transport
on a unique socket path removes that race. ZeroMQ has no IPC transport on Windows: there the kernels
keep TCP.

Nothing is downloaded at run time, and this proves it: ``tests/network_guard.py`` refuses every
outbound connection in the pytest process and in every nbval kernel (each runs the guard at
start-up), allowing only local sockets, and a test or a notebook cell during which a connection was
attempted fails, even when its code caught the error (``tests/test_network_guard.py`` checks both).
"""

import importlib.util
import os
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

_GUARD_FILE = Path(__file__).resolve().parent / "tests" / "network_guard.py"
_spec = importlib.util.spec_from_file_location("network_guard", _GUARD_FILE)
network_guard = importlib.util.module_from_spec(_spec)
sys.modules["network_guard"] = network_guard  # the tests import this same module
_spec.loader.exec_module(network_guard)
# one log per pytest process (each xdist worker has its own), shared with the kernels it starts
_GUARD_LOG = Path(tempfile.mkdtemp(prefix="netguard-")) / "refused.log"


def kernel_guard_arguments() -> list[str]:
    """The command-line arguments that make an IPython kernel install the guard at start-up,
    logging to this process's log."""
    code = f"__import__('runpy').run_path({str(_GUARD_FILE)!r})['install']({str(_GUARD_LOG)!r})"
    return [f"--IPKernelApp.exec_lines={code}"]


try:
    import nbval.kernel
    from jupyter_client.manager import KernelManager
except ImportError:  # nbval is a test dependency; the unit tests run without it
    nbval = None


if nbval is not None:

    class _IPCKernelManager(KernelManager):
        """A KernelManager whose sockets are files in a private temporary folder, never TCP
        ports (on Windows, which has no IPC transport, TCP as before), and whose kernels run the
        network guard."""

        def __init__(self, *args, **kwargs):
            if os.name != "nt":
                socket_dir = tempfile.mkdtemp(prefix="nbk-")
                kwargs.update(transport="ipc", ip=os.path.join(socket_dir, uuid.uuid4().hex[:8]))
            super().__init__(*args, **kwargs)

        def format_kernel_cmd(self, extra_arguments=None):
            """The kernel's command line, with the network guard installed at start-up (also
            when the kernel is restarted)."""
            return super().format_kernel_cmd([*(extra_arguments or []), *kernel_guard_arguments()])

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
    network_guard.install(_GUARD_LOG)


def _refused_during(phase):
    """Run one phase of a test (or of a notebook cell), then fail it if a connection was attempted
    meanwhile, here or in its kernel: the error may have been caught by the code that tried."""
    then = network_guard.mark()
    result = yield
    new = network_guard.refused_since(then)
    if new:
        pytest.fail(
            f"the network guard refused {len(new)} outbound connection(s) during {phase}: "
            f"{'; '.join(new[:3])}. Nothing may be downloaded at run time.",
            pytrace=False,
        )
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _refused_during("set-up"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _refused_during("the test"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    return (yield from _refused_during("tear-down"))


def pytest_collection_modifyitems(config, items):
    """Browser tests start JupyterLab and Chromium: they run only when asked for
    (``make test-browser``)."""
    if config.getoption("--run-browser"):
        return
    skip = pytest.mark.skip(reason="browser test: run it with `make test-browser`")
    for item in items:
        if item.get_closest_marker("browser"):
            item.add_marker(skip)
