/* test_contract_sequences.c - the backend contract on both engines
 * (contract.h): sequences (docs/queues.md): a claim offers only a
 * sequence's head; a dead head with on_failure block holds the rest,
 * listed blocked, until seq_act unblocks it (queued again in its place)
 * or skips it (the next is claimed). Usage: test_contract_sequences
 * [POSTGRES_URL]; spec/run passes the throwaway cluster's. Prints "N
 * passed, N failed". */
#include "contract.h"

typedef struct seq_seen {
    int     found, blocked;
    int64_t head;
    long    jobs;
} seq_seen;

static int
seq_cb(const jr_seq_row *r, void *arg)
{
    seq_seen *s = arg;

    if (strcmp(r->key, "s") == 0) {
        s->found = 1;
        s->blocked = r->blocked;
        s->head = r->head;
        s->jobs = r->jobs;
    }
    return 0;
}

static seq_seen
seq_of(jr_db *db, int blocked)
{
    seq_seen s = {0};
    jr_err e = {0};

    CHECK_OK(db->ops->sequences(db->b, blocked, 0, seq_cb, &s, &e), e);
    return s;
}

/* Claims at most 3 of c.seq; returns how many, the first's id in *id. */
static int
claim_seq(jr_db *db, int64_t *id)
{
    jr_job *j[3];
    int n = claim(db, "T", 30, "c.seq", j, 3);

    *id = n > 0 ? j[0]->id : 0;
    free_jobs(j, n);
    return n;
}

static void
end_as(jr_db *db, int64_t id, int kind)
{
    jr_result r;
    jr_err e = {0};

    memset(&r, 0, sizeof r);
    r.id = id;
    r.kind = kind;
    r.error = kind == JR_DEAD ? "gave up" : NULL;
    CHECK(db->ops->complete(db->b, "T", &r, 1, &e) == 1);
}

static void
test_sequence(void)
{
    jr_db db = conn();
    jr_push p = job("c.seq");
    int64_t id[3], got;
    jr_err e = {0};
    seq_seen s;
    int i;

    p.sequence = "s";
    for (i = 0; i < 3; i++)
        id[i] = push1(&db, p);
    s = seq_of(&db, 0);
    CHECK(s.found && !s.blocked && s.head == id[0] && s.jobs == 3);
    CHECK(claim_seq(&db, &got) == 1 && got == id[0]);
    CHECK(claim_seq(&db, &got) == 0);
    end_as(&db, id[0], JR_DONE);
    CHECK(claim_seq(&db, &got) == 1 && got == id[1]);
    end_as(&db, id[1], JR_DEAD);
    CHECK(claim_seq(&db, &got) == 0);
    s = seq_of(&db, 1);
    CHECK(s.found && s.blocked && s.head == id[1] && s.jobs == 1);
    CHECK(db.ops->seq_act(db.b, "s", JR_SEQ_ACT_UNBLOCK, &e) == 1);
    CHECK(claim_seq(&db, &got) == 1 && got == id[1]);
    end_as(&db, id[1], JR_DEAD);
    /* dead retry of the blocked job is an unblock too */
    CHECK(db.ops->dead_retry(db.b, &id[1], 1, &e) == 1);
    CHECK(claim_seq(&db, &got) == 1 && got == id[1]);
    end_as(&db, id[1], JR_DEAD);
    CHECK(claim_seq(&db, &got) == 0);
    CHECK(db.ops->seq_act(db.b, "s", JR_SEQ_ACT_SKIP, &e) == 1);
    CHECK(db.ops->seq_act(db.b, "s", JR_SEQ_ACT_SKIP, &e) == 0);
    CHECK(!seq_of(&db, 1).found);
    CHECK(claim_seq(&db, &got) == 1 && got == id[2]);
    end_as(&db, id[2], JR_DONE);
    CHECK(!seq_of(&db, 0).found);
    /* an empty key is refused naming the job */
    p.sequence = "";
    CHECK(jr_push_check(&p, 0, &e) < 0 && strstr(e.msg, "job 'c.seq'"));
    jr_db_close(&db);
}

static const check_test tests[] = {
    {"sequences: the head only, block, unblock, skip", test_sequence},
};

int
main(int argc, char **argv)
{
    return check_engines(argc, argv, tests, sizeof tests / sizeof tests[0],
                         "jrc_sequences");
}
