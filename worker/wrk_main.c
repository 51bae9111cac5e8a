/* wrk_main.c - the worker's entry: set-up, the control mailbox loop, tear-down. */
#include "wrk_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* How long one mailbox wait lasts before the loop re-checks its threads: long while
 * they run, short while M waits for them to exit (a shutdown, O's failure), so the
 * shutdown's answer and the end of O's streams follow their exit closely. S's failure
 * is seen within the long wait (its thread is then joined). */
#define WRK_MBOX_WAIT_NS      (250u * 1000u * 1000u)
#define WRK_MBOX_EXIT_WAIT_NS (1000u * 1000u)
/* Streams S spreads requests' lanes over (S||S): each request with nothing in flight
 * goes to the stream with the fewest lanes in flight, so independent requests run side
 * by side and a fast one does not queue behind a slow one while a stream is free.
 * The sim backend runs each stream on a thread of its own (asleep while idle). */
#define WRK_STREAMS 16

void wrk_config_default(struct wrk_config *cfg)
{
	*cfg = (struct wrk_config){
	    .chip = 0,
	    .dev_kind = DEV_SIM,
	    .dev_index = 0,
	    .nbanks = 8,
	    .queue_cap = 64,
	    .max_requests = 256,
	    .max_batch = 64,
	    .bank_tasks = 1024,
	    .bank_host_bytes = 1u << 20,
	    .bank_dev_bytes = 1u << 20,
	    .kv_blocks = 4096,
	    /* a block of one table for 2 KV heads of 128 floats, 16 positions */
	    .kv_block_floats = 4096,
	    .spin_ns = SHM_SPIN_NS_DEFAULT,
	    .max_request_host_bytes = WRK_MAX_REQUEST_HOST_BYTES_DEFAULT,
	    .max_request_dev_bytes = WRK_MAX_REQUEST_DEV_BYTES_DEFAULT,
	    .max_request_steps = WRK_MAX_REQUEST_STEPS_DEFAULT,
	};
}

static bool config_ok(const struct wrk_config *c, const struct proto_node *node)
{
	return c->chip < node->geom.nworkers && c->queue_cap >= 1 && c->max_requests >= 1 &&
	       c->max_requests <= UINT32_MAX / 2 && /* the table has twice as many records */
	       c->max_batch >= 1 && c->bank_tasks >= 1 &&
	       /* the task array plus room for the tokens' slots */
	       c->bank_host_bytes >= (size_t)c->bank_tasks * sizeof(struct wl_task) + 4096 &&
	       c->kv_blocks >= 1 && c->kv_block_floats >= 1 &&
	       (c->no_overlap || (c->nbanks >= 1 && c->nbanks <= WRK_MAX_BANKS));
}

/* Whether O, S and L have all exited (joining them will not wait). */
static bool threads_gone(struct wrk *w)
{
	return (!w->o_started || atomic_load_explicit(&w->sync.o_done, memory_order_seq_cst)) &&
	       (!w->s_started || atomic_load_explicit(&w->sync.s_exited, memory_order_seq_cst)) &&
	       (!w->l_started || atomic_load_explicit(&w->l_done, memory_order_seq_cst));
}

/* Joins L (it leaves once a stop began and its queue is done, or once O is gone), O,
 * then (O's exit ending S's wait once every published epoch has run) S. */
static void join_threads(struct wrk *w)
{
	if (w->joined)
		return;
	if (w->l_started) {
		wrk_load_kick(w);
		pthread_join(w->l_thread, NULL);
	}
	if (w->o_started)
		pthread_join(w->o_thread, NULL);
	atomic_store_explicit(&w->sync.o_done, 1, memory_order_seq_cst);
	shm_wake_all(&w->sync.s_wake);
	if (w->s_started)
		pthread_join(w->s_thread, NULL);
	w->joined = true;
}

/* Asks O to stop (O ends what is left after grace_end_ns) and joins O and S. */
static void stop_and_join(struct wrk *w)
{
	if (w->joined)
		return;
	atomic_store_explicit(&w->stop, 1, memory_order_seq_cst);
	wrk_kick_o(w);
	wrk_load_kick(w);
	join_threads(w);
}

/* Each thread that touches the device makes it its current device first, as the GPU
 * runtimes require (their current device is per thread and starts at index 0). On a
 * device already lost the call fails; the thread runs anyway and meets the loss at
 * its first device call, where it is handled. */
static void select_device(struct wrk *w, const char *thread)
{
	char msg[DEV_ERRMSG_MAX];

	if (dev_select(w->dev) == 0)
		return;
	dev_last_error(w->dev, msg, sizeof(msg));
	fprintf(stderr, "chipd worker %u: %s: cannot select the device: %s\n", w->cfg.chip,
		thread, msg);
}

static void *sched_thread(void *arg)
{
	select_device(arg, "scheduler");
	return wrk_sched_main(arg);
}

static void *orch_thread(void *arg)
{
	select_device(arg, "orchestrator");
	return wrk_orch_main(arg);
}

static void *load_thread(void *arg)
{
	select_device(arg, "loader");
	return wrk_load_main(arg);
}

static int setup(struct wrk *w)
{
	const struct wrk_config *c = &w->cfg;
	char msg[128];
	int err;

	err = dev_open(&w->dev, c->dev_kind, c->dev_index, msg, sizeof(msg));
	if (err) {
		fprintf(stderr, "chipd worker %u: %s\n", c->chip, msg);
		w->dev = NULL;
		return err;
	}
	if (c->dev_opened)
		c->dev_opened(c->fault_arg, w->dev);
	wrk_kernels_attach_all(w);
	err = wl_kvpool_create(&w->kv, w->dev, c->kv_blocks, c->kv_block_floats);
	if (err)
		return err;
	err = wl_exec_create(&w->exec, w->dev, WRK_STREAMS);
	if (err)
		return err;
	w->nreqs = 2 * c->max_requests;
	w->reqs = calloc(w->nreqs, sizeof(*w->reqs));
	w->queue = calloc(c->queue_cap, sizeof(*w->queue));
	if (!w->reqs || !w->queue)
		return -ENOMEM;
	for (uint32_t i = w->nreqs; i-- > 0;) {
		w->reqs[i].next_free = w->free_list;
		w->free_list = &w->reqs[i];
	}
	err = wrk_banks_init(w);
	if (err)
		return err;
	err = wrk_load_init(w);
	if (err)
		return err;
	shm_wake_init(&w->sync.o_wake);
	shm_wake_init(&w->sync.s_wake);
	err = -pthread_create(&w->s_thread, NULL, sched_thread, w);
	if (err)
		return err;
	w->s_started = true;
	err = -pthread_create(&w->o_thread, NULL, orch_thread, w);
	if (err)
		return err;
	w->o_started = true;
	err = -pthread_create(&w->l_thread, NULL, load_thread, w);
	if (err)
		return err;
	w->l_started = true;
	return 0;
}

static void teardown(struct wrk *w)
{
	stop_and_join(w);
	if (w->reqs)
		wrk_end_leftovers(w, CHIPD_E_CANCELLED); /* none after a normal stop */
	if (w->own_trace)
		wrk_trace_destroy(wrk_trace_of(w));
	wrk_banks_destroy(w);
	wrk_load_fini(w);
	free(w->reqs);
	free(w->queue);
	if (w->exec)
		wl_exec_destroy(w->exec);
	wl_kvpool_destroy(w->kv);
	if (w->dev) {
		wl_kernels_detach_all(w->dev);
		dev_close(w->dev);
	}
	pthread_mutex_destroy(&w->lock);
	pthread_mutex_destroy(&w->kv_lock);
}

/* After O and S are joined: every stream still live ends here, with the code that
 * says why nobody will run it: worker_lost (retryable: the supervisor restarts a
 * worker whose thread gave up, and another chip may run it) when O or S gave up. */
static void reap(struct wrk *w)
{
	enum chipd_code code = CHIPD_E_CANCELLED;

	if (atomic_load_explicit(&w->sync.o_err, memory_order_seq_cst) ||
	    atomic_load_explicit(&w->sync.s_err, memory_order_seq_cst))
		code = CHIPD_E_WORKER_LOST;
	join_threads(w); /* both have exited: no wait; admission stays as it was */
	wrk_end_leftovers(w, code);
}

/* Answers the shutdowns that waited for the threads' exit. */
static void answer_deferred(struct wrk *w)
{
	struct proto_msg *ans = malloc(sizeof(*ans));
	struct proto_error err;
	size_t len;

	for (uint32_t i = 0; i < w->ndeferred; i++) {
		struct mbox_ticket t = w->deferred[i];

		if (!ans) /* the client times out; the worker's exit says the rest */
			break;
		proto_msg_init(ans, PROTO_OP_SHUTDOWN);
		/* -ECANCELED / -ESTALE: the client gave up meanwhile (a reset, acknowledged
		 * there, or a slot already reclaimed) */
		if (proto_encode_answer(ans, mbox_resp_buf(&w->mb, t), mbox_resp_cap(&w->mb), &len,
					&err) == 0 &&
		    mbox_answer(&w->mb, t, (uint32_t)len) == -ECANCELED)
			ctr_add(w->ctr, wrk_ctr_index(PROTO_WRK_mbox_resets), 1);
	}
	w->ndeferred = 0;
	free(ans);
}

/* Serves the control mailbox until a shutdown has joined O and S. A shutdown only
 * starts the stop; this loop sees the threads' exit, joins them and answers it. */
static void serve(struct wrk *w)
{
	for (;;) {
		bool stopping = atomic_load_explicit(&w->stop, memory_order_relaxed) != 0;
		bool o_failed = atomic_load_explicit(&w->sync.o_err, memory_order_seq_cst) != 0;
		bool s_failed = atomic_load_explicit(&w->sync.s_err, memory_order_seq_cst) != 0;
		bool awaiting = !w->joined && (stopping || o_failed);
		struct mbox_event ev;
		uint64_t t0;
		size_t len;
		int rc;

		if (!w->joined && (stopping || o_failed || s_failed) && threads_gone(w))
			reap(w);
		if (stopping && w->joined)
			break;
		rc = mbox_server_next(
		    &w->mb, &ev,
		    shm_deadline_in(awaiting ? WRK_MBOX_EXIT_WAIT_NS : WRK_MBOX_WAIT_NS));
		if (rc)
			continue; /* -ETIMEDOUT: nothing came */
		if (ev.kind == MBOX_EV_RESET) {
			(void)mbox_ack_reset(&w->mb, ev.t);
			ctr_add(w->ctr, wrk_ctr_index(PROTO_WRK_mbox_resets), 1);
			continue;
		}
		t0 = shm_now_ns();
		w->cur = ev.t;
		w->assigned = NULL;
		w->loaded[0] = '\0';
		w->collected[0] = '\0';
		rc = proto_dispatch(&wrk_server, w, ev.req, ev.len, mbox_resp_buf(&w->mb, ev.t),
				    mbox_resp_cap(&w->mb), &len);
		/* -ECANCELED: the supervisor gave up meanwhile, and the reset is acknowledged
		 * there. An assign's answer is then lost: nobody learns the stream, so the
		 * request it admitted is cancelled rather than left to run; a load's, and
		 * the supervisor rolled its registration back, so the callable goes again; a
		 * trace collect's, and nobody will merge or remove the fragment written. */
		if (rc == 0 && mbox_answer(&w->mb, ev.t, (uint32_t)len) == -ECANCELED) {
			ctr_add(w->ctr, wrk_ctr_index(PROTO_WRK_mbox_resets), 1);
			if (w->assigned)
				wrk_req_abandon(w, w->assigned, w->assigned_id);
			wrk_load_abandon(w);
			if (w->collected[0])
				(void)unlink(w->collected);
		}
		w->assigned = NULL;
		w->loaded[0] = '\0';
		w->collected[0] = '\0';
		wrk_trace_span(wrk_trace_of(w), WRK_TR_M, WRK_SPAN_MBOX_OP, t0, shm_now_ns(), 0);
	}
	answer_deferred(w);
}

int wrk_main(const struct wrk_config *cfg, struct shm_region *control, struct proto_node *node)
{
	struct wrk *w;
	int err;

	if (!cfg || !control || !node || !config_ok(cfg, node))
		return -EINVAL;
	/* a size whose blocks x floats x 4 is past the bound (or wraps round) is refused
	 * here, by name, not left to the pool's -EOVERFLOW */
	if (!wl_kvpool_bytes(cfg->kv_blocks, cfg->kv_block_floats)) {
		fprintf(stderr,
			"chipd worker %u: a KV pool of %u blocks of %u floats is over the largest "
			"(%llu bytes): refused\n",
			cfg->chip, cfg->kv_blocks, cfg->kv_block_floats,
			(unsigned long long)WL_KVPOOL_BYTES_MAX);
		return -EOVERFLOW;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->cfg = *cfg;
	w->nbanks = cfg->no_overlap ? 1 : cfg->nbanks;
	w->node = node;
	w->control = control;
	w->ctr = &node->wrk_ctr[cfg->chip];
	wrk_pass_reset(&node->dir[cfg->chip].pass_o);
	wrk_pass_reset(&node->dir[cfg->chip].pass_s);
	atomic_init(&w->trace, cfg->trace); /* before O and S exist */
	pthread_mutex_init(&w->lock, NULL);
	pthread_mutex_init(&w->kv_lock, NULL);
	err = mbox_attach(&w->mb, shm_region_body(control), shm_region_body_size(control));
	if (err)
		goto out_free;
	mbox_set_spin(&w->mb, cfg->spin_ns);
	err = mbox_server_attach(&w->mb);
	if (err < 0)
		goto out_free;
	err = setup(w);
	if (!err) {
		wrk_register_replay(w); /* before READY: the first heartbeat comes after */
		serve(w);
	}
	teardown(w);
	mbox_server_detach(&w->mb);
	free(w);
	return err;
out_free:
	pthread_mutex_destroy(&w->lock);
	pthread_mutex_destroy(&w->kv_lock);
	free(w);
	return err;
}
