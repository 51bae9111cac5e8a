/* client_data.c - libchipd's use of its client region's data area (docs/protocol.md
 * §8.7): a small first-fit allocator of ranges, in granules of CLIENT_DATA_GRAIN
 * bytes, under one mutex per connection; the input bytes of a submit too long to go
 * inline are copied into one range, and its output goes into another. A range the
 * workers may still read or write is never given out again: the input's goes back
 * once the submit was answered, the output's when its stream is closed after its end
 * was seen (a stream closed before that keeps its range until chipd_close). */
#include "client_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define CLIENT_DATA_GRAIN 256u
#define BITS		  64u

int client_data_init(chipd_conn *c)
{
	uint32_t size = c->node.xchg.base ? c->node.geom.xchg.data_size : 0;

	pthread_mutex_init(&c->data_lock, NULL);
	c->data_grains = size / CLIENT_DATA_GRAIN;
	c->data_used = NULL;
	if (c->data_grains) {
		c->data_used = calloc((c->data_grains + BITS - 1) / BITS, sizeof(uint64_t));
		if (!c->data_used)
			return -ENOMEM;
	}
	return 0;
}

void client_data_fini(chipd_conn *c)
{
	free(c->data_used);
	c->data_used = NULL;
	pthread_mutex_destroy(&c->data_lock);
}

/* The granules that hold @len bytes. */
static uint32_t grains(uint32_t len)
{
	return (len + CLIENT_DATA_GRAIN - 1) / CLIENT_DATA_GRAIN;
}

static bool grain_used(const chipd_conn *c, uint32_t g)
{
	return c->data_used[g / BITS] >> (g % BITS) & 1u;
}

static void mark(chipd_conn *c, uint32_t from, uint32_t n, bool used)
{
	for (uint32_t g = from; g < from + n; g++) {
		if (used)
			c->data_used[g / BITS] |= 1ull << (g % BITS);
		else
			c->data_used[g / BITS] &= ~(1ull << (g % BITS));
	}
}

/* Takes a range of @len bytes (1..) into *@r for field @what ("input", "output");
 * @own is what the same request holds already (its input's range; len 0: none), which
 * a refusal names. */
static int data_alloc(chipd_conn *c, uint32_t len, struct client_range *r, const char *what,
		      const struct client_range *own, struct chipd_error *err)
{
	uint32_t need = grains(len), run = 0, used = 0;
	uint32_t own_bytes = grains(own->len) * CLIENT_DATA_GRAIN;

	if (!c->data_grains)
		return client_fail(err, -EINVAL, CHIPD_E_BAD_REQUEST,
				   "\"%s\": %" PRIu32 " bytes need the data area, and the node has "
				   "none (chipd --client-data-kib 0)",
				   what, len);
	if (need > c->data_grains)
		return client_fail(err, -EINVAL, CHIPD_E_BAD_REQUEST,
				   "\"%s\": %" PRIu32 " bytes, the data area holds %" PRIu32, what,
				   len, c->data_grains * CLIENT_DATA_GRAIN);
	/* what this request needs at once can never fit: no retry would help */
	if (need > c->data_grains - grains(own->len))
		return client_fail(err, -EINVAL, CHIPD_E_BAD_REQUEST,
				   "\"%s\": %" PRIu32 " bytes and this request's input's %" PRIu32
				   " together exceed the data area's %" PRIu32,
				   what, len, own_bytes, c->data_grains * CLIENT_DATA_GRAIN);
	pthread_mutex_lock(&c->data_lock);
	for (uint32_t g = 0; g < c->data_grains; g++) {
		run = grain_used(c, g) ? 0 : run + 1;
		if (run == need) {
			uint32_t from = g + 1 - need;

			mark(c, from, need, true);
			pthread_mutex_unlock(&c->data_lock);
			r->off = from * CLIENT_DATA_GRAIN;
			r->len = len;
			return 0;
		}
	}
	for (uint32_t g = 0; g < c->data_grains; g++)
		used += grain_used(c, g);
	pthread_mutex_unlock(&c->data_lock);
	used *= CLIENT_DATA_GRAIN;
	/* free space may lack a range long enough: each part named, this request's own */
	return client_fail(err, -ENOSPC, CHIPD_E_NO_CAPACITY,
			   "\"%s\": no free range of %" PRIu32 " bytes in the data area (%" PRIu32
			   " bytes: %" PRIu32 " free, %" PRIu32
			   " held by this request's input, %" PRIu32 " by other requests)",
			   what, len, c->data_grains * CLIENT_DATA_GRAIN,
			   c->data_grains * CLIENT_DATA_GRAIN - used, own_bytes, used - own_bytes);
}

void client_data_free(chipd_conn *c, struct client_range *r)
{
	if (!r->len)
		return;
	pthread_mutex_lock(&c->data_lock);
	mark(c, r->off / CLIENT_DATA_GRAIN, grains(r->len), false);
	pthread_mutex_unlock(&c->data_lock);
	r->len = 0;
}

const char *client_data_at(const chipd_conn *c, const struct client_range *r)
{
	return proto_xchg_data(&c->node.xchg, &c->node.geom.xchg) + r->off;
}

int client_data_stage(chipd_conn *c, const struct chipd_request *req, struct proto_msg *m,
		      struct client_range *in, struct client_range *out, struct chipd_error *err)
{
	int rc;

	in->len = out->len = 0;
	if (req->output_cap > PROTO_OUTPUT_MAX)
		return client_fail(err, -EINVAL, CHIPD_E_BAD_REQUEST,
				   "\"output_cap\": %" PRIu32 " bytes, at most %u", req->output_cap,
				   PROTO_OUTPUT_MAX);
	if (req->input_len > PROTO_INPUT_MAX)
		return client_fail(err, -EINVAL, CHIPD_E_BAD_REQUEST,
				   "\"input\": %" PRIu32 " bytes, at most %u", req->input_len,
				   PROTO_INPUT_MAX);
	if (req->input_len > PROTO_INPUT_INLINE_MAX) {
		rc = data_alloc(c, req->input_len, in, "input", in, err);
		if (rc)
			return rc;
		memcpy((char *)client_data_at(c, in), req->input, req->input_len);
		m->input_off = in->off;
		m->input_len = in->len;
	} else if (req->input_len) {
		memcpy(m->input_inline, req->input, req->input_len);
		m->input_inline_len = req->input_len;
	}
	if (req->output_cap) {
		rc = data_alloc(c, req->output_cap, out, "output", in, err);
		if (rc) {
			client_data_free(c, in);
			return rc;
		}
		m->output_off = out->off;
		m->output_cap = out->len;
	}
	return 0;
}
