#!/bin/bash
# 1 GiB uploads from ext4 to ext4 through ssh on this host, binaries alternated round
# after round; `perf stat` counts each side's task-clock and page faults (the client's
# figure includes its ssh). One line per run on stdout:
#   NAME ROUND wall SECONDS cli MS FAULTS srv MS FAULTS ok|DIFF
# usage: ab-ssh-loopback.sh ROUNDS SSH_CONFIG HOST "NAME=BINARY[:ENV=VALUE] ..."
#   e.g. ab-ssh-loopback.sh 5 /tmp/sshd/ssh_config lo "main=/tmp/soku-main nothp=/tmp/soku-main:MIMALLOC_ALLOW_THP=0"
# HOST is a Host entry of SSH_CONFIG for an sshd on 127.0.0.1 (root, key login).
rounds=$1; cfg=$2; host=$3; variants=$4
src=/var/tmp/soku-ab-src; dst=/var/tmp/soku-ab-dst; w=$(mktemp -d)
[ -f $src ] || head -c 1G /dev/urandom > $src
mkdir -p $dst
for v in $variants; do
  name=${v%%=*}; rest=${v#*=}; bin=${rest%%:*}; env=X=1; [[ $rest == *:* ]] && env=${rest#*:}
  printf '#!/bin/bash\nexec env %s perf stat -x, -e task-clock,page-faults -o %s/srv.out %s "$@"\n' \
    "$env" "$w" "$bin" > "$w/srv-$name"
  chmod +x "$w/srv-$name"
done
for r in $(seq 1 "$rounds"); do for v in $variants; do
  name=${v%%=*}; rest=${v#*=}; bin=${rest%%:*}; env=X=1; [[ $rest == *:* ]] && env=${rest#*:}
  rm -f $dst/soku-ab-src; sync; sleep 1
  s=$(date +%s.%N)
  env $env perf stat -x, -e task-clock,page-faults -o "$w/cli.out" "$bin" -F "$cfg" \
    --remote-soku "$w/srv-$name" $src "$host:$dst/" 2>/dev/null
  e=$(date +%s.%N); sleep 0.5
  cmp -s $src $dst/soku-ab-src && ok=ok || ok=DIFF
  echo "$name $r wall $(echo "$e - $s" | bc) cli $(grep -v '^#' "$w/cli.out" | cut -d, -f1 | tr '\n' ' ')srv $(grep -v '^#' "$w/srv.out" | cut -d, -f1 | tr '\n' ' ')$ok"
done; done
rm -rf "$w"
