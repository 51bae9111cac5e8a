#!/bin/bash
# slurm.sh CHIPD CHIPCTL - deploy/slurm/chipd.sbatch on a real single-node Slurm
# cluster (Debian's slurmctld, slurmd, munge), started here and stopped at the end:
#   1. a job runs chipd with two sim chips, streams four requests, prints the stats,
#      stops chipd cleanly and exits 0;
#   2. a job with long requests is scancel'ed mid-work: chipd drains and stops well
#      inside KillWait, leaving no region in /dev/shm and no process of the job.
# Needs root (skipped, 77, otherwise); installs the Slurm packages when missing. The
# cluster is private (slurm_lib.sh): its own munged socket and key, config, state,
# logs, pid files and ports (16817, 16818) in a temporary directory; nothing of the
# host's Slurm or munge is used or changed. Every wait is bounded; a failure prints
# the job outputs and the daemons' logs.
set -eu
chipd=$(readlink -f "$1")
chipctl=$(readlink -f "$2")
root=$(cd "$(dirname "$0")/../.." && pwd)
slurm_prog=slurm.sh
# shellcheck source=tests/deploy/slurm_lib.sh
. "$root/tests/deploy/slurm_lib.sh"
slurm_prepare /tmp 16817 16818
slurm_start_munge
host=$(hostname -s)
slurm_write_conf "$host" 127.0.0.1 16817 16818 \
	"NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$(slurm_node_memory) State=UNKNOWN"
slurm_start_ctld
slurm_start_slurmd "$host"
slurm_wait_idle 1
say "cluster up: node $host idle"

# The job's processes are gone and so is its region.
check_nothing_left() { # check_nothing_left ID
	[ ! -e "/dev/shm/chipd.0.$1" ] || fail "job $1: region /dev/shm/chipd.0.$1 left behind"
	check_no_job_processes "$1"
}

# 1. A job that runs to its end.
t1=$SECONDS
submit ok
state=$(wait_job "$id" 120)
exitcode=$(job_field "$id" ExitCode)
say "job $id (runs to its end): $state, ExitCode $exitcode, $((SECONDS - t1)) s"
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
	CHIPD_WORKLOAD="synthetic tokens=1000000 device_us=1000" CHIPD_COUNT=2 submit "$1"
	for _ in $(seq 600); do
		[ "$(tokens "$out")" -ge 100 ] && return 0
		sleep 0.1
	done
	fail "job $id: no 100 tokens within 60 s"
}

# 2. A job cancelled mid-work: chipd must stop cleanly inside KillWait (30 s).
busy cancel
cancel_within_killwait "$id"
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
submit multi chipd-multinode.sbatch --nodes=1
state=$(wait_job "$id" 120)
exitcode=$(job_field "$id" ExitCode)
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
CUDA_VISIBLE_DEVICES=99 submit nogpu
state=$(wait_job "$id" 120)
exitcode=$(job_field "$id" ExitCode)
say "job $id (CUDA_VISIBLE_DEVICES=99): $state, ExitCode $exitcode, $((SECONDS - t5)) s"
[ "$state/$exitcode" = FAILED/1:0 ] || fail "job $id: state $state, ExitCode $exitcode"
expect 'chipd.sbatch: job [0-9]* on .*: starting chipd --backend hip$' "hip not chosen"
expect 'chipd.sbatch: chipd exited with status 1 before it was ready' "no start failure"
check_nothing_left "$id"

slurm_status=0
say "ok"
