#!/usr/bin/env python3
"""Keystroke latency of one editor window while another types: each window's own model
(in-process) vs one shared host.

Usage: scripts/shared-latency.py BINARY MODEL [THREADS]

Window A replays fixtures/traces/inventory.json with its pauses (keys as incremental
didChange, completions as inlineCompletion requests, timed from request to answer); window B, when
present, replays fixtures/traces/scheduler.json over and over until A is done. Default settings
otherwise (generation ahead and typed-ahead on, as an editor has them). Prints A's p50, p90,
p95 and mean (most keys are answered from a generation ahead in a millisecond: the tail is where
a window waits for the model), and last how many of A's answers are the same text in every run.
"""
import json, os, signal, subprocess, sys, tempfile, threading, time

BIN, MODEL = sys.argv[1], sys.argv[2]
THREADS = int(sys.argv[3]) if len(sys.argv) > 3 else 1
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "traces")


class Server:
    def __init__(self, env, settings):
        self.p = subprocess.Popen([BIN, "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.next = 10
        self.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}, "initializationOptions": settings})
        self.notify("initialized", {})
        self.until(lambda m: m.get("method") == "window/logMessage" and "model ready" in m["params"]["message"])

    def send(self, msg):
        body = json.dumps(msg).encode()
        self.p.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.p.stdin.flush()

    def read(self):
        length = None
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise SystemExit("server closed")
            line = line.strip()
            if not line:
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        return json.loads(self.p.stdout.read(length))

    def until(self, pred):
        while True:
            m = self.read()
            if pred(m):
                return m

    def notify(self, method, params):
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method, params):
        self.next += 1
        i = self.next
        self.send({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
        return self.until(lambda m: m.get("id") == i)

    def close(self):
        self.request("shutdown", None)
        self.notify("exit", None)
        self.p.wait(timeout=30)


def pos(text, at):
    before = text[:at]
    line = before.count("\n")
    col = len(before[before.rfind("\n") + 1:].encode("utf-16-le")) // 2
    return {"line": line, "character": col}


def replay(server, name, uri, stop=None):
    trace = json.load(open(os.path.join(HERE, name + ".json")))
    source = open(os.path.join(HERE, trace["file"])).read()
    at = source.index(trace["cursor_marker"])
    text = source.replace(trace["cursor_marker"], "", 1)
    version = 1
    server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": trace["language_id"], "version": 1, "text": text}})
    latencies, texts = [], []
    for e in trace["events"]:
        if stop and stop.is_set():
            break
        time.sleep(e.get("gap_ms", 0) / 1000)
        key = e.get("key")
        if key == "\b":
            start, end = at - 1, at
            new = ""
        elif key is not None:
            start, end, new = at, at, key
        if key is not None:
            version += 1
            change = {"range": {"start": pos(text, start), "end": pos(text, end)}, "text": new}
            text = text[:start] + new + text[end:]
            at = start + len(new)
            server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [change]})
        if e.get("complete"):
            t = time.perf_counter()
            answer = server.request("textDocument/inlineCompletion", {"textDocument": {"uri": uri}, "position": pos(text, at), "context": {"triggerKind": 2}})
            latencies.append((time.perf_counter() - t) * 1000)
            result = answer.get("result")
            items = result.get("items", []) if isinstance(result, dict) else (result or [])
            texts.append(items[0].get("insertText") if items else None)
    server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    return latencies, texts


def run(shared, other):
    root = tempfile.mkdtemp(prefix="ghostline-lat-")
    os.makedirs(f"{root}/run")
    env = dict(os.environ, XDG_RUNTIME_DIR=f"{root}/run", XDG_CACHE_HOME=f"{root}/cache", XDG_DATA_HOME=f"{root}/data", GHOSTLINE_MODEL="")
    env.pop("GHOSTLINE_SHARED", None)
    settings = {"model": {"path": MODEL, "threads": THREADS, "shared": shared}, "stats": {"enabled": False}}
    a = Server(env, settings)
    b = Server(env, settings) if other else None
    done = threading.Event()
    typist = None
    if b:
        def loop():
            n = 0
            while not done.is_set():
                n += 1
                replay(b, "scheduler", f"file:///b/scheduler{n}.py", done)
        typist = threading.Thread(target=loop)
        typist.start()
    latencies, texts = replay(a, "inventory", "file:///a/inventory.py")
    done.set()
    if typist:
        typist.join()
    for s in [a] + ([b] if b else []):
        s.close()
    lock = [f for f in os.listdir(f"{root}/run/ghostline") if f.endswith(".lock")] if os.path.isdir(f"{root}/run/ghostline") else []
    for f in lock:
        try:
            os.kill(int(open(f"{root}/run/ghostline/{f}").read().strip()), signal.SIGKILL)
        except (ValueError, ProcessLookupError):
            pass
    latencies.sort()
    at = lambda q: latencies[min(int(len(latencies) * q), len(latencies) - 1)]
    return at(0.5), at(0.9), at(0.95), sum(latencies) / len(latencies), len(latencies), texts


runs = []
for shared in (False, True):
    for other in (False, True):
        p50, p90, p95, mean, n, texts = run(shared, other)
        runs.append(texts)
        mode = "shared    " if shared else "in-process"
        print(f"{mode} {'while another window types' if other else 'alone                    '}: p50 {p50:6.1f} ms, p90 {p90:6.1f} ms, p95 {p95:6.1f} ms, mean {mean:6.1f} ms ({n} requests)", flush=True)
same = sum(1 for answers in zip(*runs) if len(set(answers)) == 1)
print(f"A's answers: {same} of {len(runs[0])} the same text in all {len(runs)} runs")
