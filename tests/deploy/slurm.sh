#!/bin/bash
# slurm.sh CHIPD CHIPCTL - deploy/slurm/chipd.sbatch on a real single-node Slurm
# cluster (Debian's slurmctld, slurmd, munge), started here and stopped at the end:
#   1. a job runs chipd with two sim chips, streams four requests, prints the stats,
#      stops chipd cleanly and exits 0;
#   2. a job with long requests is scancel'ed mid-work: chipd drains and stops well
#      inside KillWait, leaving no region in /dev/shm and no process of the job.
# Needs root (skipped, 77, otherwise); installs the Slurm packages when missing. The
# cluster is private: its own munged socket and key, config, state, logs, pid files
# and ports (16817, 16818) in a temporary directory; nothing of the host's Slurm or
# munge is used or changed. Every wait is bounded; a failure prints the job outputs
# and the daemons' logs.
set -eu
chipd=$(readlink -f "$1")
chipctl=$(readlink -f "$2")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
t0=$SECONDS

say() { echo "slurm.sh [$((SECONDS - t0))s]: $*"; }
if [ "$(id -u)" != 0 ]; then
	echo "slurm.sh: needs root (a private Slurm cluster runs its daemons as root and munge): skipped"
	exit 77
fi
# shellcheck source=deploy/lib/packages.sh
. "$root/deploy/lib/packages.sh"
chipd_need_packages slurmctld slurmd slurm-client munge || {
	echo "slurm.sh: could not install slurmctld slurmd slurm-client munge" >&2
	exit 1
}
say "packages present"

# One private cluster at a time on this machine (fixed ports).
exec 9>/tmp/chipd-slurm-test.lock
flock -w 600 9 || {
	echo "slurm.sh: another slurm.sh held /tmp/chipd-slurm-test.lock for 600 s" >&2
	exit 1
}
for port in 16817 16818; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		echo "slurm.sh: port $port is in use: cannot start the test cluster" >&2
		exit 1
	fi
done

dir=$(mktemp -d /tmp/chipd-slurm.XXXXXX)
chmod 755 "$dir"
mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log" "$dir/run" "$dir/jobs" "$dir/bin"
chown munge:munge "$dir/munge"
chmod 711 "$dir/munge" # munged: the socket's directory must be searchable by all
ln -s "$chipd" "$dir/bin/chipd"
ln -s "$chipctl" "$dir/bin/chipctl"
export SLURM_CONF=$dir/slurm.conf
unset SLURM_JOB_ID CHIPD_INSTANCE || true
jobs=()

