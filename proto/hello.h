/* hello.h - the client's side of the handshake (docs/protocol.md §9): a process says
 * hello on the node's handshake socket before it uses the client mailbox, and keeps
 * that connection open for as long as it uses the node.
 *
 * The supervisor learns who the client is from the kernel (SO_PEERCRED, a pidfd), not
 * from anything the client writes, and learns of its end from the connection hanging
 * up (or the process exiting): everything the client held is reclaimed then. The
 * client, in turn, checks that the socket's server is the process that created the
 * node region (SO_PEERCRED pid == the region header's creator_pid), so that a
 * process that bound a socket at the path first cannot pose as chipd.
 *
 * A forked child does not inherit the parent's identity: its slots carry its own pid,
 * which has no connection until the child says hello itself.
 */
#ifndef CHIPD_PROTO_HELLO_H
#define CHIPD_PROTO_HELLO_H

#include "node.h"
#include "proto.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* How long the supervisor waits for a connection's hello before closing it. */
#define PROTO_HELLO_WAIT_MS 2000u

/* What the handshake gave. */
struct proto_hello {
	int fd;		     /* the connection: keep it open while using the node */
	pid_t server_pid;    /* SO_PEERCRED's pid of the server: the region's creator */
	int64_t client;	     /* the supervisor's name for this client */
	int64_t max_pending; /* this client's bound on requests in flight */
	int64_t max_rings;   /* this client's bound on token rings held */
	struct proto_error err; /* the supervisor's error envelope (-EREMOTEIO) */
};

/* Connects to @n's handshake socket (SOCK_SEQPACKET, close-on-exec), checks that its
 * server is the region's creator, sends {"v":1,"op":"hello"} and waits up to
 * @timeout_ms for the answer, which carries the exchange region's memfd (SCM_RIGHTS):
 * it is checked and mapped into @n (proto_node_attach_xchg: n->mbox and the rings'
 * consumer lines usable from then on; a node that has one already keeps it). Returns 0
 * with @out filled (out->fd open: close it to end the session); -EREMOTEIO when the supervisor answered with the error envelope
 * (out->err; the connection is closed); or a local failure with @why (@cap bytes)
 * saying what: -EBADMSG no valid socket path in the descriptor or a malformed answer
 * (also one whose descriptors are not the one memfd: every one it carried is closed),
 * -EACCES the server is not the region's creator (an impostor), -EPROTO an answer
 * without the exchange region, what proto_node_attach_xchg returns (a memfd without
 * its seals: -EPERM; of the wrong size or header: -EMSGSIZE...), -ETIMEDOUT no answer
 * in time, -EPIPE the supervisor closed the connection without an answer, or the
 * -errno of socket, connect, send or recv. */
int proto_hello(struct proto_node *n, uint32_t timeout_ms, struct proto_hello *out,
		char *why, size_t cap);

#endif
