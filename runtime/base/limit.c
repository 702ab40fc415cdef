/* limit.c - the limits model's functions: find, add, copy and free a
 * config's limits, check a scope. Uses limit.h, job.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/job.h"
#include "base/limit.h"

#define QPLEN (sizeof JR_LIMIT_QPREFIX - 1)

jr_limit *
jr_limits_find(const jr_limits *ls, const char *scope)
{
    int i;

    for (i = 0; i < ls->n; i++)
        if (strcmp(ls->l[i].scope, scope) == 0)
            return &ls->l[i];
    return NULL;
}

jr_limit *
jr_limits_add(jr_limits *ls, const char *scope)
{
    jr_limit *l = realloc(ls->l, (size_t)(ls->n + 1) * sizeof *l);

    if (l == NULL)
        return NULL;
    ls->l = l;
    l = &ls->l[ls->n];
    memset(l, 0, sizeof *l);
    if ((l->scope = strdup(scope)) == NULL)
        return NULL;
    ls->n++;
    return l;
}

void
jr_limits_free(jr_limits *ls)
{
    int i;

    for (i = 0; i < ls->n; i++) {
        free(ls->l[i].scope);
        free(ls->l[i].key_path);
        free(ls->l[i].fair_path);
        free(ls->l[i].fair_weights);
    }
    free(ls->l);
    memset(ls, 0, sizeof *ls);
}

int
jr_limits_copy(jr_limits *dst, const jr_limits *src)
{
    int i;

    memset(dst, 0, sizeof *dst);
    if (src->n == 0)
        return 0;
    if ((dst->l = calloc((size_t)src->n, sizeof *dst->l)) == NULL)
        return -1;
    for (i = 0; i < src->n; i++, dst->n++) {
        dst->l[i] = src->l[i];
        dst->l[i].scope = strdup(src->l[i].scope);
        dst->l[i].key_path = src->l[i].key_path ?
                             strdup(src->l[i].key_path) : NULL;
        dst->l[i].fair_path = src->l[i].fair_path ?
                              strdup(src->l[i].fair_path) : NULL;
        dst->l[i].fair_weights = src->l[i].fair_weights ?
                                 strdup(src->l[i].fair_weights) : NULL;
        if (dst->l[i].scope == NULL ||
            (src->l[i].key_path && dst->l[i].key_path == NULL) ||
            (src->l[i].fair_path && dst->l[i].fair_path == NULL) ||
            (src->l[i].fair_weights && dst->l[i].fair_weights == NULL)) {
            dst->n++;
            jr_limits_free(dst);
            return -1;
        }
    }
    return 0;
}

int
jr_limit_scope_check(const char *scope, jr_err *err)
{
    if (strncmp(scope, JR_LIMIT_QPREFIX, QPLEN) == 0)
        return jr_name_check(scope + QPLEN, "queue name", err);
    return jr_name_check(scope, "job name", err);
}

/* Lowers *size to set's smallest cap or bucket, saying which in what. */
static void
set_size(const jr_limit_set *set, const char *of, long *size, char *what,
         size_t whatsz)
{
    if (set->concurrency > 0 && (*size == 0 || set->concurrency < *size)) {
        *size = set->concurrency;
        snprintf(what, whatsz, "%sconcurrency %d", of, set->concurrency);
    }
    if (set->rate > 0 && set->burst >= 1 &&
        (*size == 0 || (long)set->burst < *size)) {
        *size = (long)set->burst;
        snprintf(what, whatsz, "%srate \"%s\" (a bucket of %ld)", of,
                 set->rate_text, *size);
    }
}

long
jr_limit_size(const jr_limit *l, char *what, size_t whatsz)
{
    long size = 0;

    if (whatsz > 0)
        what[0] = '\0';
    set_size(&l->all, "", &size, what, whatsz);
    set_size(&l->per_key, "per_key ", &size, what, whatsz);
    return size;
}