dump() {
	local f
	for f in "$dir"/jobs/*.out "$dir"/log/*.log "$dir"/munge/munged.log; do
		[ -e "$f" ] || continue
		echo "----- $f"
		tail -n 200 "$f"
	done
}
stop_daemon() { # stop_daemon PIDFILE NAME: SIGTERM, wait up to 10 s, then SIGKILL
	local pid t=$SECONDS
	[ -s "$1" ] || return 0
	pid=$(cat "$1")
	kill -TERM "$pid" 2>/dev/null || return 0
	for _ in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || { say "$2 stopped in $((SECONDS - t)) s" && return 0; }
		sleep 0.1
	done
	echo "slurm.sh: $2 (pid $pid) did not stop in 10 s: SIGKILL" >&2
	kill -KILL "$pid" 2>/dev/null || true
}
status=1
cleanup() {
	local j
	for j in "${jobs[@]}"; do
		timeout 10 scancel "$j" 2>/dev/null || true
	done
	[ "$status" = 0 ] || dump
	stop_daemon "$dir/run/slurmd.pid" slurmd
	stop_daemon "$dir/run/slurmctld.pid" slurmctld
	stop_daemon "$dir/munge/munged.pid" munged
	rm -rf "$dir"
	say "daemons stopped"
}
trap cleanup EXIT
fail() {
	echo "slurm.sh: FAIL: $*" >&2
	exit 1
}

# munge: a private daemon with its own key and socket (AuthInfo below).
runuser -u munge -- mungekey -c -k "$dir/munge/munge.key"
runuser -u munge -- munged --socket="$dir/munge/munge.socket" \
	--key-file="$dir/munge/munge.key" --pid-file="$dir/munge/munged.pid" \
	--log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed" ||
	fail "munged did not start"

host=$(hostname -s)
mem=$(($(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo) - 512))
cat >"$SLURM_CONF" <<EOF
ClusterName=chipdtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerParameters=batch_sched_delay=0
MailProg=/bin/true
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
KillWait=30
ReturnToService=2
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$mem State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF

slurmctld -i || fail "slurmctld did not start"
slurmd || fail "slurmd did not start"
for _ in $(seq 300); do
	[ "$(sinfo -h -N -o %T 2>/dev/null)" = idle ] && break
	sleep 0.2
done
[ "$(sinfo -h -N -o %T 2>/dev/null)" = idle ] ||
	fail "the node is not idle after 60 s: $(sinfo -N 2>&1)"
say "cluster up: node $host idle"

job_field() { # job_field ID FIELD: a field of `scontrol show job`
	scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p"
}
submit() { # submit NAME [SCRIPT [SBATCH-ARGS...]]: the job id
	local name=$1 script=${2:-chipd.sbatch}
	shift $(($# < 2 ? $# : 2))
	CHIPD_BIN_DIR=$dir/bin CHIPD_SIM_CHIPS=2 CHIPD_LOG_LEVEL=info \
		sbatch --parsable --chdir="$dir/jobs" --output="$dir/jobs/$name.out" \
		--time=5 "$@" "$root/deploy/slurm/$script"
}
# The job's processes are gone and so is its region.
tokens() { # tokens FILE: how many token lines (ID SEQ VALUE) FILE has
	if [ -e "$1" ]; then grep -cE '^@?[0-9]+ [0-9]+ [0-9]+$' "$1" || true; else echo 0; fi
}
wait_job() { # wait_job ID SECONDS: until the job has ended; prints its final state
	local state
	for _ in $(seq $(($2 * 10))); do
		state=$(job_field "$1" JobState)
		case $state in PENDING | CONFIGURING | RUNNING | COMPLETING | "") ;; *) break ;; esac
		sleep 0.1
	done
	echo "$state"
}
expect() { # expect PATTERN WHAT: the job's output has a line matching PATTERN (grep)
	grep -q "$1" "$out" || fail "job $id: $2"
}
check_nothing_left() { # check_nothing_left ID
	local pids
	[ ! -e "/dev/shm/chipd.0.$1" ] || fail "job $1: region /dev/shm/chipd.0.$1 left behind"
	pids=$(grep -lz "^SLURM_JOB_ID=$1\$" /proc/[0-9]*/environ 2>/dev/null |
		cut -d/ -f3 | tr '\n' ' ') || true
	[ -z "$pids" ] || fail "job $1: processes left: $(ps -o pid,args -p "$pids" 2>&1)"
}

# 1. A job that runs to its end.
t1=$SECONDS
id=$(submit ok)
jobs+=("$id")
state=$(wait_job "$id" 120)
exitcode=$(job_field "$id" ExitCode)
say "job $id (runs to its end): $state, ExitCode $exitcode, $((SECONDS - t1)) s"
out=$dir/jobs/ok.out
[ "$state" = COMPLETED ] || fail "job $id: state $state, not COMPLETED (bound 120 s)"
[ "$exitcode" = 0:0 ] || fail "job $id: ExitCode=$exitcode, not 0:0"
expect 'chipd.sbatch: chipd ready' "chipd was not ready"
[ "$(tokens "$out")" = 48 ] ||
	fail "job $id: not 48 tokens (4 requests of 12)"
[ "$(grep -cE '^request @?[0-9]+: completed, 12 tokens' "$out")" = 4 ] ||
	fail "job $id: not 4 completed requests"
expect '^  tokens  *[1-9]' "no stats printed"
expect 'chipd\[[0-9]*\] info: stopped' "chipd did not log its stop"
expect 'chipd.sbatch: chipd stopped: step exit status 0' "chipd's step did not end with status 0"
check_nothing_left "$id"
say "job $id: 48 tokens, 4 completed requests, stats, clean stop, ExitCode 0:0"
cat "$out"

# busy NAME: submits a job of two endless requests and waits until it has streamed
# 100 tokens; sets id and out. Variables set before the call reach the job.
busy() {
	local name=$1
	id=$(CHIPD_WORKLOAD="synthetic tokens=1000000 device_us=1000" CHIPD_COUNT=2 \
		submit "$name")
	jobs+=("$id")
	out=$dir/jobs/$name.out
	for _ in $(seq 600); do
		[ "$(tokens "$out")" -ge 100 ] && return 0
		sleep 0.1
	done
	fail "job $id: no 100 tokens within 60 s"
}

