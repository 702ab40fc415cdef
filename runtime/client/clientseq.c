/* clientseq.c - the C library's sequences (docs/queues.md, "Sequences"):
 * the list of sequences and an operator's skip and unblock. The push
 * into a sequence is client.c's. Uses client_int.h. */
#include <stddef.h>

#include "client/client_int.h"

typedef struct seq_call {
    jr_client_seq_fn fn;
    void            *arg;
} seq_call;

static int
seq_out(const jr_seq_row *r, void *arg)
{
    seq_call *sc = arg;

    return sc->fn(r->key, r->head, r->state, r->jobs, r->blocked, sc->arg);
}

int
jr_client_sequences(jr_client *c, int blocked, int limit,
                    jr_client_seq_fn fn, void *arg)
{
    seq_call sc = {fn, arg};

    if (c == NULL || fn == NULL || limit < 0)
        return JR_CLIENT_EUSAGE;
    if (jr_clientint_begin(c) < 0)
        return jr_clientint_finish(c, -1);
    return jr_clientint_finish(c, c->db.ops->sequences(c->db.b, blocked,
                                                       limit, seq_out, &sc,
                                                       &c->err));
}

int
jr_client_sequence_act(jr_client *c, const char *key, int unblock,
                       long *count)
{
    int n;

    if (c == NULL || key == NULL)
        return JR_CLIENT_EUSAGE;
    if (jr_clientint_begin(c) < 0)
        return jr_clientint_finish(c, -1);
    n = c->db.ops->seq_act(c->db.b, key, unblock ? JR_SEQ_ACT_UNBLOCK :
                           JR_SEQ_ACT_SKIP, &c->err);
    if (n >= 0 && count != NULL)
        *count = n;
    return jr_clientint_finish(c, n < 0 ? -1 : 0);
}
