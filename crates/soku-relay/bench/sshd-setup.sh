# Sourced by the relay benchmarks: fresh host and user keys, known_hosts (under the real
# address and the alias `bench-alias`, for connections through a local relay port) and an
# sshd_config for a throwaway root-login sshd.
#
#   sshd_setup DIR HOST PORT        writes DIR/{host,user,auth,known,sshd_config}
sshd_setup() {
  local d=$1 host=$2 port=$3 name
  ssh-keygen -q -t ed25519 -N '' -f "$d/host"; ssh-keygen -q -t ed25519 -N '' -f "$d/user"
  cp "$d/user.pub" "$d/auth"
  if [ "$port" = 22 ]; then name=$host; else name="[$host]:$port"; fi
  echo "$name $(cut -d' ' -f1,2 "$d/host.pub")" > "$d/known"
  echo "bench-alias $(cut -d' ' -f1,2 "$d/host.pub")" >> "$d/known"
  cat > "$d/sshd_config" <<CFG
ListenAddress $host
Port $port
HostKey $d/host
AuthorizedKeysFile $d/auth
PidFile $d/sshd.pid
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin prohibit-password
StrictModes no
Subsystem sftp internal-sftp
CFG
}