# 2. A job cancelled mid-work: chipd must stop cleanly inside KillWait (30 s).
busy cancel
t2=$SECONDS
scancel "$id"
state=$(wait_job "$id" 45)
took=$((SECONDS - t2))
say "job $id cancelled mid-work: state $state after $took s"
case $state in CANCELLED | COMPLETED) ;; *) fail "job $id: state $state 45 s after scancel" ;; esac
[ "$took" -lt 30 ] || fail "job $id: took $took s to end, not inside KillWait (30 s)"
expect 'chipd.sbatch: SIGTERM: draining chipd' "the trap did not drain"
expect 'chipd\[[0-9]*\] info: stopped' "chipd did not log its stop"
expect 'chipd.sbatch: chipd stopped: step exit status' "the script missed the step's end"
check_nothing_left "$id"
say "job $id: drained and stopped in $took s, nothing left"
grep -vE '^@?[0-9]+ [0-9]+ [0-9]+$' "$out"

# 3. The time limit's early warning (--signal=B:TERM@90) reaches only the batch shell:
# its trap drains chipd, the running requests get the drain's grace (2 s here) and
# are then cut off, so the job reports that its work did not succeed.
CHIPD_DRAIN_GRACE_MS=2000 busy warn
t3=$SECONDS
scancel --batch --signal=TERM "$id"
state=$(wait_job "$id" 45)
exitcode=$(job_field "$id" ExitCode)
took=$((SECONDS - t3))
say "job $id warned (SIGTERM to the batch shell): $state, ExitCode $exitcode after $took s"
[ "$state" = FAILED ] || fail "job $id: state $state, not FAILED (work cut off)"
expect 'chipd.sbatch: SIGTERM: draining chipd (grace 2000 ms)' "the trap did not drain"
expect 'chipd\[[0-9]*\] warn: grace over with 2 requests in flight' "no cut-off at the grace"
expect 'chipd.sbatch: chipd stopped: step exit status 0' "chipd's step did not end with status 0"
check_nothing_left "$id"
say "job $id: drained, requests cut off after the grace, chipd stopped cleanly"
grep -vE '^@?[0-9]+ [0-9]+ [0-9]+$' "$out"

# 4. The multi-node example, on this cluster's one node: the driver reaches chipd
# through `srun --overlap --nodelist=NODE`.
t4=$SECONDS
id=$(submit multi chipd-multinode.sbatch --nodes=1)
jobs+=("$id")
state=$(wait_job "$id" 120)
exitcode=$(job_field "$id" ExitCode)
out=$dir/jobs/multi.out
say "job $id (multi-node example, 1 node): $state, ExitCode $exitcode, $((SECONDS - t4)) s"
[ "$state/$exitcode" = COMPLETED/0:0 ] ||
	fail "job $id: state $state, ExitCode $exitcode (bound 120 s)"
[ "$(grep -cE "^$host: request @?[0-9]+: completed, 12 tokens" "$out")" = 4 ] ||
	fail "job $id: not 4 completed requests on $host"
expect "chipd stopped on $host: step exit status 0; work status 0" "no clean stop"
check_nothing_left "$id"
grep -vE "^$host: @?[0-9]+ [0-9]+ [0-9]+$" "$out"

# 5. A GPU mask selects the hip backend; no GPU 99 exists, so chipd fails to start
# and the job says so with a failed exit status instead of waiting for it.
t5=$SECONDS
id=$(CUDA_VISIBLE_DEVICES=99 submit nogpu)
jobs+=("$id")
state=$(wait_job "$id" 120)
exitcode=$(job_field "$id" ExitCode)
out=$dir/jobs/nogpu.out
say "job $id (CUDA_VISIBLE_DEVICES=99): $state, ExitCode $exitcode, $((SECONDS - t5)) s"
[ "$state/$exitcode" = FAILED/1:0 ] || fail "job $id: state $state, ExitCode $exitcode"
expect 'chipd.sbatch: job [0-9]* on .*: starting chipd --backend hip$' "hip not chosen"
expect 'chipd.sbatch: chipd exited with status 1 before it was ready' "no start failure"
check_nothing_left "$id"

status=0
say "ok"
