"""A minimal job host for control tests: a real ``ControlServer`` on the job's socket.

Modes: ``ok`` applies every control like the real host (checks the
expected revision, acknowledges exactly the pending revision it applied and
logs the request); ``reject`` refuses with ``invalid fields``; ``die`` is
SIGKILLed while handling (the reply is lost); ``hold`` applies only once the file
``<socket>.go`` exists (the test decides when a control being handled ends).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from mmo_kernel.hosts.control_socket import ControlServer
from mmo_kernel.jobs.records import job_file, read_job_record, update_job
from mmo_kernel.state.files import runtime_lock


def main() -> None:
    job_id, socket_path, mode = sys.argv[1:4]
    log = job_file(job_id, "host-requests.jsonl")

    def handle(request: dict) -> dict:
        if request["action"] == "inspect":
            record = read_job_record(job_id)
            return {"thread_id": "thread-1", "active_turn_id": "turn-1",
                    "pending_requests": [{"id": 7, "method": "item/tool/requestUserInput",
                                          "params": {"questions": []}}],
                    "control_revision": record.get("control_revision", 0)}
        with log.open("a") as out:
            out.write(json.dumps({"start": time.monotonic(), **request}) + "\n")
        if mode == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        if mode == "reject":
            raise RuntimeError("invalid fields: an approval takes {\"decision\": ...}")
        if mode == "hold":
            go = Path(socket_path + ".go")
            while not go.exists():
                time.sleep(0.01)
        with runtime_lock():
            record = read_job_record(job_id)
            if record.get("control_revision") != request["revision"]:
                raise RuntimeError("stale control revision at the host")
            update_job(job_id, last_control_status="applied")
        with log.open("a") as out:
            out.write(json.dumps({"end": time.monotonic(), "revision": request["revision"]}) + "\n")
        return {"applied": request["action"], "revision": request["revision"]}

    server = ControlServer(socket_path, handle).start()
    Path(socket_path + ".ready").write_text("ready")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    server.close()


if __name__ == "__main__":
    main()
