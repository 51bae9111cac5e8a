/* sup_clstat.c - the counts of each callable (docs/callables.md, "Counters").
 *
 * An entry belongs to a callable name from its first admitted request until the name
 * is unloaded; the names loaded at once never exceed --max-callables (wl_set_limit),
 * nor do the entries in use, since only a loaded name's requests are admitted and an
 * unload waits until none of them is in flight (sup_register.c, drain_step). A request
 * remembers its entry and the entry's generation: an end seen after the name went (or
 * went and came back, a new registration) counts nowhere, so a registration always
 * starts at 0. Every function runs under sup.lock. */
#include "sup.h"
#include "sup_clstat.h"
#include "sup_log.h"

#include "ring.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sup_clstat {
	char name[CHIPD_NAME_MAX]; /* "": free */
	uint32_t gen;		   /* +1 each time a name takes the entry; never 0 */
	struct sup_clstat_vals v;
};

int sup_clstat_init(struct sup *s)
{
	s->clstats = calloc(s->cfg.max_callables, sizeof(*s->clstats));
	return s->clstats ? 0 : -ENOMEM;
}

void sup_clstat_free(struct sup *s)
{
	free(s->clstats);
	s->clstats = NULL;
	s->clstats_used = 0;
}

/* The entry of @name, or -1: the walk ends once it passed every entry in use. */
static int find(const struct sup *s, const char *name)
{
	for (uint32_t i = 0, seen = 0; i < s->cfg.max_callables && seen < s->clstats_used; i++) {
		if (!s->clstats[i].name[0])
			continue;
		if (strcmp(s->clstats[i].name, name) == 0)
			return (int)i;
		seen++;
	}
	return -1;
}

/* The entry of @name, taken (zeroed, a new generation) when it has none; -1 when
 * every entry is in use, which the bound on loaded names rules out. */
static int take(struct sup *s, const char *name)
{
	int i = find(s, name);

	for (uint32_t k = 0; i < 0 && k < s->cfg.max_callables; k++) {
		struct sup_clstat *c = &s->clstats[k];

		if (c->name[0])
			continue;
		snprintf(c->name, sizeof(c->name), "%s", name);
		s->clstats_used++;
		c->gen = c->gen + 1 ? c->gen + 1 : 1;
		c->v = (struct sup_clstat_vals){0};
		i = (int)k;
	}
	return i;
}

void sup_clstat_admitted(struct sup *s, struct sup_req *e)
{
	int i = take(s, e->wl);

	if (i < 0) {
		SUP_WARN((int)e->chip, e->id, "callable %s: no room for its counts (%u entries)",
			 e->wl, s->cfg.max_callables);
		return;
	}
	s->clstats[i].v.requests++;
	e->stat = (uint32_t)i + 1;
	e->stat_gen = s->clstats[i].gen;
}

void sup_clstat_end(struct sup *s, const struct sup_req *e, uint32_t flags, uint64_t tokens)
{
	struct sup_clstat_vals *v;

	if (!e->stat || e->stat > s->cfg.max_callables || !s->clstats[e->stat - 1].name[0] ||
	    s->clstats[e->stat - 1].gen != e->stat_gen)
		return;
	v = &s->clstats[e->stat - 1].v;
	if (flags & RING_F_FINAL)
		v->completed++;
	else if (RING_CODE_OF(flags) == CHIPD_E_CANCELLED)
		v->cancelled++;
	else
		v->failed++;
	v->tokens += tokens;
}

void sup_clstat_drop(struct sup *s, const char *name)
{
	int i = find(s, name);

	if (i >= 0) {
		s->clstats[i].name[0] = '\0'; /* its generation stays: ends of it count nowhere */
		s->clstats_used--;
	}
}

void sup_clstat_get(const struct sup *s, const char *name, struct sup_clstat_vals *out)
{
	int i = find(s, name);

	*out = i < 0 ? (struct sup_clstat_vals){0} : s->clstats[i].v;
}
