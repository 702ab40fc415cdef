/* dbcalls.c - the backend calls of dbcalls.h: one op each, so that no
 * file of master/ or services/ names backend.h. Uses dbcalls.h,
 * backend.h. */
#include "db/dbcalls.h"
#include "backend.h"

int
jr_dbcall_complete_claim(jr_db *db, const char *token, const jr_result *r,
                         int nr, int *applied, double lease,
                         const char *const *names, int nnames, int max,
                         jr_job **out, jr_err *err)
{
    jr_claim_spec spec = {.names = names, .nnames = nnames, .max = max,
                          .others = max};

    return db->ops->complete_claim(db->b, token, r, nr, applied, lease,
                                   &spec, out, err);
}

/* What jr_dbcall_queued walks with: the caller's function and argument. */
typedef struct queued_walk {
    jr_dbcall_queued_cb cb;
    void               *arg;
} queued_walk;

static int
queued_row(const jr_stat_row *row, void *arg)
{
    queued_walk *w = arg;

    return w->cb(row->name, row->n[JR_STATE_QUEUED], w->arg);
}

int
jr_dbcall_queued(jr_db *db, jr_dbcall_queued_cb cb, void *arg, jr_err *err)
{
    queued_walk w = {cb, arg};

    return db->ops->stats(db->b, queued_row, &w, err);
}

int
jr_dbcall_vacuum(jr_db *db, jr_err *err)
{
    return db->ops->vacuum(db->b, err);
}

int
jr_dbcall_can_vacuum(const jr_db *db)
{
    return db->ops->vacuum != NULL;
}
