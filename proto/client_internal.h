/* client_internal.h - what libchipd's calls (client.c) and its streams
 * (client_stream.c) share: the connection and stream handles, the error filler and
 * the deadline of a call. */
#ifndef CHIPD_PROTO_CLIENT_INTERNAL_H
#define CHIPD_PROTO_CLIENT_INTERNAL_H

#include "chipd.h"
#include "node.h"
#include "proto.h"
#include "ring.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* While a dead worker's ring waits for the supervisor to end it, poll this often. */
#define ORPHAN_POLL_NS SHM_NS_PER_MS
/* A stream with no producer named yet waits in slices this long, and looks between
 * them whether the supervisor, who would name one, is alive (shm_wait's sleep slice,
 * so a dead supervisor is noticed as soon as a dead producer is). */
#define UNNAMED_SLICE_NS (20 * SHM_NS_PER_MS)

struct chipd_conn {
	struct proto_node node;
	char instance[CHIPD_INSTANCE_MAX];
	/* the handshake's connection (docs/protocol.md §9), open until chipd_close; -1
	 * for a handle of chipd_connect_monitor, which sends no request */
	int fd;
	/* the adaptive spin of its streams' waits (wait.h), shared by them: a stream
	 * lives for one request, the pace of the connection's requests outlives it */
	struct shm_spin stream_spin;
};

struct chipd_stream {
	chipd_conn *conn;
	pthread_mutex_t lock;
	struct ring ring;
	uint64_t id;
	uint32_t gen, chip;
	bool ended;	     /* the terminal record was read */
	uint64_t checked_ns; /* when a short wait last checked who can end the stream */
};

/* Fills @err (when not NULL) and returns @errnum. */
int client_fail(struct chipd_error *err, int errnum, enum chipd_code code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The absolute deadline @timeout_ms from now. */
uint64_t client_deadline_ms(uint32_t timeout_ms);

/* One round trip of the request @req (its op set, fields filled) with its answer in
 * @ans (client.c): 0, -EREMOTEIO with the server's error, or a local failure. */
int client_call_msg(chipd_conn *c, const struct proto_msg *req, struct proto_msg *ans,
		    uint32_t timeout_ms, struct chipd_error *err);

/* Opens the stream a submit's answer @ans names on @c. Returns 0 or -errno (@err). */
int client_stream_open(chipd_conn *c, const struct proto_msg *ans, chipd_stream **out,
		       struct chipd_error *err);

#endif
