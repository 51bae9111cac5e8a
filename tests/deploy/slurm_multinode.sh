#!/bin/bash
# slurm_multinode.sh CHIPD CHIPCTL - deploy/slurm/chipd-multinode.sbatch on a real
# two-node Slurm cluster made on this machine, started here and torn down at the end:
#   - nodes chipdn1 (10.199.17.11) and chipdn2 (10.199.17.12): each a slurmd in its
#     own network, UTS and mount namespaces (unshare), with its own hostname, its own
#     address on a private bridge (chipdbr0, 10.199.17.0/24, one veth pair per node),
#     and its own /dev/shm and /tmp (tmpfs), so each node's chipd has its own region,
#     pid file and socket, as on separate machines;
#   - one slurmctld on this machine's side of the bridge (10.199.17.1, ports 16827 and
#     16828), one munged and one key for all (slurm_lib.sh);
#   1. a job spanning both nodes: each node's chipd serves its own four requests,
#      which the driver on the first node sends through `srun --overlap` to each
#      node, and each node counts its own tokens; both chipd stop cleanly, exit 0;
#   2. a job with long requests on both nodes is scancel'ed mid-work: both chipd
#      drain and stop well inside KillWait, leaving no region and no process.
# Needs root, network namespaces and bridges (skipped, 77, otherwise); installs the
# Slurm packages when missing. Every wait is bounded; a failure prints the job
# outputs and the daemons' logs.
set -eu
chipd=$(readlink -f "$1")
chipctl=$(readlink -f "$2")
root=$(cd "$(dirname "$0")/../.." && pwd)
slurm_prog=slurm_multinode.sh
# shellcheck source=tests/deploy/slurm_lib.sh
. "$root/tests/deploy/slurm_lib.sh"
bridge=chipdbr0
net=10.199.17
ctladdr=$net.1
nodes=(chipdn1 chipdn2)
declare -A addr=([chipdn1]=$net.11 [chipdn2]=$net.12) holder=()

[ "$(id -u)" = 0 ] || skip "needs root (namespaces, a bridge and Slurm's daemons)"
for tool in unshare nsenter ip; do
	command -v "$tool" >/dev/null || skip "needs unshare, nsenter and ip (util-linux, iproute2)"
done
unshare --net --uts --mount true 2>/dev/null ||
	skip "cannot make network, UTS and mount namespaces here"
# The test's directory is outside /tmp: each node mounts its own /tmp.
slurm_prepare /var/tmp 16827 16828
if ip link show "$bridge" >/dev/null 2>&1; then
	ip link del "$bridge" # left by a run that was killed: the name is this test's own
fi
ip link add name "$bridge" type bridge 2>/dev/null || skip "cannot make a bridge here"
slurm_cleanups+=("ip link del $bridge 2>/dev/null")
ip addr add "$ctladdr/24" dev "$bridge"
ip link set "$bridge" up

# on_node NODE CMD...: CMD in NODE's namespaces.
on_node() {
	local node=$1
	shift
	nsenter -t "${holder[$node]}" -n -u -m "$@"
}
# stop_holder PID: ends a node's namespaces (with its mounts) once its last process,
# the holder, is gone; waits up to 5 s for it.
stop_holder() {
	kill "$1" 2>/dev/null || return 0
	for _ in $(seq 50); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	echo "$slurm_prog: the namespaces' holder $1 did not end in 5 s" >&2
}
# The hosts file every node sees (slurmd and srun look names up).
{
	echo "127.0.0.1 localhost"
	echo "$ctladdr $(hostname -s)"
	for node in "${nodes[@]}"; do echo "${addr[$node]} $node"; done
} >"$dir/hosts"

