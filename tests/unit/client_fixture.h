/* client_fixture.h - a node region with a server thread behind its client mailbox,
 * for the check_client suites. The server dispatches through proto's handler table
 * like the supervisor will, allocates token rings, and streams tokens. */
#ifndef CHIPD_CLIENT_FIXTURE_H
#define CHIPD_CLIENT_FIXTURE_H

#include "chipd.h"
#include "hello_fixture.h"
#include "node.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define CX_RINGS 8

/* What the server does with requests. */
enum cx_mode {
	CX_ANSWER = 0, /* dispatch and answer */
	CX_SILENT = 1, /* take requests, never answer (reset requests are acknowledged) */
};

struct cx {
	struct proto_node node;
	char instance[CHIPD_INSTANCE_MAX];
	char name[SHM_NAME_MAX];
	pthread_t thread;
	struct hx hello; /* the handshake socket (cx_start) */
	_Atomic int stop, mode, resets_acked;
	/* server-private: the streams it feeds (ring index = stream slot) */
	struct cx_stream {
		bool used, hold, ended; /* ended: terminal pushed, ring reusable once read */
		int64_t id;
		uint32_t next_seq, count;
		pid_t client;
		int fail_code;
	} streams[CX_RINGS];
	int64_t next_id;
	pid_t client; /* of the request being dispatched */
};

/* Creates a node region (@slots mailbox slots) with a fresh instance name and starts
 * the server thread. */
void cx_start(struct cx *x, uint32_t slots);

/* Stops the thread, unlinks and unmaps the region. */
void cx_stop(struct cx *x);

/* A node region without a server, for the connect tests: created and READY. */
void cx_region(struct cx *x);
void cx_region_remove(struct cx *x);

/* Adds the tcases about connect errors and giving up (client_errors.c). */
void client_add_error_tcases(Suite *s);

#endif
