/* sup_admit.c - who may use the node (docs/protocol.md §9, chipd --allow-group).
 *
 * A peer of the handshake socket is admitted when the kernel says (SO_PEERCRED) it
 * runs as chipd's own uid, or, with --allow-group GROUP, when GROUP is its effective
 * gid or one of its supplementary groups (SO_PEERGROUPS: the groups the peer held when
 * it connected, from the kernel, not from the group database, which a process may have
 * dropped or never taken). Nothing a peer writes into shared memory names it.
 *
 * A member of the group (a "guest": another uid) uses the node as a client: ping,
 * submit, status, stats, workloads, cancel of its own uid's requests. What acts on the
 * node or on other users' work stays with chipd's uid: drain, stop, trace (chipd would
 * write a file where the guest says, as chipd), and cancel of a request of another uid.
 */
#include "sup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59 /* Linux 4.13; the same number on every architecture */
#endif

/* Whether group @gid is among the supplementary groups of the peer of @fd. */
static bool peer_in_group(int fd, gid_t gid)
{
	gid_t small[64], *groups = small;
	socklen_t len = sizeof(small);
	bool in = false;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) != 0) {
		/* ERANGE: more than fit; len says how many bytes it takes */
		if (errno != ERANGE || !(groups = malloc(len)))
			return false;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) != 0) {
			free(groups);
			return false;
		}
	}
	for (size_t i = 0; i < len / sizeof(gid_t) && !in; i++)
		in = groups[i] == gid;
	if (groups != small)
		free(groups);
	return in;
}

bool sup_admit_peer(const struct sup *s, const struct sup_conn *c, char *why, size_t cap)
{
	if (c->uid == geteuid())
		return true;
	if (!s->cfg.allow_group[0]) {
		snprintf(why, cap,
			 "permission denied: uid %u may not use this node (it serves uid %u "
			 "only: no --allow-group)",
			 (unsigned)c->uid, (unsigned)geteuid());
		return false;
	}
	if (c->gid == s->cfg.allow_gid || peer_in_group(c->fd, s->cfg.allow_gid))
		return true;
	snprintf(why, cap,
		 "permission denied: uid %u is not a member of group %s (gid %u), the group "
		 "this node serves besides uid %u (--allow-group)",
		 (unsigned)c->uid, s->cfg.allow_group, (unsigned)s->cfg.allow_gid,
		 (unsigned)geteuid());
	return false;
}

/* The uid of live client @pid into @uid; false when it has no live connection. Under
 * sup.lock. */
static bool uid_of(const struct sup *s, pid_t pid, uid_t *uid)
{
	for (uint32_t i = 0; pid > 0 && i < s->cfg.max_clients; i++)
		if (s->conns[i].live && s->conns[i].pid == pid) {
			*uid = s->conns[i].uid;
			return true;
		}
	return false;
}

int sup_admit_node_op(struct sup *s, const char *op, struct proto_error *err)
{
	uid_t uid = geteuid();
	bool known;

	pthread_mutex_lock(&s->lock);
	known = uid_of(s, s->router_client, &uid);
	pthread_mutex_unlock(&s->lock);
	/* a sender whose connection ended since the router took its request is judged as
	 * no one: its uid is no longer known, and a guest must not win by hanging up */
	if (!known)
		return proto_fail(err, CHIPD_E_BAD_REQUEST,
				  "permission denied: pid %d has no connection any more",
				  (int)s->router_client);
	if (uid != geteuid())
		return proto_fail(err, CHIPD_E_BAD_REQUEST,
				  "permission denied: %s is for uid %u, chipd's own; pid %d runs "
				  "as uid %u (a member of --allow-group)",
				  op, (unsigned)geteuid(), (int)s->router_client, (unsigned)uid);
	return CHIPD_OK;
}

bool sup_admit_cancel(const struct sup *s, pid_t owner)
{
	uid_t me = geteuid(), caller, theirs;

	if (!uid_of(s, s->router_client, &caller))
		return false; /* gone since the router took the request (as above) */
	if (caller == me)
		return true;
	/* a guest cancels requests of its own uid; one whose client is gone is being
	 * cancelled already, and is chipd's uid's to cancel again */
	return uid_of(s, owner, &theirs) && theirs == caller;
}
