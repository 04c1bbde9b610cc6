"""Strict JAX settings for the whole suite, several virtual CPU devices, and a key fixture.

The flags are set before any test touches a JAX backend: rank promotion raises (so a broadcast
that was not meant fails loudly) and the CPU exposes ``N_DEVICES`` virtual devices for the
sharding tests.
"""

import os

N_DEVICES = 4
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_num_cpu_devices", N_DEVICES)
jax.config.update("jax_numpy_rank_promotion", "raise")


@pytest.fixture
def key():
    """A fresh typed PRNG key; tests split it where they use it."""
    return jax.random.key(0)


@pytest.fixture
def n_devices():
    return N_DEVICES


class _CompileLog:
    """Names of the functions XLA compiled inside a ``with compiles() as log:`` block.

    Uses the public ``jax.log_compiles`` switch and reads JAX's "Compiling jit(NAME)" log lines.
    """

    def __init__(self):
        import logging

        self.names: list[str] = []
        log = self

        class _Handler(logging.Handler):
            def emit(self, record):
                msg = record.getMessage()
                if msg.startswith("Compiling "):
                    log.names.append(msg.split()[1])

        self._handler = _Handler(level=logging.DEBUG)
        self._ctx = jax.log_compiles(True)

    def __enter__(self):
        import logging

        logger = logging.getLogger("jax")
        logger.addHandler(self._handler)
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        import logging

        self._ctx.__exit__(*exc)
        logging.getLogger("jax").removeHandler(self._handler)

    def count(self, fragment: str) -> int:
        """How many compilations had ``fragment`` in their name."""
        return sum(fragment in n for n in self.names)


@pytest.fixture
def compiles():
    """``with compiles() as log: ...; assert log.count("step") == 0``."""
    return _CompileLog


@pytest.fixture
def fresh_registry():
    """``geomopt.optim._registry``; the optimiser table as it was before the test, afterwards."""
    from geomopt.optim import _registry

    saved = dict(_registry._TABLE)
    yield _registry
    _registry._TABLE.clear()
    _registry._TABLE.update(saved)


class FileServer:
    """A threaded HTTP server on 127.0.0.1 serving ``files`` (path -> bytes; a missing path is
    404); ``requests`` counts GETs per path; ``url(path)`` is the address of one."""

    def __init__(self, files: dict[str, bytes]):
        import http.server
        import threading

        self.files = dict(files)
        self.requests: dict[str, int] = {}
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                path = self.path.lstrip("/")
                server.requests[path] = server.requests.get(path, 0) + 1
                body = server.files.get(path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{path}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def file_server():
    """``file_server(files)`` starts a :class:`FileServer`; every one is closed after the test."""
    started = []

    def start(files: dict[str, bytes]) -> FileServer:
        started.append(FileServer(files))
        return started[-1]

    yield start
    for s in started:
        s.close()


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the directed ``graph`` as a list of nodes (first repeated last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


@pytest.fixture
def find_cycle():
    """``find_cycle(graph)``: a cycle of an import graph (``node -> set of nodes``), or None."""
    return _find_cycle
