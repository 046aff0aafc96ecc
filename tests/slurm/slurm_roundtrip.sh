#!/usr/bin/env bash
# Real-Slurm round trip of `prefixsim sweep` (no mock): starts a private single-node Slurm
# (munged, slurmctld -D, slurmd -D as root) with its own config, key, sockets, spool and state
# under a temp dir, submits a grid as a 4-task job array plus the dependent merge job, waits
# (bounded), and checks the merged result is byte-identical to a local unsharded run. Stops
# exactly the daemons it started, by pid. Never reads or writes an existing Slurm config.
#
#   tests/slurm/slurm_roundtrip.sh PREFIXSIM GRID
#
# Exit 0: pass; 1: fail; 77: skipped (Slurm/munge not installed or not root).
set -uo pipefail
prefixsim=$(readlink -f "$1")
grid=$(readlink -f "$2")
timeout_s=${SLURM_ROUNDTRIP_TIMEOUT_S:-300}
skip() { echo "SKIP: $*"; exit 77; }
for b in slurmctld slurmd munged sbatch squeue; do
  command -v "$b" >/dev/null 2>&1 || skip "$b not found (apt-get install slurm-wlm munge)"
done
[ "$(id -u)" -eq 0 ] || skip "needs root to run slurmd"
plugin_dir=$(dirname "$(find /usr/lib -name select_linear.so -path '*slurm*' 2>/dev/null | head -1)")
[ -n "$plugin_dir" ] && [ "$plugin_dir" != . ] || skip "Slurm plugins not found"

start=$(date +%s)
tmp=$(mktemp -d /tmp/prefixsim-slurm.XXXXXX)
chmod 755 "$tmp"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  done
  if [ "${KEEP_TMP:-0}" = 1 ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$tmp"/log/*.log "$tmp"/out/slurm-*.out; do
    [ -f "$f" ] && { echo "--- $f"; tail -20 "$f"; }
  done
  exit 1
}

mkdir -p "$tmp"/{munge,log,state,spool,out,local}
# Ports: a free-ish range derived from the pid, so parallel runs do not clash.
base=$((20000 + ($$ % 2000) * 4))
ctld_port=$base
slurmd_port=$((base + 1))
host=$(hostname -s)
cpus=$(nproc)

# munge: own key, socket, pid and log files.
dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$tmp/munge/munge.key"
chmod 700 "$tmp/munge"
munge_socket="$tmp/munge/munge.socket"
munged --foreground --force --key-file="$tmp/munge/munge.key" --socket="$munge_socket" \
  --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/log/munged.log" \
  --seed-file="$tmp/munge/munged.seed" >"$tmp/log/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$munge_socket" ] && break; sleep 0.1; done
[ -S "$munge_socket" ] || fail "munged did not start"

export SLURM_CONF="$tmp/slurm.conf"
cat >"$SLURM_CONF" <<CONF
ClusterName=prefixsim-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$munge_socket
PluginDir=$plugin_dir
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
SwitchType=switch/none
InactiveLimit=0
KillWait=5
MinJobAge=300
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF

slurmctld -D -i -f "$SLURM_CONF" >"$tmp/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" -N "$host" >"$tmp/log/slurmd.out" 2>&1 &
pids+=($!)
up=0
for _ in $(seq 150); do
  if sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then up=1; break; fi
  for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null || fail "a daemon (pid $pid) exited"; done
  sleep 0.2
done
[ "$up" = 1 ] || fail "node did not come up: $(sinfo 2>&1 | tail -2)"
echo "slurm up after $(( $(date +%s) - start )) s"

# Local unsharded run.
"$prefixsim" sweep --grid "$grid" --out "$tmp/local" --no-wall-time --quiet || fail "local sweep"

# The array job (4 tasks) and the dependent merge, submitted by `prefixsim sweep --slurm --submit`.
out="$tmp/out"
submitted=$("$prefixsim" sweep --grid "$grid" --out "$out" --no-wall-time --slurm --submit \
  --shards 4) || fail "prefixsim sweep --slurm --submit: $submitted"
echo "$submitted"
job=$(echo "$submitted" | sed -n 's/^array job \([0-9]*\) .*/\1/p')
merge=$(echo "$submitted" | sed -n 's/.*merge job \([0-9]*\)$/\1/p')
[ -n "$job" ] && [ -n "$merge" ] || fail "no job ids in: $submitted"

deadline=$(( $(date +%s) + timeout_s ))
while squeue -h -j "$job,$merge" 2>/dev/null | grep -q .; do
  [ "$(date +%s)" -lt "$deadline" ] || fail "jobs still queued after ${timeout_s}s: $(squeue)"
  sleep 0.5
done
[ -f "$out/results.json" ] || fail "no merged results.json"
for i in 0 1 2 3; do [ -d "$out/shard-$i/points" ] || fail "shard $i produced nothing"; done
cmp "$tmp/local/results.json" "$out/results.json" || fail "results.json differs"
cmp "$tmp/local/results.csv" "$out/results.csv" || fail "results.csv differs"
diff -r "$tmp/local/points" "$out/points" >/dev/null || fail "point files differ"
echo "PASS: 4-task array + merge equals the local run ($(ls "$out/points" | wc -l) points)," \
  "$(( $(date +%s) - start )) s in all"
