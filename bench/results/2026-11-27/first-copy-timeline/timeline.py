#!/usr/bin/env python3
"""Where a copy's time goes, from a packet capture on the client's side of the link.

usage: timeline.py CAPTURE.pcap [LINK_MBIT]

Reads `tcpdump -r CAPTURE -n -tt` and prints, from the first packet on:
- each ssh request the client sent and how long its answer took (the login's round
  trips, one line each);
- when the server's first line came after the exec request;
- the first UDP packet (QUIC Initial), the handshake's answer, the first data;
- per 100 ms, the client's UDP bytes sent as % of LINK_MBIT (default 100), until the
  last data packet;
- when the last packet was seen;
- the client's UDP bytes in all (IP headers included) and their time at LINK_MBIT.
"""
import subprocess
import sys


def packets(path):
    out = subprocess.run(["tcpdump", "-r", path, "-n", "-tt"], capture_output=True, text=True).stdout
    t0 = None
    for line in out.splitlines():
        f = line.split()
        if len(f) < 5 or f[1] != "IP":
            continue
        t = float(f[0])
        t0 = t if t0 is None else t0
        src, dst = f[2], f[4].rstrip(":")
        udp = " UDP," in line
        length = int(line.rsplit("length", 1)[1].split()[0].rstrip(":")) if "length" in line else 0
        yield t - t0, src, dst, udp, length, line


def main():
    path = sys.argv[1]
    link = float(sys.argv[2]) if len(sys.argv) > 2 else 100.0
    pkts = list(packets(path))
    # The client is whoever sent the first packet to ssh's port (or the first UDP).
    first = next((p for p in pkts if p[2].endswith(".22")), None) or next(p for p in pkts if p[3])
    client = first[1].rsplit(".", 1)[0]
    # ssh: client data segments and the server data that answered them.
    pending = None
    print("ssh over TCP (client data -> first server data after it):")
    for t, src, dst, udp, length, line in pkts:
        if udp:
            break
        if not (src.endswith(".22") or dst.endswith(".22")):
            continue
        if src.rsplit(".", 1)[0] == client and length > 0 and pending is None:
            pending = (t, length)
        elif src.endswith(".22") and length > 0 and pending is not None:
            print(f"  {pending[0]:7.3f} s  client {pending[1]:5d} B -> server {length:5d} B after {1000 * (t - pending[0]):6.1f} ms")
            pending = None
    first_udp = next((p for p in pkts if p[3]), None)
    if first_udp is None:
        print("no UDP")
        return
    print(f"first UDP (QUIC Initial) at {first_udp[0]:.3f} s")
    answer = next(p for p in pkts if p[3] and p[1].rsplit(".", 1)[0] != client)
    print(f"server's first UDP at {answer[0]:.3f} s")
    data = [p for p in pkts if p[3] and p[1].rsplit(".", 1)[0] == client and p[4] >= 1200]
    print(f"first full-size client datagram after the handshake at {next(p[0] for p in data if p[0] > answer[0]):.3f} s")
    last = data[-1][0]
    print(f"last full-size client datagram at {last:.3f} s; last packet at {pkts[-1][0]:.3f} s")
    sent = sum(p[4] + 28 for p in pkts if p[3] and p[1].rsplit(".", 1)[0] == client)
    print(f"client UDP sent: {sent} IP bytes, {sent * 8 / (link * 1e6):.3f} s at the link rate")
    bins = {}
    for t, src, dst, udp, length, line in pkts:
        if udp and src.rsplit(".", 1)[0] == client:
            bins[int(t * 10)] = bins.get(int(t * 10), 0) + length + 28
    print("client UDP sent per 100 ms, % of the link (IP bytes):")
    row = []
    for b in range(int(first_udp[0] * 10), int(last * 10) + 1):
        row.append(f"{b / 10:5.1f}:{100 * bins.get(b, 0) * 8 / (link * 1e6 / 10):4.0f}")
        if len(row) == 10:
            print("  " + "  ".join(row))
            row = []
    if row:
        print("  " + "  ".join(row))


main()
