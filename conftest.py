"""pytest set-up shared by the unit tests and nbval.

nbval starts one Jupyter kernel per notebook. Kernels started side by side (``pytest -n 2``) pick TCP ports
independently and can collide ("Address already in use"); giving each kernel IPC transport on a unique socket
path removes that race.
"""

import os
import tempfile
import uuid

try:
    import nbval.kernel
    from jupyter_client.manager import KernelManager
except ImportError:  # nbval is a test dependency; the unit tests run without it
    nbval = None


if nbval is not None:

    class _IPCKernelManager(KernelManager):
        """A KernelManager whose sockets are files in a private temporary folder, never TCP ports."""

        def __init__(self, *args, **kwargs):
            socket_dir = tempfile.mkdtemp(prefix="nbk-")
            super().__init__(*args, transport="ipc", ip=os.path.join(socket_dir, uuid.uuid4().hex[:8]), **kwargs)

    nbval.kernel.KernelManager = _IPCKernelManager
