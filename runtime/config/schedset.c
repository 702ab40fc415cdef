/* schedset.c - a set of schedules once read (schedules.c): whether two
 * fire the same jobs, a copy, the names of a catch_up and an overlap, a
 * fire's jitter, and freeing one.
 * Uses schedules.h. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/schedules.h"

static int
str_eq(const char *a, const char *b)
{
    return (a == NULL && b == NULL) ||
           (a != NULL && b != NULL && strcmp(a, b) == 0);
}

int
jr_schedule_same(const jr_schedule *a, const jr_schedule *b)
{
    return str_eq(a->name, b->name) && str_eq(a->job, b->job) &&
           str_eq(a->spec, b->spec) && str_eq(a->tz, b->tz) &&
           str_eq(a->payload, b->payload) && str_eq(a->queue, b->queue) &&
           a->priority == b->priority && a->max_retries == b->max_retries &&
           a->catch_up == b->catch_up && a->overlap == b->overlap &&
           a->jitter == b->jitter && a->start_at == b->start_at &&
           a->end_at == b->end_at && a->runtime == b->runtime;
}

static char *
dup_or_null(const char *s, int *oom)
{
    char *d = s != NULL ? strdup(s) : NULL;

    *oom |= s != NULL && d == NULL;
    return d;
}

int
jr_schedules_copy(jr_schedules *dst, const jr_schedules *src)
{
    int i, oom = 0;

    memset(dst, 0, sizeof *dst);
    dst->timezone = dup_or_null(src->timezone, &oom);
    if (src->n > 0 &&
        (dst->s = calloc((size_t)src->n, sizeof *dst->s)) == NULL)
        oom = 1;
    for (i = 0; !oom && i < src->n; i++) {
        jr_schedule *d = &dst->s[i];
        *d = src->s[i];
        d->name = dup_or_null(d->name, &oom);
        d->job = dup_or_null(d->job, &oom);
        d->spec = dup_or_null(d->spec, &oom);
        d->tz = dup_or_null(d->tz, &oom);
        d->payload = dup_or_null(d->payload, &oom);
        d->queue = dup_or_null(d->queue, &oom);
        dst->n = i + 1;
    }
    if (oom) {
        jr_schedules_free(dst);
        return -1;
    }
    return 0;
}

const char *
jr_catchup_name(int catch_up)
{
    return catch_up == JR_CATCHUP_ALL ? "all" :
           catch_up == JR_CATCHUP_NONE ? "none" : "last";
}

const char *
jr_overlap_name(int overlap)
{
    return overlap == JR_OVERLAP_SKIP ? "skip" :
           overlap == JR_OVERLAP_CANCEL ? "cancel_previous" : "allow";
}

double
jr_schedule_jitter(const jr_schedule *s, double at)
{
    uint64_t h = 14695981039346656037ULL;       /* FNV-1a */
    uint64_t ms = s->jitter >= 0.001 ? (uint64_t)(s->jitter * 1000) : 0;
    char text[64];
    const char *p;

    if (ms == 0)                /* below a millisecond: no whole one */
        return 0;
    snprintf(text, sizeof text, "@%.3f", at);
    for (p = s->name; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    for (p = text; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    /* whole milliseconds below jitter */
    return (double)(h % ms) / 1000.0;
}

void
jr_schedules_free(jr_schedules *ss)
{
    int i;

    for (i = 0; i < ss->n; i++) {
        jr_schedule *s = &ss->s[i];
        free(s->name);
        free(s->job);
        free(s->spec);
        free(s->tz);
        free(s->payload);
        free(s->queue);
    }
    free(ss->s);
    free(ss->timezone);
    memset(ss, 0, sizeof *ss);
}
