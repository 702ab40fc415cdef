/* apicrypt.c - encrypted values over HTTP (docs/operations.md,
 * "Encryption"): who may see them decrypted (one function, which the
 * token scopes decide), a push's payloads sealed before the insert, a
 * job's values opened for an authorised GET. Uses api.h, apiroute.h,
 * host.h, keyring.h, config.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/api.h"
#include "http/apiroute.h"
#include "http/auth.h"
#include "http/host.h"
#include "base/keyring.h"
#include "config/config.h"

int
jr_api_may_decrypt(const jr_apicall *c)
{
    /* a write token (http.token is one) sees the values, and a read or
     * a push token granted them (decrypt = true); another, and a runner
     * without tokens (reads open to anyone on its address), sees
     * "<encrypted>" */
    return c->tok != NULL &&
           (c->tok->scope == JR_TOKEN_WRITE || c->tok->decrypt);
}

int
jr_api_seal_pushes(const jr_apicall *c, jr_apireq *q, jr_push *p, int n,
                   char *why, size_t size)
{
    jr_err err;

    if (c->host->cfg->keys == NULL || n == 0)
        return 0;
    if (jr_keyring_seal_pushes(c->host->cfg->keys, p, n, &q->sealed,
                               &err) < 0) {
        snprintf(why, size, "%s", err.msg);
        return err.code == JR_EINPUT ? -2 : -1;
    }
    return 0;
}

int
jr_api_seal_text(const jr_apicall *c, void **mem, char *why, size_t size)
{
    jr_buf b = {0};
    jr_err err;

    if (c->host->cfg->keys == NULL || *mem == NULL)
        return 0;
    if (jr_keyring_seal(c->host->cfg->keys, *mem, strlen(*mem), &b,
                        &err) < 0 || jr_buf_put(&b, "", 1) < 0) {
        jr_buf_free(&b);
        snprintf(why, size, "its payload cannot be encrypted: %s",
                 err.msg);
        return -1;
    }
    free(*mem);
    *mem = b.p;
    return 0;
}

const char *
jr_api_opened(const jr_apireq *q, const char *queue, const char *s,
              char **own)
{
    size_t n;
    jr_err err;

    *own = NULL;
    if (s == NULL || !jr_seal_any(s, strlen(s)))
        return s;
    /* a push token's grant is for its queues' jobs: another queue's
     * values are "<encrypted>" to it */
    if (!q->decrypt || q->keys == NULL ||
        (q->dtok != NULL && !jr_auth_queue(q->dtok, queue)) ||
        jr_keyring_open(q->keys, s, strlen(s), own, &n, &err) <= 0)
        return NULL;
    return *own;
}
