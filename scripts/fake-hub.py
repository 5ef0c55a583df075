#!/usr/bin/env python3
"""A loopback Hugging Face Hub for the editor tests of the first run (Neovim, VS Code in
code-server), the Python twin of server/tests/common/hub.rs: `HEAD {endpoint}/{org}/{repo}/resolve/
main/{file}.gguf` answers, as the Hub does for an LFS file, with a 302 to the content URL carrying
`X-Repo-Commit`, `X-Linked-Etag` (the sha256) and `X-Linked-Size`; `GET` on that URL serves the
model (any repository name: the test model poses as the Qwen coder the server offers) with
`Range` support. Prints its endpoint on the first line of stdout, then serves until killed;
every request is logged to stderr as `METHOD PATH [range]`.

    scripts/fake-hub.py MODEL.gguf [BYTES_PER_SECOND]

With a rate, the content is sent at about that speed (so that a test can see a download's
progress on screen).
"""
import hashlib
import http.server
import re
import sys
import time

COMMIT = "0123456789abcdef0123456789abcdef01234567"

model = open(sys.argv[1], "rb").read()
sha = hashlib.sha256(model).hexdigest()
rate = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0


class Hub(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def note(self):
        print(f"{self.command} {self.path} {self.headers.get('Range', '')}".rstrip(), file=sys.stderr, flush=True)

    def empty(self, status, headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self):
        self.note()
        if re.fullmatch(r"/[\w.-]+/[\w.-]+/resolve/main/[\w.-]+\.gguf", self.path):
            self.empty(302, [
                ("Location", f"/cdn/{sha}?signed=1"),
                ("X-Repo-Commit", COMMIT),
                ("X-Linked-Etag", f'"{sha}"'),
                ("X-Linked-Size", str(len(model))),
                ("ETag", '"pointer"'),
            ])
        else:
            self.empty(404, [("X-Error-Message", "Entry not found")])

    def do_GET(self):
        self.note()
        if not self.path.startswith(f"/cdn/{sha}"):
            self.empty(404)
            return
        start = 0
        m = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
        if m:
            start = int(m.group(1))
            if start >= len(model):
                self.empty(416, [("Content-Range", f"bytes */{len(model)}")])
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(model) - 1}/{len(model)}")
        else:
            self.send_response(200)
            self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(model) - start))
        self.end_headers()
        try:
            chunk = 1 << 20
            for at in range(start, len(model), chunk):
                self.wfile.write(model[at:at + chunk])
                if rate > 0:
                    time.sleep(chunk / rate)
        except (BrokenPipeError, ConnectionResetError):
            pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
server.serve_forever()
