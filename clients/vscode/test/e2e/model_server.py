"""The e2e test's model: tests/harness/fake_openai.py plus a control endpoint, so each step of
test/e2e/e2e.js scripts its own replies (a step that fails or is skipped cannot shift the replies of
the next one) and reads back what the model was sent.

    python clients/vscode/test/e2e/model_server.py     (run with the repository root as cwd)

First stdout line: JSON {"baseUrl": ".../v1", "control": "http://127.0.0.1:PORT"}.
Control: POST /script (JSON list of fake_openai entries, appended to the queue), POST /clear (drop the
queue), GET /requests (every chat request so far: [{"messages": [...], "model": "..."}]).
With an empty queue a request gets fake_openai's 400 "no scripted reply left".
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.harness.fake_openai import FakeOpenAI


def main() -> int:
    fake = FakeOpenAI()

    class Control(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:
            pass

        def _send(self, code: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/requests":
                out = [
                    {"messages": r.messages, "model": (r.body or {}).get("model")}
                    for r in fake.chat_requests
                ]
                return self._send(200, out)
            self._send(404, {"error": "unknown"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"null")
            if self.path == "/script":
                fake.script(*(body or []))
                return self._send(200, {"pending": fake.pending})
            if self.path == "/clear":
                fake._queue.clear()  # noqa: SLF001 - test control of the harness's queue
                return self._send(200, {"pending": 0})
            self._send(404, {"error": "unknown"})

    control = ThreadingHTTPServer(("127.0.0.1", 0), Control)
    control.daemon_threads = True
    threading.Thread(target=control.serve_forever, daemon=True).start()
    print(json.dumps({"baseUrl": fake.base_url, "control": f"http://127.0.0.1:{control.server_address[1]}"}), flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        while not stop.wait(0.2):
            pass
    finally:
        control.shutdown()
        fake.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