# A node: a process holding its namespaces, then its hostname, files and network.
for node in "${nodes[@]}"; do
	unshare --net --uts --mount --propagation private sleep infinity &
	holder[$node]=$!
	slurm_cleanups+=("stop_holder ${holder[$node]}")
	for _ in $(seq 100); do # unshare has made the namespaces once it is sleep
		[ "$(readlink "/proc/${holder[$node]}/ns/net")" != "$(readlink /proc/self/ns/net)" ] &&
			break
		sleep 0.05
	done
	[ "$(readlink "/proc/${holder[$node]}/ns/net")" != "$(readlink /proc/self/ns/net)" ] ||
		fail "$node: no namespaces after 5 s"
	on_node "$node" hostname "$node"
	on_node "$node" mount -t tmpfs -o mode=1777 "shm-$node" /dev/shm
	# chipd and chipctl may live under /tmp (a clone built there, its callables
	# beside them): the node keeps the host's /tmp at a private mount point and
	# binds the top directory under /tmp that holds them back
	mkdir -p "$dir/hosttmp-$node"
	on_node "$node" mount --bind /tmp "$dir/hosttmp-$node"
	on_node "$node" mount -t tmpfs -o mode=1777 "tmp-$node" /tmp
	for exe in chipd chipctl; do
		rel=$(readlink -f "$dir/bin/$exe")
		case $rel in
		/tmp/*/*)
			rel=${rel#/tmp/}
			rel=${rel%%/*}
			if ! on_node "$node" mountpoint -q "/tmp/$rel"; then
				on_node "$node" mkdir -p "/tmp/$rel"
				on_node "$node" mount --bind "$dir/hosttmp-$node/$rel" "/tmp/$rel"
			fi
			;;
		esac
	done
	on_node "$node" mount --bind "$dir/hosts" /etc/hosts
	ip link add "veth-$node" type veth peer name eth0 netns "${holder[$node]}"
	slurm_cleanups+=("ip link del veth-$node 2>/dev/null")
	ip link set "veth-$node" master "$bridge" up
	on_node "$node" ip link set lo up
	on_node "$node" ip addr add "${addr[$node]}/24" dev eth0
	on_node "$node" ip link set eth0 up
done
say "nodes ${nodes[*]} up on $bridge"

slurm_start_munge
mem=$(slurm_node_memory)
nodelines=()
for node in "${nodes[@]}"; do
	nodelines+=("NodeName=$node NodeAddr=${addr[$node]} CPUs=$(nproc) RealMemory=$mem State=UNKNOWN")
done
slurm_write_conf "$(hostname -s)" "$ctladdr" 16827 16828 "${nodelines[@]}"
slurm_start_ctld
for node in "${nodes[@]}"; do
	slurm_start_slurmd "$node" on_node "$node"
done
slurm_wait_idle 2
say "cluster up: ${nodes[*]} idle"

# The job's processes are gone on every node, and so is each node's region.
check_nothing_left() { # check_nothing_left ID
	local node
	for node in "${nodes[@]}"; do
		! on_node "$node" test -e "/dev/shm/chipd.0.$1" ||
			fail "job $1: region /dev/shm/chipd.0.$1 left behind on $node"
	done
	check_no_job_processes "$1"
}
# node_tokens NODE: how many token lines the job's output has from NODE's chipd
node_tokens() { count_lines "^$1: @?[0-9]+ [0-9]+ [0-9]+$" "$out"; }
# counted TASK COUNTER: the sum over the chips of COUNTER in the stats that task TASK
# of `srun --label chipctl stats` printed (task i runs on the job's node i)
counted() {
	awk -v task="$1:" -v name="$2" '$1 == task && $2 == name {
		for (k = 3; k <= NF; k++) sum += $k
		found = 1
	} END { print found ? sum : "none" }' "$out"
}

# 1. A job on both nodes that runs to its end.
t1=$SECONDS
submit two chipd-multinode.sbatch --nodes=2
state=$(wait_job "$id" 120)
exitcode=$(job_field "$id" ExitCode)
say "job $id (2 nodes): $state, ExitCode $exitcode, $((SECONDS - t1)) s"
[ "$state/$exitcode" = COMPLETED/0:0 ] ||
	fail "job $id: state $state, ExitCode $exitcode (bound 120 s)"
expect "job $id: chipd --backend sim --chips 2 on ${nodes[*]}$" "not on both nodes"
for i in "${!nodes[@]}"; do
	node=${nodes[$i]}
	[ "$(node_tokens "$node")" = 48 ] || fail "job $id: not 48 tokens from $node"
	[ "$(count_lines "^$node: request @?[0-9]+: completed, 12 tokens" "$out")" = 4 ] ||
		fail "job $id: not 4 completed requests on $node"
	# each node's chipd counted its own work, and nothing of the other node's
	[ "$(counted "$i" completed)/$(counted "$i" tokens)" = 4/48 ] ||
		fail "job $id: $node's chipd counted $(counted "$i" completed) completed" \
			"requests and $(counted "$i" tokens) tokens, not 4 and 48"
	expect "^$i: .*chipd\\[[0-9]*\\] info: stopped" "$node's chipd did not log its stop"
done
expect "chipd stopped on ${nodes[*]}: step exit status 0; work status 0" "no clean stop"
check_nothing_left "$id"
say "job $id: 48 tokens and 4 requests per node, each counted by its own chipd, clean stop"
grep -vE "^chipdn[12]: @?[0-9]+ [0-9]+ [0-9]+$" "$out"

# 2. Long requests on both nodes, cancelled mid-work: both chipd drain and stop well
# inside KillWait (30 s), each from its own node's region.
CHIPD_WORKLOAD="synthetic tokens=1000000 device_us=1000" CHIPD_COUNT=2 \
	submit cancel chipd-multinode.sbatch --nodes=2
for _ in $(seq 600); do
	[ "$(node_tokens chipdn1)" -ge 50 ] && [ "$(node_tokens chipdn2)" -ge 50 ] && break
	sleep 0.1
done
for node in "${nodes[@]}"; do
	[ "$(node_tokens "$node")" -ge 50 ] || fail "job $id: no 50 tokens from $node within 60 s"
	on_node "$node" test -e "/dev/shm/chipd.0.$id" ||
		fail "job $id: no region /dev/shm/chipd.0.$id on $node"
done
[ ! -e "/dev/shm/chipd.0.$id" ] || fail "job $id: a region in this machine's /dev/shm"
say "job $id: streaming on both nodes, each from its own region"
cancel_within_killwait "$id"
expect "SIGTERM: draining chipd on ${nodes[*]}" "the trap did not drain"
for i in "${!nodes[@]}"; do
	expect "^$i: .*chipd\\[[0-9]*\\] info: stopped" "${nodes[$i]}'s chipd did not log its stop"
done
expect "chipd stopped on ${nodes[*]}: step exit status" "the script missed the step's end"
check_nothing_left "$id"
say "job $id: both nodes drained and stopped in $took s, nothing left"
grep -vE "^chipdn[12]: @?[0-9]+ [0-9]+ [0-9]+$" "$out"

slurm_status=0
say "ok"
