/* mbox_fixture.c - shared steps of the check_mbox suites (see mbox_fixture.h). */
#include "mbox_fixture.h"
#include "testutil.h"

#include <string.h>

void fx_init(struct fixture *fx, uint32_t nslots, uint32_t req_cap, uint32_t resp_cap)
{
	fx->size = mbox_size(nslots, req_cap, resp_cap);
	ck_assert_uint_gt(fx->size, 0);
	fx->mem = tu_shared(fx->size);
	ck_assert_int_eq(mbox_init(&fx->mb, fx->mem, fx->size, nslots, req_cap, resp_cap), 0);
}

void fx_fini(struct fixture *fx)
{
	tu_unmap(fx->mem, fx->size);
}

enum mbox_state state_of(struct fixture *fx, uint32_t slot)
{
	return MBOX_CTL_STATE(mbox_ctl(&fx->mb, slot));
}

uint32_t gen_of(struct fixture *fx, uint32_t slot)
{
	return MBOX_CTL_GEN(mbox_ctl(&fx->mb, slot));
}

struct mbox_ticket post_text(struct fixture *fx, const char *text)
{
	struct mbox_ticket t;

	ck_assert_int_eq(mbox_claim(&fx->mb, &t), 0);
	strcpy(mbox_req_buf(&fx->mb, t), text);
	ck_assert_int_eq(mbox_post(&fx->mb, t, (uint32_t)strlen(text) + 1), 0);
	return t;
}

struct mbox_event next_event(struct fixture *fx)
{
	struct mbox_event ev;

	ck_assert_int_eq(mbox_server_next(&fx->mb, &ev, shm_deadline_in(2000 * MS)), 0);
	return ev;
}
