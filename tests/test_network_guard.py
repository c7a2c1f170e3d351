"""The network guard of root ``conftest.py``: outbound connections are refused in the tests and in
nbval's kernels, local sockets still work, and an attempt fails the test even when caught."""

import shutil
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import network_guard
import pytest


def test_outbound_connections_and_dns_lookups_are_refused_here():
    with network_guard.expect_refused(), pytest.raises(network_guard.NetworkBlocked):
        socket.create_connection(("1.1.1.1", 80), timeout=1)
    with network_guard.expect_refused(), pytest.raises(network_guard.NetworkBlocked):
        socket.getaddrinfo("huggingface.co", 443)
    with network_guard.expect_refused(), pytest.raises(urllib.error.URLError, match="guard"):
        urllib.request.urlopen("https://example.com", timeout=1)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with udp, network_guard.expect_refused(), pytest.raises(network_guard.NetworkBlocked):
        udp.sendto(b"x", ("8.8.8.8", 53))


def test_local_sockets_still_work():
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    accepted = threading.Thread(target=lambda: server.accept()[0].sendall(b"ok"))
    accepted.start()
    with socket.create_connection(("localhost", port), timeout=5) as client:
        assert client.recv(2) == b"ok"
    accepted.join()
    server.close()
    left, right = socket.socketpair()  # AF_UNIX
    left.sendall(b"hi")
    assert right.recv(2) == b"hi"
    left.close()
    right.close()


def test_an_attempt_that_the_code_caught_still_fails_the_run(tmp_path):
    """A test that swallows the guard's error (as a 'try the network, else go on' cell would) is
    failed by the conftest's hook."""
    root = Path(__file__).resolve().parent.parent
    shutil.copy(root / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "tests").mkdir()
    shutil.copy(network_guard.__file__, tmp_path / "tests" / "network_guard.py")
    (tmp_path / "test_quiet_download.py").write_text(
        "import socket\n\n\n"
        "def test_tries_quietly():\n"
        "    try:\n"
        "        socket.create_connection(('1.1.1.1', 80), timeout=1)\n"
        "    except OSError:\n"
        "        pass\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_quiet_download.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1, result.stdout[-3000:]
    assert "1 failed" in result.stdout
    assert "network guard refused 1 outbound connection(s) during the test" in result.stdout
    assert "1.1.1.1:80" in result.stdout


def test_nbval_kernels_refuse_connections_and_still_run_cells():
    """The kernel nbval starts (through the conftest's KernelManager) has the guard installed."""
    from nbval.kernel import CURRENT_ENV_KERNEL_NAME, RunningKernel

    kernel = RunningKernel(CURRENT_ENV_KERNEL_NAME)
    try:

        def run(code):
            msg_id = kernel.execute_cell_input(code, allow_stdin=False)
            kernel.await_reply(msg_id, timeout=60)
            outputs = []
            while True:
                msg = kernel.get_message(stream="iopub", timeout=60)
                if msg["parent_header"].get("msg_id") != msg_id:
                    continue
                if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                    return outputs
                outputs.append(msg)

        with network_guard.expect_refused():
            refused = run('import socket\nsocket.create_connection(("1.1.1.1", 80), timeout=1)')
        errors = [m["content"] for m in refused if m["msg_type"] == "error"]
        assert errors and errors[0]["ename"] == "NetworkBlocked", refused
        with network_guard.expect_refused():
            quiet = run(
                "import urllib.request\n"
                "try:\n"
                "    urllib.request.urlopen('https://huggingface.co', timeout=1)\n"
                "except OSError:\n"
                "    print('offline')"
            )
        assert any(m["content"].get("text") == "offline\n" for m in quiet)
        printed = run("print(6 * 7)")
        assert any(m["content"].get("text") == "42\n" for m in printed)
    finally:
        kernel.stop()
