#!/usr/bin/env python3
"""Resident memory of 1, 2 and 3 editor windows, each model in its own server vs one shared host.

Usage: scripts/shared-memory.py BINARY MODEL [THREADS]

Starts N language servers over stdio (as N editor windows would), each opening a Python file and
asking one inline completion (so that its context is allocated and used), then reads VmRSS and
Pss (smaps_rollup: file pages shared between processes counted once in all) of every server and
of the host. Each run has a runtime and cache folder of its own; the host is ended afterwards.
"""
import json, os, signal, subprocess, sys, tempfile, time

BIN, MODEL = sys.argv[1], sys.argv[2]
THREADS = int(sys.argv[3]) if len(sys.argv) > 3 else 1
TEXT = 'class Store:\n    def __init__(self):\n        self.items = {}\n\n    def total(self):\n        '


def send(p, msg):
    body = json.dumps(msg).encode()
    p.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    p.stdin.flush()


def read(p):
    length = None
    while True:
        line = p.stdout.readline()
        if not line:
            return None
        line = line.strip()
        if not line:
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return json.loads(p.stdout.read(length))


def until(p, pred):
    while True:
        m = read(p)
        if m is None:
            raise SystemExit("server closed")
        if pred(m):
            return m


def memory(pid):
    def field(path, name):
        try:
            for line in open(path):
                if line.startswith(name + ":"):
                    return int(line.split()[1]) * 1024
        except OSError:
            return 0
        return 0
    return field(f"/proc/{pid}/status", "VmRSS"), field(f"/proc/{pid}/smaps_rollup", "Pss")


def run(n, shared):
    root = tempfile.mkdtemp(prefix="ghostline-mem-")
    env = dict(os.environ, XDG_RUNTIME_DIR=f"{root}/run", XDG_CACHE_HOME=f"{root}/cache", XDG_DATA_HOME=f"{root}/data", GHOSTLINE_MODEL="")
    env.pop("GHOSTLINE_SHARED", None)
    os.makedirs(f"{root}/run")
    settings = {"model": {"path": MODEL, "threads": THREADS, "shared": shared}, "completion": {"typedAhead": False, "generateAhead": False}, "stats": {"enabled": False}}
    servers = []
    for i in range(n):
        p = subprocess.Popen([BIN, "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        send(p, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}, "initializationOptions": settings}})
        until(p, lambda m: m.get("id") == 1)
        send(p, {"jsonrpc": "2.0", "method": "initialized", "params": {}})
        until(p, lambda m: m.get("method") == "window/logMessage" and "model ready" in m["params"]["message"])
        uri = f"file:///w{i}/store.py"
        send(p, {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": TEXT}}})
        send(p, {"jsonrpc": "2.0", "id": 2, "method": "textDocument/inlineCompletion", "params": {"textDocument": {"uri": uri}, "position": {"line": 5, "character": 8}, "context": {"triggerKind": 1}}})
        until(p, lambda m: m.get("id") == 2)
        servers.append(p)
    time.sleep(1)
    lock = [f for f in os.listdir(f"{root}/run/ghostline")] if os.path.isdir(f"{root}/run/ghostline") else []
    host = None
    for f in lock:
        if f.endswith(".lock"):
            host = int(open(f"{root}/run/ghostline/{f}").read().strip())
    pids = [p.pid for p in servers] + ([host] if host else [])
    figures = [memory(pid) for pid in pids]
    for p in servers:
        send(p, {"jsonrpc": "2.0", "id": 9, "method": "shutdown", "params": None})
        until(p, lambda m: m.get("id") == 9)
        send(p, {"jsonrpc": "2.0", "method": "exit", "params": None})
        p.wait(timeout=30)
    if host:
        os.kill(host, signal.SIGKILL)
    return sum(r for r, _ in figures), sum(s for _, s in figures), figures


for shared in (False, True):
    for n in (1, 2, 3):
        rss, pss, figures = run(n, shared)
        mib = lambda b: b / (1 << 20)
        parts = " + ".join(f"{mib(r):.0f}" for r, _ in figures)
        print(f"{'shared    ' if shared else 'in-process'} {n} window(s): RSS {mib(rss):6.0f} MiB ({parts}), PSS {mib(pss):6.0f} MiB")
