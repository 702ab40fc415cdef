/* dbcalls.c - the backend calls of dbcalls.h: one line each, so that no
 * file of master/ or services/ names backend.h. Uses dbcalls.h. */
#include "db/dbcalls.h"

int
jr_dbcall_complete_claim(jr_db *db, const char *token, const jr_result *r,
                         int nr, int *applied, double lease,
                         const jr_claim_spec *spec, jr_job **out, jr_err *err)
{
    return db->ops->complete_claim(db->b, token, r, nr, applied, lease, spec,
                                   out, err);
}

int
jr_dbcall_stats(jr_db *db, jr_stat_cb cb, void *arg, jr_err *err)
{
    return db->ops->stats(db->b, cb, arg, err);
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
