"""DynamoDB on moto's server in a process of its own, its address space capped (RLIMIT_AS: moto's
transactions copy the whole table, so its memory grows with the table), behind a counter of
requests by operation (`bench.state_requests.CountingApp`), read and reset over HTTP.

moto is no model of DynamoDB's time: requests are counted here, never timed.

    python -m bench.harness.moto_server --max-mib 4096 --parent-pid PID   (prints its URL)
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any

from bench.harness.environment import REPO
from bench.harness.processes import exit_with, stop
from bench.state_requests import CountingApp

COUNTS_PATH = "/_bench/counts"  # GET: the requests since the last GET, by operation, and their total
REGION = "us-east-1"
FAKE_AWS = {  # nothing here reaches a real account
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_CONFIG_FILE": "/dev/null",
    "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
}


class CountsApp:
    """`CountingApp`, with its counts served at COUNTS_PATH."""

    def __init__(self, counting: CountingApp) -> None:
        self.counting = counting

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == COUNTS_PATH:
            body = json.dumps(self.counting.take()).encode()
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        return self.counting(environ, start_response)


class MotoServer:
    """The server as a subprocess of this process: its URL, pid, and counts."""

    def __init__(self, process: subprocess.Popen[bytes], url: str) -> None:
        self.process, self.url = process, url

    @classmethod
    def start(cls, max_mib: int) -> MotoServer:
        argv = [sys.executable, "-m", "bench.harness.moto_server", "--max-mib", str(max_mib), "--parent-pid", str(os.getpid())]
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, cwd=REPO, env={**os.environ, **FAKE_AWS})
        assert process.stdout is not None
        line = process.stdout.readline().decode().strip()
        if not line.startswith("http://"):
            process.kill()
            raise RuntimeError(f"bench: moto's server did not start: {line!r}")
        return cls(process, line)

    @property
    def pid(self) -> int:
        return self.process.pid

    def take(self) -> dict[str, int]:
        """The requests since the last take, by operation, and their total."""
        with urllib.request.urlopen(self.url + COUNTS_PATH, timeout=600) as answer:
            counts: dict[str, int] = json.loads(answer.read())
            return counts

    def close(self) -> None:
        stop(self.process)

    def __enter__(self) -> MotoServer:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None) -> None:
        self.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.harness.moto_server")
    parser.add_argument("--max-mib", type=int, required=True, help="RLIMIT_AS of this process (MiB)")
    parser.add_argument("--parent-pid", type=int)
    args = parser.parse_args()
    limit = args.max_mib * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    app = CountsApp(CountingApp(DomainDispatcherApplication(create_backend_app)))
    server = make_server("127.0.0.1", 0, app, threaded=True)
    if args.parent_pid:
        threading.Thread(target=exit_with, args=(args.parent_pid,), daemon=True).start()
    print(f"http://127.0.0.1:{server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
