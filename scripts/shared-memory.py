#!/usr/bin/env python3
"""Resident memory of 1, 2 and 3 editor windows, each model in its own server vs one shared host.

Usage: scripts/shared-memory.py BINARY MODEL [THREADS]

Starts N language servers over stdio (as N editor windows would), each opening a Python file and
asking one inline completion (so that its context is allocated and used), then reads VmRSS and
Pss (smaps_rollup: file pages shared between processes counted once in all) of every server and
of the host. Each run has a runtime and cache folder of its own; the host is ended afterwards.
Where `nvidia-smi` answers, it also reads the GPU memory in use: the device's total, less what it
held before the run's servers started, and each process's own where the driver lists them (in a
container it may list none; a window whose model is the host's should hold none: it is flagged).
Last, it says whether every window's answer was the same text, in process and shared.
"""
import json, os, shutil, signal, subprocess, sys, tempfile, time

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


def smi(query):
    try:
        out = subprocess.run(["nvidia-smi", query, "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [[f.strip() for f in line.split(",")] for line in out.splitlines() if line.strip()]


GPU = shutil.which("nvidia-smi") is not None


def gpu_used():
    """MiB in use on the first GPU, and MiB per process id where the driver lists processes."""
    if not GPU:
        return None, {}
    total = sum(int(r[0]) for r in smi("--query-gpu=memory.used")[:1])
    apps = {int(r[0]): int(r[1]) for r in smi("--query-compute-apps=pid,used_memory") if len(r) == 2 and r[0].isdigit() and r[1].isdigit()}
    return total, apps


def text_of(answer):
    result = answer.get("result")
    items = result.get("items", []) if isinstance(result, dict) else (result or [])
    return items[0].get("insertText") if items else None


def run(n, shared):
    before, _ = gpu_used()
    root = tempfile.mkdtemp(prefix="ghostline-mem-")
    env = dict(os.environ, XDG_RUNTIME_DIR=f"{root}/run", XDG_CACHE_HOME=f"{root}/cache", XDG_DATA_HOME=f"{root}/data", GHOSTLINE_MODEL="")
    env.pop("GHOSTLINE_SHARED", None)
    os.makedirs(f"{root}/run")
    settings = {"model": {"path": MODEL, "threads": THREADS, "shared": shared}, "completion": {"typedAhead": False, "generateAhead": False}, "stats": {"enabled": False}}
    servers, texts = [], []
    for i in range(n):
        p = subprocess.Popen([BIN, "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        send(p, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}, "initializationOptions": settings}})
        until(p, lambda m: m.get("id") == 1)
        send(p, {"jsonrpc": "2.0", "method": "initialized", "params": {}})
        until(p, lambda m: m.get("method") == "window/logMessage" and "model ready" in m["params"]["message"])
        uri = f"file:///w{i}/store.py"
        send(p, {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": TEXT}}})
        send(p, {"jsonrpc": "2.0", "id": 2, "method": "textDocument/inlineCompletion", "params": {"textDocument": {"uri": uri}, "position": {"line": 5, "character": 8}, "context": {"triggerKind": 1}}})
        texts.append(text_of(until(p, lambda m: m.get("id") == 2)))
        servers.append(p)
    time.sleep(1)
    lock = [f for f in os.listdir(f"{root}/run/ghostline")] if os.path.isdir(f"{root}/run/ghostline") else []
    host = None
    for f in lock:
        if f.endswith(".lock"):
            host = int(open(f"{root}/run/ghostline/{f}").read().strip())
    pids = [p.pid for p in servers] + ([host] if host else [])
    figures = [memory(pid) for pid in pids]
    after, apps = gpu_used()
    gpu = (after - before, [apps.get(pid) for pid in pids]) if GPU else None
    for p in servers:
        send(p, {"jsonrpc": "2.0", "id": 9, "method": "shutdown", "params": None})
        until(p, lambda m: m.get("id") == 9)
        send(p, {"jsonrpc": "2.0", "method": "exit", "params": None})
        p.wait(timeout=30)
    if host:
        os.kill(host, signal.SIGKILL)
    time.sleep(1)  # the device's memory is given back as the processes go
    return sum(r for r, _ in figures), sum(s for _, s in figures), figures, gpu, texts


answers = {}
for shared in (False, True):
    for n in (1, 2, 3):
        rss, pss, figures, gpu, texts = run(n, shared)
        answers[(shared, n)] = texts
        mib = lambda b: b / (1 << 20)
        parts = " + ".join(f"{mib(r):.0f}" for r, _ in figures)
        line = f"{'shared    ' if shared else 'in-process'} {n} window(s): RSS {mib(rss):6.0f} MiB ({parts}), PSS {mib(pss):6.0f} MiB"
        if gpu:
            listed = " + ".join("?" if m is None else str(m) for m in gpu[1])
            line += f", GPU {gpu[0]:6d} MiB more than before (per process: {listed})"
            holding = [m for m in gpu[1][:n] if m]
            if shared and holding:
                line += f" -- WINDOWS HOLD GPU MEMORY ({len(holding)} of {n}): their model is the host's"
        print(line, flush=True)
every = [t for texts in answers.values() for t in texts]
print(f"answers: {len(every)} completions, {len(set(every))} distinct text(s): "
      + ("every window, in process and shared, answered the same" if len(set(every)) == 1 else "NOT the same: " + json.dumps(sorted(set(map(str, every))))))
