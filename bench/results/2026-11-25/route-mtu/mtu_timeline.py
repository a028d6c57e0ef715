#!/usr/bin/env python3
"""One first copy with --json -v: the QUIC path's MTU and packets sent every 0.5 s.

Usage: mtu_timeline.py NETNS SSH_CONFIG HOST SOKU SRC DEST_DIR [soku args...]
(an emulated path and an sshd set up as in docs/netem.md; the copy logs in afresh and
has no path memory; its master is ended afterwards)."""
import glob, json, os, shutil, subprocess, sys, tempfile, time

ns, cfg, host, soku, src, dest = sys.argv[1:7]
extra = sys.argv[7:]
work = tempfile.mkdtemp()
os.makedirs(f"{work}/run", mode=0o700)
env = dict(os.environ, XDG_CACHE_HOME=f"{work}/cache", XDG_RUNTIME_DIR=f"{work}/run")
cmd = ["ip", "netns", "exec", ns, soku, "--json", "-v", "-F", cfg, "--remote-soku", soku,
       *extra, src, f"{host}:{dest}/"]
t0, connected, out = time.monotonic(), None, []
p = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
for line in p.stderr:
    t = time.monotonic() - t0
    if not line.startswith("{"):
        continue
    e = json.loads(line)
    if e["event"] == "connected":
        connected = t
    elif e["event"] in ("path_sample", "path") and connected is not None:
        out.append("%.2f s: MTU %s, %d packets" % (t - connected, e["mtu"], e["sent_packets"]))
    elif e["event"] == "finished" and connected is not None:
        out.append("finished %.2f s after the QUIC connection" % (t - connected))
p.wait()
for sock in glob.glob(f"{work}/run/soku/ssh/*"):
    subprocess.run(["ip", "netns", "exec", ns, "ssh", "-F", cfg, "-o", "ControlPath=" + sock,
                    "-O", "exit", host], capture_output=True)
shutil.rmtree(work, ignore_errors=True)
print(os.path.basename(soku), "rc", p.returncode)
print("\n".join(out))
