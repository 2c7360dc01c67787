"""The warm host: one pre-imported interpreter per state dir that forks job hosts.

A fresh ``python -m mmo_app_server.job_host`` spends most of a job's start-up
importing the kernel (issue 15: 83-86 % of MMO's per-job overhead). The warm
host imports the host module once, freezes its heap (``gc.freeze``, so children
share those pages copy-on-write) and forks one child per request. A child's own
memory is the pages written after the fork, by the child or by the warm host (a
page the warm host rewrites stays with the children forked before), so the warm
host also imports what every host imports after the fork, imports with the
collector off (no freed holes for a child to fill) and touches little between
forks. Each child is exactly what ``spawn_detached`` would have started: the
leader of its own session and process group, stdin ``/dev/null``, its output
appended to the log file and redacted, the caller's environment and no other. A host dying never
touches another (they are separate processes); the warm host dying leaves its
children running (they are re-parented).

Whenever the warm host cannot serve — disabled with ``MMO_WARM_HOSTS=0``, not
started in time, its code older than the installed code, another state dir — the
caller starts a fresh interpreter instead; nothing depends on it being there.

It exits after ``IDLE_SECONDS`` with no request and no live child, when its state
dir is gone, on SIGTERM, or when the code it imported changed on disk.

Protocol: one JSON line in (``{"module", "args", "cwd", "env", "log"}``), one JSON
line out (``{"pid", "start_token"}`` or ``{"error"}``), on a private unix socket.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mmo_kernel.hosts.control_socket import app_server_socket_path
from mmo_kernel.state.paths import state_dir
from mmo_kernel.state.processes import process_alive, process_start_token, spawn_detached

SWITCH_ENV = "MMO_WARM_HOSTS"
"""``0`` turns warm hosts off: every host is a fresh interpreter."""
IDLE_SECONDS = 120.0
START_SECONDS = 15.0
MAX_REQUEST_BYTES = 1 << 20
SERVER_MODULE = __name__
PRELOAD_ENV = "MMO_WARM_HOST_PRELOAD"
"""The host module the warm host imports before it serves (in its own environment)."""
SERVER_NAME = "mmo-warm-host"
"""The warm host's process name (``ps -o comm``, psutil's ``name()``)."""
ALSO_IMPORTED = ("mmo_kernel.state.redaction", "filelock", "email.parser")
"""Imported with the host module: a forked host needs them (its redacted output, the
records' file locks, the package version read from its metadata), and a module imported
after the fork is private memory in every host (issue 15: 0.65 MiB of 9.5)."""
# what the warm host's own environment keeps of the first caller's: never a token
_KEPT_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "VIRTUAL_ENV",
             "PYTHONPATH", "PYTHONHASHSEED", "MMO_STATE_DIR", "MMO_CONFIG_DIR",
             "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_RUNTIME_DIR", "MMO_TEST_PROCESS_GUARD")


class _Stopped(BaseException):
    """Raised by the warm host's SIGTERM handler to leave its loop at once."""


class Unavailable(Exception):
    """The warm host cannot serve this request; start a fresh interpreter."""


class _NoReply(Exception):
    """The warm host ended the connection without answering: it forked nothing."""


# ------------------------------------------------------------------ client ---


def spawn_module(module: str, args: list[str], *, env: Mapping[str, str],
                 log_path: Path) -> tuple[int, str]:
    """Start ``python -m module args`` detached (see ``spawn_detached``), forked from
    the warm host of this state dir when it can serve; ``(pid, start_token)``."""
    if env.get(SWITCH_ENV, os.environ.get(SWITCH_ENV)) != "0":
        try:
            return _forked(module, args, env, log_path)
        except Unavailable:
            pass
    return spawn_detached([sys.executable, "-m", module, *args], cwd="/", env=env,
                          stdout=log_path, stderr=log_path)


def socket_path() -> Path:
    return app_server_socket_path("warm-host")


def _forked(module: str, args: list[str], env: Mapping[str, str],
            log_path: Path) -> tuple[int, str]:
    request = {"module": module, "args": list(args), "cwd": "/", "env": dict(env),
               "log": str(log_path)}
    path = socket_path()
    try:
        reply = _ask(path, request)
    except (FileNotFoundError, ConnectionRefusedError, _NoReply):
        # no warm host, or one that died before forking (a child answers for itself,
        # so no reply means no child): start one and ask once more
        try:
            _start_server(path, module, env)
            reply = _ask(path, request)
        except (OSError, _NoReply) as exc:
            raise Unavailable(str(exc)) from exc
    except OSError as exc:
        raise Unavailable(str(exc)) from exc
    if "error" in reply:
        raise Unavailable(str(reply["error"]))
    pid, token = reply.get("pid"), reply.get("start_token")
    if not isinstance(pid, int) or not isinstance(token, str):
        raise Unavailable("malformed reply")
    return pid, token


def _ask(path: Path, request: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        conn.connect(os.fspath(path))
        conn.sendall(json.dumps(request).encode("utf-8") + b"\n")
        data = _read_line(conn)
    if not data:
        raise _NoReply("the warm host closed the connection without a reply")
    try:
        reply = json.loads(data)
    except ValueError as exc:
        raise Unavailable("unreadable reply") from exc
    if not isinstance(reply, dict):
        raise Unavailable("malformed reply")
    return reply


def _read_line(conn: socket.socket) -> bytes:
    chunks, size = [], 0
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if b"\n" in chunk or size > MAX_REQUEST_BYTES:
            break
    return b"".join(chunks).split(b"\n", 1)[0]


def _start_server(path: Path, module: str, env: Mapping[str, str]) -> None:
    """Start the warm host (one at a time: a lock around starting) and wait for it."""
    from filelock import FileLock, Timeout

    lock = FileLock(f"{path}.lock")
    try:
        with lock.acquire(timeout=START_SECONDS):
            if not _accepts(path):
                own = {k: v for k, v in env.items() if k in _KEPT_ENV}
                own[PRELOAD_ENV] = module
                log = Path(env.get("MMO_STATE_DIR") or state_dir()) / "runtime" / "warm-host.log"
                log.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                # the shortest command line: a forked host's title (longer) then ends in one
                # NUL, so ps and psutil split it into its arguments again
                with open(log, "ab") as out:
                    pid, _ = spawn_detached([sys.executable, "-m", SERVER_MODULE], cwd="/",
                                            env=own, stdout=out, stderr=out)
                _wait_until_serving(path, pid)
    except Timeout as exc:
        raise Unavailable("another process is starting the warm host") from exc


def _accepts(path: Path) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(1.0)
            conn.connect(os.fspath(path))
        return True
    except OSError:
        return False


def _wait_until_serving(path: Path, pid: int) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if _accepts(path):
            return
        if not process_alive(pid):
            raise Unavailable("the warm host exited while starting")
        time.sleep(0.02)
    raise Unavailable("the warm host did not start in time")


def stop(timeout: float = 5.0) -> bool:
    """Ask this state dir's warm host to exit (tests, ``mmo clean``); True if one ran."""
    try:
        reply = _ask(socket_path(), {"stop": True}, timeout=timeout)
    except (OSError, Unavailable):
        return False
    pid = reply.get("pid")
    deadline = time.monotonic() + timeout
    while isinstance(pid, int) and process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return True


# ------------------------------------------------------------------ server ---


class _Server:
    def __init__(self, preload: list[str]) -> None:
        for name in (*ALSO_IMPORTED, *preload):
            importlib.import_module(name)
        self.home = os.path.realpath(state_dir())
        self.preload = set(preload)
        self.code_paths = _code_paths(self.preload)
        self.stamps = _code_stamps(self.code_paths)
        self.children: set[int] = set()
        self.stopping = False
        self.path = socket_path()
        self.listener = _listen(self.path)

    def run(self) -> None:
        _set_name(SERVER_NAME)
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        gc.freeze()  # children share the imported heap instead of copying it on first GC
        gc.enable()  # off since start-up (see main); on in the warm host and its children
        self.listener.settimeout(1.0)
        last = time.monotonic()
        try:
            while not self.stopping:
                self._reap()
                try:
                    conn, _ = self.listener.accept()
                except TimeoutError:
                    if self._should_exit(last):
                        break
                    continue
                last = time.monotonic()
                with conn:
                    self._serve(conn)
        except _Stopped:
            pass
        finally:
            self._retire()

    def _stop(self, *_: Any) -> None:
        self.stopping = True
        raise _Stopped  # out of a blocking accept() at once (it would be retried otherwise)

    def _should_exit(self, last: float) -> bool:
        if not os.path.isdir(self.home):
            return True
        return not self.children and time.monotonic() - last > IDLE_SECONDS

    def _reap(self) -> None:
        for pid in list(self.children):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                self.children.discard(pid)

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(10.0)
        try:
            request = json.loads(_read_line(conn))
            reply = self._answer(request, conn)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            reply = {"error": f"bad request: {exc}"}
        if reply is None:
            return  # the forked child answered for itself
        try:
            conn.sendall(json.dumps(reply).encode("utf-8") + b"\n")
        except OSError:
            pass

    def _answer(self, request: dict[str, Any], conn: socket.socket) -> dict[str, Any] | None:
        if request.get("stop"):
            self.stopping = True
            return {"pid": os.getpid()}
        if _code_stamps(self.code_paths) != self.stamps:
            self.stopping = True  # the installed code changed: a fresh warm host next time
            return {"error": "the warm host runs older code"}
        env = request["env"]
        if os.path.realpath(env.get("MMO_STATE_DIR") or self.home) != self.home:
            return {"error": "another state dir"}
        pid = os.fork()
        if pid == 0:
            _child(request, self.listener, conn)  # never returns
        self.children.add(pid)
        return None

    def _retire(self) -> None:
        try:
            if os.stat(self.path).st_ino == self.inode:
                os.unlink(self.path)
        except OSError:
            pass
        self.listener.close()

    @property
    def inode(self) -> int:
        return os.fstat(self.listener.fileno()).st_ino if self.listener.fileno() >= 0 else -1


def _listen(path: Path) -> socket.socket:
    if os.path.lexists(path) and not _accepts(path):
        os.unlink(path)  # a dead warm host's socket
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(os.fspath(path))
    finally:
        os.umask(old)
    listener.listen(64)
    return listener


def _code_paths(preload: set[str]) -> tuple[bytes, ...]:
    """Every MMO module this interpreter imported (and the preloaded ones, wherever they
    come from), as new objects made together: checking them before each fork then
    rewrites a few pages, not one per module all over the shared heap (issue 15: every
    host but the last forked kept 1.4 MiB of pages a per-request walk of
    ``sys.modules`` had touched)."""
    paths = []
    for module in list(sys.modules.values()):
        origin = getattr(module, "__file__", None)
        name = getattr(module, "__name__", "")
        if origin and (name.startswith("mmo") or name in preload):
            paths.append(os.fsencode(origin))
    return tuple(paths)


def _code_stamps(paths: tuple[bytes, ...]) -> list[tuple[int, int]]:
    """mtime and size of each path (``(-1, -1)`` when it is gone)."""
    stamps = []
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            stamps.append((-1, -1))
            continue
        stamps.append((info.st_mtime_ns, info.st_size))
    return stamps


def _child(request: dict[str, Any], listener: socket.socket, conn: socket.socket) -> None:
    """Become the requested host, as ``spawn_detached`` would have started it."""
    import atexit
    import io
    import traceback

    code: int = 1
    try:
        listener.close()
        _answer_for_itself(conn)
        for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.setsid()
        _set_title([sys.executable, "-m", request["module"], *request["args"]])
        _redirect(request["log"])
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        from mmo_kernel.state.redaction import run_module_redacted

        run_module_redacted([request["module"], *request["args"]])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - the child must always end in os._exit
        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _answer_for_itself(conn: socket.socket) -> None:
    """The child, not the warm host, tells the caller its identity: a warm host killed
    between fork and reply then leaves a caller with a reply (no second, fresh host)."""
    me = os.getpid()
    try:
        conn.sendall(json.dumps({"pid": me, "start_token": process_start_token(me)}).encode()
                     + b"\n")
    finally:
        conn.close()


def _set_name(name: str) -> None:
    """The process name others see (``ps -o comm``, psutil's ``name()``)."""
    import setproctitle

    setproctitle.setthreadtitle(name)


def _set_title(argv: list[str]) -> None:
    """Show the command line a fresh interpreter would have had (``ps``, psutil), and
    its name (``python3.11``), so a forked host looks like the process it stands for."""
    import setproctitle

    setproctitle.setproctitle(" ".join(argv))
    setproctitle.setthreadtitle(os.path.basename(sys.executable))


def _redirect(log: str) -> None:
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(null)
    os.close(out)


def main(argv: list[str]) -> int:
    preload = [*argv, *filter(None, [os.environ.get(PRELOAD_ENV)])]
    # no collection while importing: what it would free leaves holes in pages children
    # share, and a child's first allocations would fill them, copying each page
    gc.disable()
    try:
        server = _Server(preload)
    except OSError as exc:
        print(f"warm host not started: {exc}", file=sys.stderr)
        return 1
    server.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
