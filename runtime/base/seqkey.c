/* seqkey.c - a handler's sequence option applied at push (seqkey.h).
 * Uses jsondom.h. */
#include <stdlib.h>
#include <string.h>

#include "base/seqkey.h"
#include "base/jsondom.h"

int
jr_seq_key_of(const char *payload, const char *path, char *out)
{
    char seg[208], *s;
    const char *p = path, *dot;
    jr_jdoc doc = {0};
    jr_err err;
    int at = 0, got = 0;
    size_t len;

    if (payload == NULL || jr_jdoc_parse(&doc, payload, strlen(payload),
                                         "payload", &err) < 0) {
        jr_jdoc_free(&doc);
        return 0;
    }
    while (at >= 0 && *p) {
        dot = strchr(p, '.');
        len = dot ? (size_t)(dot - p) : strlen(p);
        if (len >= sizeof seg || doc.n[at].type != JR_JSON_OBJECT) {
            at = -1;
            break;
        }
        memcpy(seg, p, len);
        seg[len] = '\0';
        at = jr_jdoc_get(&doc, at, seg);
        p += len + (dot != NULL);
    }
    if (at >= 0 && doc.n[at].type == JR_JSON_STRING &&
        (s = jr_jdoc_str(&doc, at)) != NULL) {
        len = strlen(s);
        if ((got = len >= 1 && len <= JR_SEQKEY_MAX))
            memcpy(out, s, len + 1);
        free(s);
    } else if (at >= 0 && doc.n[at].type == JR_JSON_NUMBER &&
               doc.n[at].len <= JR_SEQKEY_MAX) {
        memcpy(out, doc.n[at].at, doc.n[at].len);
        out[doc.n[at].len] = '\0';
        got = 1;
    }
    jr_jdoc_free(&doc);
    return got;
}

int
jr_seq_key_wanted(const jr_push *p)
{
    return p->sequence == NULL && p->nafter == 0 && p->nafter_local == 0 &&
           p->batch == 0 && p->batch_new == NULL && p->unique_key == NULL;
}

/* q's keys of its own: n pointers after its n pushes, one block */
static char **
owned(jr_push *q, int n)
{
    return (char **)(void *)(q + n);
}

int
jr_seq_apply(const jr_push *p, int n, jr_seq_path_fn path_of, void *arg,
             jr_push **out, jr_err *err)
{
    const char *path = NULL, *last = NULL;
    char key[JR_SEQKEY_MAX + 1];
    jr_push *q = NULL;
    int i, has = 0, rc;

    *out = NULL;
    for (i = 0; i < n; i++) {
        if (!jr_seq_key_wanted(&p[i]))
            continue;
        if (last == NULL || strcmp(last, p[i].name) != 0) {
            if ((rc = path_of(arg, p[i].name, &path, err)) < 0) {
                jr_seq_apply_free(q, n);
                return -1;
            }
            has = rc;
            last = p[i].name;
        }
        if (!has || !jr_seq_key_of(p[i].payload, path, key))
            continue;
        if (q == NULL && (q = calloc(1, (size_t)n * (sizeof *q +
                                                     sizeof(char *))))
            != NULL)
            memcpy(q, p, (size_t)n * sizeof *q);
        if (q == NULL || (owned(q, n)[i] = strdup(key)) == NULL) {
            jr_seq_apply_free(q, n);
            return jr_fail(err, JR_ENOMEM, "job '%s': out of memory",
                           p[i].name);
        }
        q[i].sequence = owned(q, n)[i];
    }
    *out = q;
    return q != NULL;
}

void
jr_seq_apply_free(jr_push *q, int n)
{
    int i;

    if (q == NULL)
        return;
    for (i = 0; i < n; i++)
        free(owned(q, n)[i]);
    free(q);
}
