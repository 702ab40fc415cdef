/* wcrypt.c - encrypted values in the worker (docs/operations.md,
 * "Encryption"): the keys read at start from the settings' key file; a
 * job's payload, parents, steps and waits opened before its handler sees
 * them; its result and steps' list sealed before they go to the master,
 * which passes them through. A worker without a key file pays one
 * pointer test a job. Uses worker_int.h, keyring.h, retry.h. */
#include <stdlib.h>
#include <string.h>

#include "base/keyring.h"
#include "base/log.h"
#include "base/retry.h"
#include "worker/worker_int.h"

int
jr_wcrypt_start(worker *w, jr_err *err)
{
    if (w->set.key_file == NULL)
        return 0;
    if ((w->keys = jr_keyring_load(w->set.key_file, err)) == NULL)
        return jr_err_prefix(err, "encryption");
    return 0;
}

void
jr_wcrypt_close(worker *w)
{
    jr_keyring_free(w->keys);
    w->keys = NULL;
    jr_buf_free(&w->sealed);
    jr_buf_free(&w->sealed_push);
}

/* Opens the text *s (NULL: none) into *own (malloc'd) when it holds an
 * envelope; a key unknown here reads the key file again once (a key added
 * since the start). */
static int
open_text(worker *w, const char *s, size_t n, char **own, size_t *ownn,
          jr_err *err)
{
    int rc;
    jr_err e2;

    *own = NULL;
    if (s == NULL || !jr_seal_any(s, n))
        return 0;
    rc = jr_keyring_open(w->keys, s, n, own, ownn, err);
    if (rc < 0 && err->code == JR_ENOTFOUND) {
        int again = jr_keyring_reload(w->keys, &e2);

        if (again == 1)
            rc = jr_keyring_open(w->keys, s, n, own, ownn, err);
        else if (again < 0) {   /* why the key may be missing: say it */
            size_t l = strlen(err->msg);

            snprintf(err->msg + l, sizeof err->msg - l, " (the file read "
                     "again: %.*s)", 300, e2.msg);
        }
    }
    return rc;
}

jr_job *
jr_wcrypt_open_job(worker *w, jr_job *j, char *why, size_t size)
{
    char *t[4] = {NULL, NULL, NULL, NULL};
    const char *s[4] = {j->payload, j->parents, j->steps, j->waits};
    const char *what[4] = {"payload", "parents' results", "steps",
                           "signal payloads"};
    size_t n[4] = {j->payload_len, 0, 0, 0}, tn[4];
    jr_job *o;
    jr_err err;
    int i, any = 0;

    for (i = 1; i < 4; i++)
        n[i] = s[i] != NULL ? strlen(s[i]) : 0;
    for (i = 0; i < 4; i++) {
        int rc = open_text(w, s[i], n[i], &t[i], &tn[i], &err);

        if (rc < 0) {
            snprintf(why, size, "job %lld: its %s cannot be decrypted: %s",
                     (long long)j->id, what[i], err.msg);
            goto fail;
        }
        any |= rc;
    }
    if (!any)
        return j;
    o = jr_job_new_full(j->id, j->name, j->queue, t[0] ? t[0] : j->payload,
                        t[0] ? tn[0] : j->payload_len,
                        t[1] ? t[1] : j->parents, t[2] ? t[2] : j->steps,
                        t[3] ? t[3] : j->waits, j->trace, j->key);
    if (o == NULL) {
        snprintf(why, size, "job %lld: out of memory decrypting it",
                 (long long)j->id);
        goto fail;
    }
    o->batch = j->batch;
    o->attempt = j->attempt;
    o->max_retries = j->max_retries;
    o->priority = j->priority;
    o->run_at = j->run_at;
    o->created_at = j->created_at;
    o->flow = j->flow;
    for (i = 0; i < 4; i++)
        free(t[i]);
    free(j);
    return o;
fail:
    for (i = 0; i < 4; i++)
        free(t[i]);
    return NULL;
}

/* Keeps the first key id seen in arg. */
static void
first_id(const char *id, void *arg)
{
    char *out = arg;

    if (out[0] == '\0')
        snprintf(out, JR_KEYID_MAX + 1, "%s", id);
}

int
jr_wcrypt_sealed_unkeyed(const jr_job *j, char *why, size_t size)
{
    const char *s[4] = {j->payload, j->parents, j->steps, j->waits};
    const char *what[4] = {"payload", "parents' results", "steps",
                           "signal payloads"};
    char id[JR_KEYID_MAX + 1] = "";
    int i;

    for (i = 0; i < 4; i++) {
        const char *p = s[i];

        if (p == NULL)
            continue;
        if (i == 0) {   /* the payload: only its start is looked at first */
            while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
                p++;
            if (*p++ != '{')
                continue;
            while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
                p++;
            if (strncmp(p, JR_SEAL_MARK, sizeof JR_SEAL_MARK - 1) != 0 ||
                !jr_seal_id(j->payload, j->payload_len, id))
                continue;
        } else if (!jr_seal_any(p, strlen(p)) ||
                   jr_seal_ids(p, strlen(p), first_id, id) == 0)
            continue;
        snprintf(why, size, "job %lld: its %s cannot be decrypted: "
                 "encrypted with key '%s', and this runner has no key file "
                 "(encryption.key_file)", (long long)j->id, what[i], id);
        return 1;
    }
    return 0;
}

void
jr_wcrypt_refuse(worker *w, jr_job *j, const char *why)
{
    jr_result res;
    jr_retry_in in = {
        .job = j, .error = why, .handler_max = -1,
        .config_max = w->set.max_retries, .handler_backoff = -1,
    };
    size_t from = w->out.len;

    memset(&res, 0, sizeof res);
    res.id = j->id;
    if (why != w->err)
        snprintf(w->err, sizeof w->err, "%s", why);
    res.error = w->err;
    jr_retry_decide(&in, &res);
    jr_log(JR_LOG_ERROR, "%s", why);
    jr_frame_put_result(&w->out, &res);
    jr_worker_share(w, from);
    free(j);
}

int
jr_wcrypt_seal(worker *w, jr_result *res)
{
    jr_err err;

    jr_buf_reset(&w->sealed);
    if (jr_keyring_seal(w->keys, res->result, strlen(res->result),
                        &w->sealed, &err) < 0 ||
        jr_buf_put(&w->sealed, "", 1) < 0) {
        snprintf(w->err, sizeof w->err, "job %lld: %s", (long long)res->id,
                 err.msg);
        return -1;
    }
    res->result = w->sealed.p;
    return 0;
}

int
jr_wcrypt_pushes(worker *w, jr_jobctx *ctx)
{
    jr_err err;

    if (ctx->npushes == 0)
        return 0;
    if (jr_keyring_seal_pushes(w->keys, ctx->pushes, ctx->npushes,
                               &w->sealed_push, &err) < 0) {
        snprintf(w->err, sizeof w->err, "%s", err.msg);
        return -1;
    }
    return 0;
}
