#!/usr/bin/env python3
"""Scale benchmark: N rdmamsgd daemons on 127.0.0.1..N (softrdma) form a full mesh,
then every node sends to every other one. Prints, per mesh size:

  - the time from starting the daemons until every daemon sees every peer
    established (convergence);
  - resident and registered memory per daemon (from `rdmamsg status`), and per
    additional peer: the difference to a 2-node mesh, divided by the extra peers;
    resident memory again after the traffic (buffers that carried data are
    resident then);
  - all-to-all messages per second: each node runs one sink and one sender, the
    sender sending --messages messages of --size bytes to every other node,
    round-robin, and waiting for each to be confirmed.

usage: bench/scale.py [--nodes N[,N...]] [--messages M] [--size B] [--no-build]
                      [--keep] [--json-out FILE] [--config-extra YAML]
  --nodes         mesh sizes to measure (default 8,16,32); a 2-node baseline is
                  always measured first
  --messages      messages from each node to each other node (default 2000; 0: none)
  --size          payload bytes (default 64)
  --config-extra  YAML lines added to every daemon's configuration (e.g.
                  "buffer_count: 8")
Not part of the test suite: figures go in docs/performance.md and docs/scaling.md.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build", "scale")
CONVERGE_LIMIT = 120.0  # seconds: a mesh that takes longer is reported as not converged
TRAFFIC_LIMIT = 300.0

SENDER = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
import rdmamsg
sock, me, others, count, size = sys.argv[2], sys.argv[3], sys.argv[4].split(","), int(sys.argv[5]), int(sys.argv[6])
payload = b"x" * size
failed = 0
with rdmamsg.Client(sock, name="scale-sender", timeout=30) as c:
    sent = 0
    for i in range(count):
        for node in others:
            c.send(node, "sink", payload)
            sent += 1
    done = 0
    while done < sent:
        comp = c.wait_completion(timeout=60)
        if comp is None:
            break
        done += 1
        if not comp.ok:
            failed += 1
print(done, failed)
"""


def log(text):
    print("=== " + text, file=sys.stderr, flush=True)


def build():
    log("building (Release) into build/scale")
    os.makedirs(BUILD, exist_ok=True)
    with open(os.path.join(BUILD, "build.log"), "w") as out:
        for cmd in (["cmake", "-S", ROOT, "-B", BUILD, "-DCMAKE_BUILD_TYPE=Release",
                     "-DBUILD_TESTING=OFF"],
                    ["cmake", "--build", BUILD, "-j2", "--target", "rdmamsgd", "rdmamsg_cli",
                     "softrdma", "rdmamsg"]):
            if subprocess.call(cmd, stdout=out, stderr=subprocess.STDOUT) != 0:
                sys.exit("scale.py: build failed (build/scale/build.log)")


def binaries():
    paths = {
        "run": os.path.join(BUILD, "softrdma", "softrdma-run"),
        "daemon": os.path.join(BUILD, "daemon", "rdmamsgd"),
        "cli": os.path.join(BUILD, "client", "rdmamsg"),
    }
    lib = None
    for dirpath, _, files in os.walk(os.path.join(BUILD, "client")):
        for f in files:
            if f.startswith("librdmamsg.so"):
                lib = os.path.join(dirpath, f)
                break
    paths["lib"] = lib
    for name, path in paths.items():
        if not path or not os.path.exists(path):
            sys.exit(f"scale.py: {name} not found in build/scale (run without --no-build)")
    return paths


def free_port(hosts):
    import socket
    for _ in range(100):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        ok = True
        for h in hosts:
            t = socket.socket()
            try:
                t.bind((h, port))
            except OSError:
                ok = False
            finally:
                t.close()
            if not ok:
                break
        if ok:
            return port
    sys.exit("scale.py: no free port")


