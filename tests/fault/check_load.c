/* check_load.c - load with exact accounting: C client threads, each with
 * its own connection, send R cheap synthetic requests each (1..8 tokens, no host or
 * device cost), cancel 10% of them after reading a few tokens, and give 20% a random
 * deadline of 1..30 ms. At the end:
 *   submitted = completed + cancelled + failed (by code), on the clients' side;
 *   the workers' counters say the same (completed, cancelled, failed, admitted);
 *   every completed stream delivered exactly its tokens, in order; streams that
 *   ended early delivered a prefix; the tokens the clients read equal the workers'
 *   tokens counter; no request id was given twice; no seq repeated (checked per
 *   stream, in order);
 *   the supervisor took exactly the calls the clients made (requests) and answered
 *   every one (answered); its err_<code> equals, code by code, what the clients
 *   saw end with it: refusals, cancels of ended requests (not_found) and stream
 *   ends (cancelled, timeout), each request once.
 * Refusals (queue_full, no_capacity: retryable) of submits and cancels are retried and
 * counted apart: the clients are threads of one process, past its --max-client-slots
 * whenever more of them than that are in a call at once.
 *
 * The size is a parameter: FT_LOAD_CLIENTS (default 64) and FT_LOAD_REQUESTS (default
 * 50, the CI size); the full 64 x 1000 run of docs/reliability.md is
 *   FT_LOAD_REQUESTS=1000 CK_DEFAULT_TIMEOUT=0 build/tests/check_load */
#include "fault.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct load_client {
	struct cd *d;
	uint32_t index, requests;
	struct ft_ledger l;
	uint64_t *ids;	       /* ids of accepted requests */
	uint64_t retries;      /* retryable refusals, retried */
	uint64_t cancel_tries; /* cancels drawn (10%) that were sent before the end */
	uint64_t cancels;      /* cancel calls answered ok */
	uint64_t short_ok;     /* completed streams with the wrong token count (must be 0) */
	uint64_t tok_early;    /* tokens read from streams that ended with an error */
	const char *fail;      /* first failure, reported by the main thread */
	char fail_buf[200];
};

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *load_thread(void *arg)
{
	struct load_client *c = arg;
	uint64_t rng = 0x9e3779b97f4a7c15ull * (c->index + 1);
	struct chipd_error err;
	chipd_conn *conn;

	if (chipd_connect(c->d->instance, &conn, &err)) {
		c->fail = "connect";
		return NULL;
	}
	for (uint32_t i = 0; i < c->requests && !c->fail; i++) {
		uint64_t r = xorshift(&rng);
		uint32_t tokens = 1 + (uint32_t)(r % 8);
		bool cancel = (r >> 8) % 10 == 0;
		uint32_t deadline = (r >> 16) % 5 == 0 ? 1 + (uint32_t)((r >> 24) % 30) : 0;
		struct chipd_param p[] = {{"tokens", tokens}, {"device_us", 0}};
		struct chipd_request req = {.workload = "synthetic",
					    .params = p,
					    .nparams = 2,
					    .chip = -1,
					    .deadline_ms = deadline};
		struct chipd_token tok;
		chipd_stream *s = NULL;
		uint64_t id = 0;
		uint32_t n = 0, read_before_cancel = (uint32_t)((r >> 32) % 3);
		int rc;

		for (unsigned tries = 0;; tries++) {
			rc = chipd_submit(conn, &req, CD_CALL_MS, &id, &s, &err);
			if (rc == 0)
				break;
			if (rc == -EREMOTEIO && err.retryable && tries < 10000) {
				c->l.refused_by[err.code]++;
				c->retries++;
				usleep(1000);
				continue;
			}
			snprintf(c->fail_buf, sizeof(c->fail_buf), "submit: %d %s", rc,
				 err.message);
			c->fail = c->fail_buf;
			break;
		}
		if (rc)
			break;
		c->ids[c->l.submitted++] = id;
		for (;;) {
			if (cancel && n == read_before_cancel) {
				c->cancel_tries++;
				/* refused for now (queue_full: this process's threads hold more
				 * mailbox slots than its bound): retried, like a submit */
				for (unsigned tries = 0;; tries++) {
					rc = chipd_cancel(conn, id, CD_CALL_MS, &err);
					if (!(rc == -EREMOTEIO && err.retryable && tries < 10000))
						break;
					c->l.refused_by[err.code]++;
					c->retries++;
					usleep(1000);
				}
				if (rc == 0)
					c->cancels++;
				else if (!(rc == -EREMOTEIO && err.code == CHIPD_E_NOT_FOUND)) {
					snprintf(c->fail_buf, sizeof(c->fail_buf), "cancel: %d %s",
						 rc, err.message);
					c->fail = c->fail_buf;
				}
				cancel = false;
			}
			rc = chipd_stream_next(s, &tok, CD_CALL_MS, &err);
			if (rc == -EREMOTEIO) {
				if (err.code <= 0 || err.code >= CHIPD_NCODES) {
					c->fail = "terminal code out of range";
					break;
				}
				c->l.ended[err.code]++;
				c->tok_early += n;
				break;
			}
			if (rc) {
				snprintf(c->fail_buf, sizeof(c->fail_buf),
					 "stream %llu: %d after %u tokens", (unsigned long long)id,
					 rc, n);
				c->fail = c->fail_buf;
				break;
			}
			if (tok.seq != n || tok.request != id) {
				snprintf(c->fail_buf, sizeof(c->fail_buf),
					 "stream %llu: seq %u (request %llu) where %u expected",
					 (unsigned long long)id, tok.seq,
					 (unsigned long long)tok.request, n);
				c->fail = c->fail_buf;
				break;
			}
			n++;
			c->l.tokens++;
			if (tok.final) {
				c->l.completed++;
				c->short_ok += n != tokens;
				break;
			}
		}
		if (!c->fail && chipd_stream_next(s, &tok, 0, &err) != -ENODATA)
			c->fail = "a record after the terminal one";
		chipd_stream_close(s, CD_CALL_MS);
	}
	chipd_close(conn);
	return NULL;
}

