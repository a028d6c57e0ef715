#!/bin/sh
# soku -e: called as `rsh.sh HOST COMMAND...`; runs COMMAND in the emulator's far
# namespace, as ssh would on HOST (with the SSH_CONNECTION sshd would set).
shift
exec ip netns exec rp1-b env SSH_CONNECTION="10.77.0.1 40000 10.77.0.2 22" sh -c "$*"
