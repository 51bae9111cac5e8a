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
	/* its data area's allocator (client_data.c): one bit per grain in use */
	pthread_mutex_t data_lock;
	uint64_t *data_used;
	uint32_t data_grains;
};

/* A range of the connection's data area (len 0: none). */
struct client_range {
	uint32_t off, len;
};

struct chipd_stream {
	chipd_conn *conn;
	pthread_mutex_t lock;
	struct ring ring;
	uint64_t id;
	uint32_t gen, chip;
	bool ended;	     /* the terminal record was read */
	/* a record no worker writes was read (payload_len over RING_PAYLOAD_MAX): nothing
	 * more is read, but the stream has not ended (its worker may go on, and write its
	 * output): the close stops it as any stream closed before its end */
	bool refused;
	uint64_t checked_ns; /* when a short wait last checked who can end the stream */
	/* the output's range of the data area (len 0: none asked for), and the bytes
	 * the FINAL record says were written (checked against it) */
	struct client_range out;
	uint32_t out_len;
	bool out_ready; /* FINAL was read: out_len bytes are there */
};

/* Fills @err (when not NULL) and returns @errnum. */
int client_fail(struct chipd_error *err, int errnum, enum chipd_code code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The absolute deadline @timeout_ms from now. */
uint64_t client_deadline_ms(uint32_t timeout_ms);
/* What is left of @deadline in whole milliseconds (rounded up), 0 once it passed. */
uint32_t client_ms_left(uint64_t deadline);

/* One round trip of the request @req (its op set, fields filled) with its answer in
 * @ans (client.c): 0, -EREMOTEIO with the server's error, or a local failure. */
int client_call_msg(chipd_conn *c, const struct proto_msg *req, struct proto_msg *ans,
		    uint32_t timeout_ms, struct chipd_error *err);

/* A zeroed stream handle for a submit, made before the submit is sent (so that no
 * allocation can fail once a worker may have admitted it), or NULL with @err. */
chipd_stream *client_stream_new(struct chipd_error *err);
/* Binds @s (from client_stream_new) to the stream a submit's answer @ans names on @c.
 * Returns 0 or -errno (@err); @s is then still the caller's to free. */
int client_stream_open(chipd_conn *c, const struct proto_msg *ans, chipd_stream *s,
		       struct chipd_error *err);

/* The data area of @c (client_data.c): init after the hello mapped the client region
 * (a connection without one, or a node without a data area, gets an empty allocator);
 * 0 or -ENOMEM. fini at chipd_close. */
int client_data_init(chipd_conn *c);
void client_data_fini(chipd_conn *c);
/* Stages @req's input and output for the submit @m: input longer than
 * PROTO_INPUT_INLINE_MAX is copied into a range *@in of the data area (input_off,
 * input_len), shorter input goes inline; output_cap takes a range *@out (output_off,
 * output_cap). 0, or -EINVAL / -ENOSPC with @err and nothing held. */
int client_data_stage(chipd_conn *c, const struct chipd_request *req, struct proto_msg *m,
		      struct client_range *in, struct client_range *out, struct chipd_error *err);
/* Gives range @r back (len 0: nothing) and empties it. */
void client_data_free(chipd_conn *c, struct client_range *r);
/* The first byte of range @r. */
const char *client_data_at(const chipd_conn *c, const struct client_range *r);

#endif
