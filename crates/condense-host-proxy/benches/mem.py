#!/usr/bin/env python3
"""Resident memory of `condense proxy` holding one conversation.

Usage: python3 crates/condense-host-proxy/benches/mem.py TOKENS [SETTINGS] [--responses] [--massif] [--conversations=N]
(after `cargo build --release -p condense-cli`; SETTINGS a settings file
for the proxy, e.g. one with `"enabled": false` to see the proxy's own
share). Starts a scripted upstream
on 127.0.0.1, the proxy in front of it, sends a Claude Code-shaped history
(with `--responses`, a Codex-shaped Responses input) of about TOKENS
tokens, then five calls that each add an exchange, and prints the body
size, VmRSS (with its anonymous and file-backed parts) and VmHWM. With
`--conversations=N` (Messages only), N-1 more conversations of the same
size follow, each under its own session id, and the RSS is printed after
each: what a further conversation costs once the first has run.

With `--massif` (after `cargo build --profile profiling -p condense-cli`)
the proxy runs under `valgrind --tool=massif`; once the calls are done a
detailed snapshot of the idle heap is taken (`vgdb`) and its live bytes
are printed by the first frame of condense's own code on each allocating
stack (`ms_print` cannot print trees this deep); then the proxy is
stopped and the peak heap of the whole run is printed the same way
(`MEM_TOP=N` in the environment: the N largest sites, 15 by default).
"""
import collections, http.server, json, os, re, subprocess, sys, tempfile, threading, time, urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../../.."))
RESPONSES = "--responses" in sys.argv
CONVERSATIONS = next((int(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--conversations=")), 1)
MASSIF = "--massif" in sys.argv


def by_first_frame(path, title="live heap at idle"):
    """Live bytes of a massif snapshot, by the first condense frame."""
    by_lines(open(path).read().split("\n"), title)


def peak_by_first_frame(path):
    """The same for the peak snapshot of a massif output file."""
    lines = open(path).read().split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith("snapshot=")] + [len(lines)]
    for start, end in zip(starts, starts[1:]):
        if "heap_tree=peak" in lines[start:end]:
            by_lines(lines[start:end], "peak heap")


def by_lines(lines, title):
    sys.setrecursionlimit(100000)
    nodes = [re.match(r"^ *n(\d+): (\d+) (.*)$", line) for line in lines]
    nodes = [(int(m.group(1)), int(m.group(2)), m.group(3)) for m in nodes if m]
    held = collections.Counter()

    def walk(k, attributed):
        children, size, frame = nodes[k]
        name = re.sub(r"^0x[0-9A-F]+: ", "", frame)
        name = re.sub(r" \(.*", "", name)
        if attributed is None and k and "condense" in name:
            attributed = name
        k += 1
        for _ in range(children):
            k = walk(k, attributed)
        if children == 0:
            held[attributed or "runtime and allocator (no condense frame)"] += size
        return k

    walk(0, None)
    total = nodes[0][1]
    print("%s: %.1f MB" % (title, total / 1e6))
    for name, size in held.most_common(int(os.environ.get("MEM_TOP", "15"))):
        print("%6.2f MB  %s" % (size / 1e6, name[:120]))
ANSWER_RESPONSES = b'event: response.completed\ndata: {"type":"response.completed","response":{"id":"r","status":"completed","output":[],"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":1,"total_tokens":11}}}\n\n'
ANSWER = b'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n'


class Upstream(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        answer = ANSWER_RESPONSES if RESPONSES else ANSWER
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


def exchange(messages, tid, command, out):
    """Appends a call and its output, in the wire's shape."""
    if RESPONSES:
        messages.append({"type": "function_call", "call_id": tid, "name": "exec_command",
                         "arguments": json.dumps({"cmd": command})})
        messages.append({"type": "function_call_output", "call_id": tid, "output": out})
    else:
        messages.append({"role": "assistant", "content": [{"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": command}}]})
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": out}]})


def main():
    tokens = int(sys.argv[1])
    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    logs = tempfile.mkdtemp()
    args = [a for a in sys.argv[1:] if a not in ("--responses", "--massif") and not a.startswith("--conversations=")]
    settings = ["--settings", args[1]] if len(args) > 1 else []
    # Every site, however small, is named: below massif's default threshold
    # (1% of the heap) the many small ones would count as the runtime's.
    massif_out = os.path.join(logs, "run.massif")
    wrap = ["valgrind", "--tool=massif", "--threshold=0.01", "--massif-out-file=" + massif_out] if MASSIF else []
    binary = "target/profiling/condense" if MASSIF else "target/release/condense"
    proxy = subprocess.Popen(
        wrap + [os.path.join(ROOT, binary), "proxy", "--port", "0",
         "--upstream", "http://127.0.0.1:%d" % upstream.server_port,
         "--openai-upstream", "http://127.0.0.1:%d" % upstream.server_port, "--dir", logs] + settings,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    addr = proxy.stdout.readline().strip()

    def status():
        text = open("/proc/%d/status" % proxy.pid).read()
        return {l.split(":")[0]: l.split(":")[1].strip() for l in text.splitlines()
                if l.startswith(("VmRSS", "VmHWM", "RssAnon", "RssFile"))}

    idle = status()
    if RESPONSES:
        messages = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Work through the backlog."}]}]
    else:
        messages = [{"role": "user", "content": [{"type": "text", "text": "Work through the backlog."}]}]
    chars, n = 0, 0
    while chars < tokens * 4:
        n += 1
        out = "".join("line %d of output %d: status %d\n" % (i, n, (i * n) % 7) for i in range(60)) * 2
        chars += len(out)
        tid = "toolu_%06d" % n
        exchange(messages, tid, "make step%d" % n, out)

    def send(session="mem"):
        if RESPONSES:
            # Codex offers condense's MCP tool behind its tool search.
            tools = [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
                     {"type": "tool_search", "execution": "client"}]
            body = json.dumps({"model": "gpt-5.5", "instructions": "", "input": messages, "tools": tools, "stream": True,
                               "store": False, "prompt_cache_key": "mem"}).encode()
            req = urllib.request.Request(addr + "/v1/responses", data=body, headers={
                "session-id": "mem", "authorization": "Bearer k", "content-type": "application/json"})
        else:
            body = json.dumps({"model": "claude-sonnet-4-5", "messages": messages, "max_tokens": 1000, "stream": True}).encode()
            req = urllib.request.Request(addr + "/v1/messages", data=body, headers={
                "x-claude-code-session-id": session, "x-api-key": "k", "content-type": "application/json"})
        start = time.time()
        urllib.request.urlopen(req).read()
        return len(body), time.time() - start

    size, first = send()
    for i in range(5):
        exchange(messages, "toolu_next_%d" % i, "ls", "ok")
        size, _ = send()
    now = status()
    for c in range(1, CONVERSATIONS):
        messages[0] = {"role": "user", "content": [{"type": "text", "text": "Work through backlog %d." % c}]}
        send("mem%d" % c)
        for i in range(5):
            exchange(messages, "toolu_c%d_%d" % (c, i), "ls", "ok")
            send("mem%d" % c)
        more = status()
        print("%d conversations: VmRSS %s (RssAnon %s), %+.1f MB"
              % (c + 1, more["VmRSS"], more["RssAnon"],
                 (int(more["VmRSS"].split()[0]) - int(now["VmRSS"].split()[0])) / 1e3))
        now = more
    print("tokens %d: body %.1f MB, first call %.2f s, VmRSS %s (RssAnon %s, RssFile %s), VmHWM %s (idle %s)"
          % (tokens, size / 1e6, first, now["VmRSS"], now["RssAnon"], now["RssFile"], now["VmHWM"], idle["VmRSS"]))
    if MASSIF:
        snapshot = os.path.join(logs, "idle.massif")
        subprocess.run(["vgdb", "--pid=%d" % proxy.pid, "detailed_snapshot", snapshot],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120, check=True)
        by_first_frame(snapshot)
        proxy.terminate()
        proxy.wait(timeout=120)
        peak_by_first_frame(massif_out)
    proxy.kill()


if __name__ == "__main__":
    main()
