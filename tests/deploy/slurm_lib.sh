# slurm_lib.sh - sourced by the Slurm deploy tests (slurm.sh, slurm_multinode.sh): a
# private Slurm cluster on this machine, with its own munged socket and key, config,
# state, logs, pid files and ports in a temporary directory; nothing of the host's
# Slurm or munge is used or changed. Every wait is bounded.
# shellcheck shell=bash disable=SC2154 # slurm_prog, chipd, chipctl, root: the caller's

# The caller sets before sourcing: slurm_prog (its name, for messages), chipd, chipctl
# (absolute paths) and root (the source tree).
slurm_t0=$SECONDS
slurm_status=1       # set to 0 by the caller when every check passed
slurm_pidfiles=()    # daemons to stop at the end: "PIDFILE NAME"
slurm_jobs=()        # jobs to cancel at the end
slurm_cleanups=()    # the caller's own teardown commands, run after the daemons stop,
                     # newest first

say() { echo "$slurm_prog [$((SECONDS - slurm_t0))s]: $*"; }
fail() {
	echo "$slurm_prog: FAIL: $*" >&2
	exit 1
}
skip() {
	echo "$slurm_prog: $*: skipped"
	exit 77
}

# slurm_prepare BASE PORT...: root, the packages, the machine-wide lock of the Slurm
# tests, free ports and a fresh directory (sets dir, exports SLURM_CONF).
slurm_prepare() {
	local base=$1 port
	shift
	[ "$(id -u)" = 0 ] ||
		skip "needs root (a private Slurm cluster runs its daemons as root and munge)"
	# shellcheck source=deploy/lib/packages.sh
	. "$root/deploy/lib/packages.sh"
	chipd_need_packages slurmctld slurmd slurm-client munge ||
		fail "could not install slurmctld slurmd slurm-client munge"
	say "packages present"
	# One private cluster at a time on this machine, whatever its ports.
	exec 9>/tmp/chipd-slurm-test.lock
	flock -w 600 9 || fail "another Slurm test held /tmp/chipd-slurm-test.lock for 600 s"
	for port in "$@"; do
		! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null ||
			fail "port $port is in use: cannot start the test cluster"
	done
	dir=$(mktemp -d "$base/chipd-slurm.XXXXXX")
	chmod 755 "$dir"
	mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log" "$dir/run" "$dir/jobs" \
		"$dir/bin"
	chown munge:munge "$dir/munge"
	chmod 711 "$dir/munge" # munged: the socket's directory must be searchable by all
	ln -s "$chipd" "$dir/bin/chipd"
	ln -s "$chipctl" "$dir/bin/chipctl"
	export SLURM_CONF=$dir/slurm.conf
	unset SLURM_JOB_ID CHIPD_INSTANCE CHIPD_RUNTIME_DIR || true
	trap slurm_cleanup EXIT
}

