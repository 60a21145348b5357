"""A webhook receiver for the tests, run as its own process: it checks each request's Standard
Webhooks signature with plain `hmac` (sharing no code with the service), answers 401 to a bad one,
and appends every verified delivery to a JSON-lines log. How it answers is read from a mode file
at each request: `ok` (204), `500`, `slow:SECONDS` (then 204).

    python tests/support/webhook_receiver.py --port P --secret whsec_… --log FILE --mode-file FILE
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def expected_signature(secret: str, message_id: str, timestamp: str, body: bytes) -> str:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    mac = hmac.new(key, message_id.encode() + b"." + timestamp.encode() + b"." + body, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--mode-file", type=Path, required=True)
    args = parser.parse_args()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *a: object) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            message_id = self.headers.get("webhook-id", "")
            timestamp = self.headers.get("webhook-timestamp", "")
            signatures = self.headers.get("webhook-signature", "").split(" ")
            good = expected_signature(args.secret, message_id, timestamp, body)
            fresh = timestamp.isdigit() and abs(time.time() - int(timestamp)) < 300
            if not fresh or not any(hmac.compare_digest(good, s) for s in signatures):
                self._answer(401)
                return
            mode = args.mode_file.read_text().strip() if args.mode_file.exists() else "ok"
            document = json.loads(body)
            line = {"id": message_id, "type": document["type"], "subject": document["subject"], "at": time.time()}
            with lock, args.log.open("a") as log:
                log.write(json.dumps(line | {"mode": mode}) + "\n")
            if mode == "500":
                self._answer(500)
                return
            if mode.startswith("slow:"):
                time.sleep(float(mode.split(":", 1)[1]))
            self._answer(204)

        def _answer(self, code: int) -> None:
            self.send_response(code)
            self.send_header("content-length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
