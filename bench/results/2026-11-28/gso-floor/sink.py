#!/usr/bin/env python3
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.settimeout(3)
buf = bytearray(65536)
got = 0
try:
    while True:
        got += s.recv_into(buf)
except socket.timeout:
    pass
print(got)
