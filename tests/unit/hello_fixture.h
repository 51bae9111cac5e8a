/* hello_fixture.h - a handshake server (docs/protocol.md §9) for a node region made by
 * a test: a thread that accepts connections on a fresh socket, answers each hello and
 * keeps the connections open until stopped. With it, libchipd's chipd_connect works
 * against an in-process server (client_fixture.c), and a test can pose as an
 * impostor (a socket served by a process other than the region's creator). */
#ifndef CHIPD_HELLO_FIXTURE_H
#define CHIPD_HELLO_FIXTURE_H

#include "node.h"

#include <pthread.h>
#include <stdatomic.h>

#define HX_CONNS 64

struct hx {
	int lfd;
	int xfd; /* the node's exchange region, sent with every answer */
	char path[PROTO_NODE_SOCK_MAX];
	pthread_t thread;
	_Atomic int stop;
	/* set: connections are taken and kept, their hello never answered (a stopped
	 * supervisor) */
	_Atomic int mute;
	/* the descriptors each answer carries: 0 or 1, the exchange region; 2 or more, that
	 * many copies of it (a broken server) */
	_Atomic int nfds;
	int conns[HX_CONNS];
	int nconns;
};

/* Binds a fresh socket, writes its path into @n's descriptor and starts the thread. */
void hx_start(struct hx *h, struct proto_node *n);

/* Stops the thread, closes every connection and unlinks the socket. */
void hx_stop(struct hx *h);

#endif