slurm_dump() {
	local f
	for f in "$dir"/jobs/*.out "$dir"/log/*.log "$dir"/munge/munged.log; do
		[ -e "$f" ] || continue
		echo "----- $f"
		tail -n 200 "$f"
	done
}
# slurm_stop_daemons "PIDFILE NAME"...: SIGTERM to all at once, up to 10 s for them to
# end, then SIGKILL to those left.
slurm_stop_daemons() {
	local d pidfile name pids=() names=() i t=$SECONDS
	for d in "$@"; do
		read -r pidfile name <<<"$d"
		[ -s "$pidfile" ] || continue
		pids+=("$(cat "$pidfile")")
		names+=("$name")
		kill -TERM "${pids[-1]}" 2>/dev/null || true
	done
	for _ in $(seq 100); do
		for i in "${!pids[@]}"; do
			kill -0 "${pids[$i]}" 2>/dev/null && continue
			say "${names[$i]} stopped in $((SECONDS - t)) s"
			unset "pids[$i]"
		done
		[ ${#pids[@]} = 0 ] && return 0
		sleep 0.1
	done
	for i in "${!pids[@]}"; do
		echo "$slurm_prog: ${names[$i]} (pid ${pids[$i]}) did not stop in 10 s: SIGKILL" >&2
		kill -KILL "${pids[$i]}" 2>/dev/null || true
	done
}
slurm_cleanup() {
	local j c
	for j in "${slurm_jobs[@]}"; do
		timeout 10 scancel "$j" 2>/dev/null || true
	done
	[ "$slurm_status" = 0 ] || slurm_dump
	slurm_stop_daemons "${slurm_pidfiles[@]}"
	for ((c = ${#slurm_cleanups[@]} - 1; c >= 0; c--)); do
		eval "${slurm_cleanups[$c]}" || true
	done
	rm -rf "$dir"
	say "daemons stopped"
}

# munge: a private daemon with its own key and socket (AuthInfo in slurm.conf).
slurm_start_munge() {
	runuser -u munge -- mungekey -c -k "$dir/munge/munge.key"
	runuser -u munge -- munged --socket="$dir/munge/munge.socket" \
		--key-file="$dir/munge/munge.key" --pid-file="$dir/munge/munged.pid" \
		--log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed" ||
		fail "munged did not start"
	slurm_pidfiles+=("$dir/munge/munged.pid munged")
}

# slurm_write_conf CTLHOST CTLADDR CTLPORT SLURMDPORT NODELINE...: slurm.conf with the
# given node lines (NodeName=...) in one partition. Per-node files carry %n.
slurm_write_conf() {
	local ctlhost=$1 ctladdr=$2 ctlport=$3 dport=$4
	shift 4
	cat >"$SLURM_CONF" <<EOF
ClusterName=chipdtest
SlurmctldHost=$ctlhost($ctladdr)
SlurmctldPort=$ctlport
SlurmdPort=$dport
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.%n.log
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
EOF
	printf '%s\n' "$@" >>"$SLURM_CONF"
	echo "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >>"$SLURM_CONF"
}
slurm_node_memory() { # MiB a node line may claim: all but 512 MiB of this machine
	echo $(($(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo) - 512))
}
slurm_start_ctld() {
	slurmctld -i || fail "slurmctld did not start"
	slurm_pidfiles+=("$dir/run/slurmctld.pid slurmctld")
}
# slurm_start_slurmd NODE [PREFIX...]: slurmd for NODE, run through PREFIX (nsenter).
slurm_start_slurmd() {
	local node=$1
	shift
	mkdir -p "$dir/spool/$node"
	"$@" slurmd -N "$node" || fail "slurmd for $node did not start"
	slurm_pidfiles+=("$dir/run/slurmd.$node.pid slurmd($node)")
}
slurm_wait_idle() { # slurm_wait_idle N: until N nodes are idle, at most 60 s
	local idle
	for _ in $(seq 300); do
		idle=$(sinfo -h -N -o %T 2>/dev/null | grep -c '^idle$') || true
		[ "$idle" = "$1" ] && return 0
		sleep 0.2
	done
	fail "not $1 idle nodes after 60 s: $(sinfo -N 2>&1)"
}

job_field() { # job_field ID FIELD: a field of `scontrol show job`
	scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p"
}
# submit NAME [SCRIPT [SBATCH-ARGS...]]: sets id (the job's) and out (its output file).
# Variables set before the call reach the job.
submit() {
	local name=$1 script=${2:-chipd.sbatch}
	shift $(($# < 2 ? $# : 2))
	out=$dir/jobs/$name.out
	id=$(CHIPD_BIN_DIR=$dir/bin CHIPD_SIM_CHIPS=2 CHIPD_LOG_LEVEL=info \
		sbatch --parsable --chdir="$dir/jobs" --output="$out" \
		--time=5 "$@" "$root/deploy/slurm/$script") || fail "sbatch $script failed"
	slurm_jobs+=("$id")
}
# count_lines PATTERN FILE: how many lines of FILE match PATTERN (grep -E); 0 if none
count_lines() {
	if [ -e "$2" ]; then grep -cE "$1" "$2" || true; else echo 0; fi
}
tokens() { # tokens FILE: how many token lines (ID SEQ VALUE) FILE has
	count_lines '^@?[0-9]+ [0-9]+ [0-9]+$' "$1"
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
cancel_within_killwait() { # cancel_within_killwait ID: scancel, ended inside KillWait; sets took
	local t state
	t=$SECONDS
	scancel "$1"
	state=$(wait_job "$1" 45)
	took=$((SECONDS - t))
	say "job $1 cancelled mid-work: state $state after $took s"
	case $state in CANCELLED | COMPLETED) ;; *) fail "job $1: state $state 45 s after scancel" ;; esac
	[ "$took" -lt 30 ] || fail "job $1: took $took s to end, not inside KillWait (30 s)"
}
expect() { # expect PATTERN WHAT: the job's output ($out) has a line matching PATTERN
	grep -q "$1" "$out" || fail "job $id: $2"
}
check_no_job_processes() { # check_no_job_processes ID: none left, on any node
	local pids
	pids=$(grep -lz "^SLURM_JOB_ID=$1\$" /proc/[0-9]*/environ 2>/dev/null |
		cut -d/ -f3 | tr '\n' ' ') || true
	[ -z "$pids" ] || fail "job $1: processes left: $(ps -o pid,args -p "$pids" 2>&1)"
}