static uint32_t env_u32(const char *name, uint32_t def)
{
	const char *v = getenv(name);

	return v && *v ? (uint32_t)strtoul(v, NULL, 10) : def;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

START_TEST(load_exact_accounting)
{
	const char *const args[] = {"--chips", "2", NULL};
	uint32_t nclients = env_u32("FT_LOAD_CLIENTS", 64), per = env_u32("FT_LOAD_REQUESTS", 50);
	struct load_client *cl = calloc(nclients, sizeof(*cl));
	pthread_t *th = calloc(nclients, sizeof(*th));
	uint64_t *all = calloc((size_t)nclients * per, sizeof(*all));
	struct ft_ledger sum = {.complete = true};
	uint64_t nids = 0, retries = 0, cancels = 0, tries = 0, tok_early = 0, t0, ms, calls;
	struct ft_stats st0, st;
	struct cd d;

	ck_assert(cl && th && all && nclients > 0);
	ft_start(&d, args);
	ft_stats(&d, &st0);
	t0 = ft_now_ms();
	for (uint32_t i = 0; i < nclients; i++) {
		cl[i] = (struct load_client){.d = &d, .index = i, .requests = per};
		cl[i].ids = all + (size_t)i * per;
		ck_assert_int_eq(pthread_create(&th[i], NULL, load_thread, &cl[i]), 0);
	}
	for (uint32_t i = 0; i < nclients; i++)
		pthread_join(th[i], NULL);
	ms = ft_now_ms() - t0;
	for (uint32_t i = 0; i < nclients; i++) {
		ck_assert_msg(!cl[i].fail, "client %u: %s", i, cl[i].fail);
		ck_assert_uint_eq(cl[i].short_ok, 0);
		sum.submitted += cl[i].l.submitted;
		sum.completed += cl[i].l.completed;
		sum.tokens += cl[i].l.tokens;
		for (int c = 0; c < CHIPD_NCODES; c++) {
			sum.ended[c] += cl[i].l.ended[c];
			sum.refused_by[c] += cl[i].l.refused_by[c];
		}
		for (uint64_t k = 0; k < cl[i].l.submitted; k++)
			all[nids++] = cl[i].ids[k];
		retries += cl[i].retries;
		cancels += cl[i].cancels;
		tries += cl[i].cancel_tries;
		tok_early += cl[i].tok_early;
	}
	ck_assert_uint_eq(sum.submitted, (uint64_t)nclients * per);
	/* a cancel that was not answered ok found its request ended: not_found */
	sum.refused_by[CHIPD_E_NOT_FOUND] += tries - cancels;
	qsort(all, nids, sizeof(*all), cmp_u64);
	for (uint64_t k = 1; k < nids; k++)
		ck_assert_msg(all[k] != all[k - 1], "request id %llu given twice",
			      (unsigned long long)all[k]);
	ft_check_accounting(&d, &sum, 0);
	ft_stats(&d, &st);
	fprintf(
	    stderr,
	    "load: %u clients x %u requests in %llu ms (%.0f requests/s): completed %llu, "
	    "cancelled %llu, timeout %llu, other errors %llu; cancel calls %llu (ok %llu, the rest "
	    "not_found: already ended); "
	    "refusals retried %llu (queue_full %llu, no_capacity %llu); tokens read %llu "
	    "(%llu from streams that ended early), workers' tokens %llu\n",
	    nclients, per, (unsigned long long)ms,
	    1000.0 * (double)sum.submitted / (double)(ms ? ms : 1),
	    (unsigned long long)sum.completed, (unsigned long long)sum.ended[CHIPD_E_CANCELLED],
	    (unsigned long long)sum.ended[CHIPD_E_TIMEOUT],
	    (unsigned long long)(sum.submitted - sum.completed - sum.ended[CHIPD_E_CANCELLED] -
				 sum.ended[CHIPD_E_TIMEOUT]),
	    (unsigned long long)tries, (unsigned long long)cancels, (unsigned long long)retries,
	    (unsigned long long)sum.refused_by[CHIPD_E_QUEUE_FULL],
	    (unsigned long long)sum.refused_by[CHIPD_E_NO_CAPACITY], (unsigned long long)sum.tokens,
	    (unsigned long long)tok_early, (unsigned long long)ft_chip_sum(&st, PROTO_WRK_tokens));
	/* only cancel and deadline end a stream early here */
	ck_assert_uint_eq(sum.submitted, sum.completed + sum.ended[CHIPD_E_CANCELLED] +
					     sum.ended[CHIPD_E_TIMEOUT]);
	ck_assert_uint_eq(ft_chip_sum(&st, PROTO_WRK_cancelled), sum.ended[CHIPD_E_CANCELLED]);
	ck_assert_uint_eq(ft_chip_sum(&st, PROTO_WRK_failed), sum.ended[CHIPD_E_TIMEOUT]);
	ck_assert_uint_eq(ft_chip_sum(&st, PROTO_WRK_tokens), sum.tokens);
	ck_assert_uint_eq(st.sup[PROTO_SUP_err_queue_full], sum.refused_by[CHIPD_E_QUEUE_FULL]);
	/* every submit (retries included) and cancel the clients sent, all answered;
	 * ft_check_accounting compared err_<code> with the ledger, code by code */
	calls = sum.submitted + retries + tries;
	ck_assert_uint_eq(st.sup[PROTO_SUP_requests] - st0.sup[PROTO_SUP_requests], calls);
	ck_assert_uint_eq(st.sup[PROTO_SUP_answered] - st0.sup[PROTO_SUP_answered], calls);
	free(all);
	free(th);
	free(cl);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("load");
	const struct tu_case cases[] = {{"load_exact_accounting", load_exact_accounting}};
	int rc;

	ft_set_owner();
	tu_add_cases(s, cases, 1);
	rc = tu_run(s);
	ft_cleanup();
	return rc;
}
