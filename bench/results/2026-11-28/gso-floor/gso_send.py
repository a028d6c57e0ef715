#!/usr/bin/env python3
"""Bare UDP sender with GSO (UDP_SEGMENT), paced: no crypto, no protocol.
usage: gso_send.py DEST PORT MBIT SECONDS SEGS_PER_SEND"""
import socket, sys, time
dest, port, mbit, secs, segs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
SEG = 1472
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
if segs > 1:
    s.setsockopt(socket.SOL_UDP, 103, SEG)  # UDP_SEGMENT
s.connect((dest, port))
buf = bytes(SEG * segs)
interval = SEG * segs * 8 / (mbit * 1e6)
end = time.monotonic() + secs
nxt = time.monotonic()
sent = 0
while True:
    now = time.monotonic()
    if now >= end:
        break
    if now < nxt:
        time.sleep(nxt - now)
    try:
        s.send(buf)
    except ConnectionRefusedError:
        continue  # the sink not up yet: an ICMP answer to an earlier datagram
    sent += len(buf)
    nxt += interval
print(sent)