class Mesh:
    def __init__(self, n, bins, workdir, extra):
        self.n, self.bins, self.dir = n, bins, workdir
        self.names = [f"n{i:02d}" for i in range(1, n + 1)]
        self.hosts = [f"127.0.0.{i}" for i in range(1, n + 1)]
        self.port = free_port(self.hosts)
        self.procs = []
        peers = "".join(f"  - {{name: {nm}, address: {h}:{self.port}}}\n"
                        for nm, h in zip(self.names, self.hosts))
        self.sockets = {}
        for nm in self.names:
            sock = os.path.join(workdir, nm + ".sock")
            self.sockets[nm] = sock
            with open(os.path.join(workdir, nm + ".yaml"), "w") as f:
                f.write(f"node: {nm}\nsocket: {sock}\nlog_level: warn\n{extra}peers:\n{peers}")

    def spawn(self, argv, out=subprocess.DEVNULL):
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def start(self):
        self.daemons = []
        for nm in self.names:
            log_file = open(os.path.join(self.dir, nm + ".log"), "w")
            self.daemons.append(self.spawn([self.bins["run"], self.bins["daemon"], "-c",
                                            os.path.join(self.dir, nm + ".yaml"), "--node", nm],
                                           out=log_file))

    def check_running(self):
        for nm, p in zip(self.names, self.daemons):
            if p.poll() is not None:
                with open(os.path.join(self.dir, nm + ".log")) as f:
                    tail = f.read()[-2000:]
                sys.exit(f"scale.py: daemon {nm} exited ({p.returncode}):\n{tail}")

    def status(self, nm):
        try:
            out = subprocess.run([self.bins["cli"], "--socket", self.sockets[nm], "status", "--json"],
                                 capture_output=True, timeout=10)
        except subprocess.TimeoutExpired:
            return None
        if out.returncode != 0:
            return None
        try:
            return json.loads(out.stdout)
        except ValueError:
            return None

    def converged(self, nm):
        s = self.status(nm)
        if s is None:
            return False
        peers = s.get("peers", [])
        return len(peers) == self.n - 1 and all(p.get("state") == "established" for p in peers)

    def wait_converged(self, t0):
        pending = list(self.names)
        while pending and time.monotonic() - t0 < CONVERGE_LIMIT:
            self.check_running()
            pending = [nm for nm in pending if not self.converged(nm)]
            if pending:
                time.sleep(0.05)
        return None if pending else time.monotonic() - t0

    def memory(self):
        rss, reg = [], []
        for nm in self.names:
            s = self.status(nm) or {}
            rss.append(s.get("rss_bytes", 0))
            reg.append(sum(d.get("registered_bytes", 0) for d in s.get("devices", [])))
        return rss, reg

    def traffic(self, messages, size):
        cli, lib = self.bins["cli"], self.bins["lib"]
        env = dict(os.environ, RDMAMSG_LIBRARY=lib)
        expected = messages * (self.n - 1)
        sinks = [self.spawn([cli, "--socket", self.sockets[nm], "bench", "sink", "sink", "--count",
                             str(expected)]) for nm in self.names]
        # Every sink is registered before anything is sent.
        deadline = time.monotonic() + 30
        for nm in self.names:
            while time.monotonic() < deadline:
                s = self.status(nm)
                if s and "sink" in s.get("services", []):
                    break
                time.sleep(0.05)
        t0 = time.monotonic()
        senders = []
        for nm in self.names:
            others = ",".join(x for x in self.names if x != nm)
            p = subprocess.Popen([sys.executable, "-c", SENDER, os.path.join(ROOT, "python"),
                                  self.sockets[nm], nm, others, str(messages), str(size)],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
            self.procs.append(p)
            senders.append(p)
        done = failed = 0
        for p in senders:
            try:
                out, _ = p.communicate(timeout=TRAFFIC_LIMIT)
                d, f = out.decode().split()[-2:]
                done += int(d)
                failed += int(f)
            except (subprocess.TimeoutExpired, ValueError):
                pass
        for p in sinks:
            try:
                p.wait(timeout=max(1.0, TRAFFIC_LIMIT - (time.monotonic() - t0)))
            except subprocess.TimeoutExpired:
                pass
        elapsed = time.monotonic() - t0
        total = messages * self.n * (self.n - 1)
        return {"messages": total, "confirmed": done, "failed": failed, "seconds": elapsed,
                "per_second": done / elapsed if elapsed > 0 else 0}

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else 0


def measure(n, bins, args, keep_dir):
    workdir = tempfile.mkdtemp(prefix=f"rdmamsg-scale-{n}-")
    mesh = Mesh(n, bins, workdir, args.config_extra)
    try:
        log(f"{n} daemons: starting")
        t0 = time.monotonic()
        mesh.start()
        converge = mesh.wait_converged(t0)
        rss, reg = mesh.memory()
        result = {"nodes": n, "converge_seconds": converge, "rss_median": median(rss),
                  "rss_max": max(rss), "registered_median": median(reg)}
        if converge is not None and args.messages > 0 and n >= 2:
            log(f"{n} daemons: all-to-all, {args.messages} x {args.size} B per pair")
            result["traffic"] = mesh.traffic(args.messages, args.size)
            rss, _ = mesh.memory()  # buffers that carried traffic are resident now
            result["rss_after_traffic_median"] = median(rss)
        return result
    finally:
        mesh.stop()
        if keep_dir:
            log(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def mib(x):
    return x / (1 << 20)


def main():
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--nodes", default="8,16,32")
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json-out", default=os.path.join(ROOT, "build", "scale", "results.json"))
    ap.add_argument("--config-extra", default="")
    ap.add_argument("-h", "--help", action="store_true")
    args = ap.parse_args()
    if args.help:
        print(__doc__)
        return 0
    try:
        sizes = [int(x) for x in args.nodes.split(",")]
    except ValueError:
        sys.exit("scale.py: --nodes takes numbers like 8,16,32")
    if any(n < 2 or n > 250 for n in sizes):
        sys.exit("scale.py: mesh sizes are 2..250")
    if args.config_extra and not args.config_extra.endswith("\n"):
        args.config_extra += "\n"
    if not args.no_build:
        build()
    bins = binaries()
    base = measure(2, bins, argparse.Namespace(**{**vars(args), "messages": 0}), args.keep)
    results = [base]
    for n in sizes:
        results.append(measure(n, bins, args, args.keep))

    print(f"{'nodes':>5} {'converge':>9} {'RSS/daemon':>11} {'registered/daemon':>18} "
          f"{'RSS/extra peer':>15} {'reg./extra peer':>16} {'all-to-all msg/s':>17} {'failed':>7} "
          f"{'RSS after traffic':>18}")
    for r in results:
        n = r["nodes"]
        conv = f"{r['converge_seconds']:.2f} s" if r["converge_seconds"] is not None else "no"
        extra = n - 2
        rss_peer = f"{mib(r['rss_median'] - base['rss_median']) / extra:.2f} MiB" if extra else "-"
        reg_peer = (f"{mib(r['registered_median'] - base['registered_median']) / extra:.2f} MiB"
                    if extra else "-")
        t = r.get("traffic")
        rate = f"{t['per_second']:.0f}" if t else "-"
        fails = str(t["failed"] + t["messages"] - t["confirmed"]) if t else "-"
        after = r.get("rss_after_traffic_median")
        after = f"{mib(after):.1f} MiB" if after else "-"
        print(f"{n:>5} {conv:>9} {mib(r['rss_median']):>7.1f} MiB {mib(r['registered_median']):>14.1f} MiB "
              f"{rss_peer:>15} {reg_peer:>16} {rate:>17} {fails:>7} {after:>18}")
    os.makedirs(os.path.dirname(args.json_out), exist_ok=True)
    with open(args.json_out, "w") as f:
        json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
