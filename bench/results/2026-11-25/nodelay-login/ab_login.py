#!/usr/bin/env python3
"""A/B of a first copy's login: soku dialing ssh's connection (default) against ssh
dialing it (SOKU_NO_DIAL=1), alternated round after round.

Usage: ab_login.py SOKU NETNS SSH_CONFIG HOST ROUNDS

SOKU: the soku binary (also used as --remote-soku); NETNS: the client's namespace of an
emulated path (`soku-netem up`); SSH_CONFIG: an ssh config whose HOST reaches the sshd
in the far namespace. Each copy uploads a 1 KiB file to /tmp on HOST, then the shared
login's master is ended, so that every copy logs in afresh.
"""
import glob
import os
import statistics
import subprocess
import sys
import tempfile
import time

soku, ns, config, host, rounds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
scratch = tempfile.mkdtemp()
runtime = os.path.join(scratch, "run")
os.makedirs(runtime, mode=0o700)
source = os.path.join(scratch, "tiny")
with open(source, "wb") as f:
    f.write(os.urandom(1024))


def end_masters():
    for socket in glob.glob(os.path.join(runtime, "soku", "ssh", "*")):
        subprocess.run(["ip", "netns", "exec", ns, "ssh", "-o", "ControlPath=" + socket,
                        "-O", "exit", host], capture_output=True)


def copy(ssh_dials):
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(scratch, "cache"), XDG_RUNTIME_DIR=runtime)
    if ssh_dials:
        env["SOKU_NO_DIAL"] = "1"
    started = time.perf_counter()
    out = subprocess.run(["ip", "netns", "exec", ns, soku, "-F", config, "--remote-soku", soku,
                          "--no-resume", source, host + ":/tmp/ab-login-tiny"],
                         capture_output=True, env=env)
    took = time.perf_counter() - started
    assert out.returncode == 0, out.stderr
    end_masters()
    return took


times = {"ssh dials": [], "soku dials": []}
for _ in range(rounds):
    times["ssh dials"].append(copy(True))
    times["soku dials"].append(copy(False))
for name, v in times.items():
    print("%-11s median %.3f  range %.3f-%.3f  %s" % (
        name, statistics.median(v), min(v), max(v), " ".join("%.2f" % x for x in v)))
