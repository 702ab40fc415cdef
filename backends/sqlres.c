/* sqlres.c - a job's statements around the engines' completions
 * (sqlres.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlres.h"
#include "base/sqlstmt.h"

int
jr_sqlres_any(const jr_result *r, int n)
{
    int i;

    for (i = 0; i < n; i++)
        if (r[i].kind == JR_DONE && r[i].nsql > 0)
            return 1;
    return 0;
}

void
jr_sqlres_clear(const jr_result *r, int n)
{
    int i;

    for (i = 0; i < n; i++)
        if (r[i].kind == JR_DONE && r[i].nsql > 0)
            r[i].sql_error[0] = '\0';
}

jr_result *
jr_sqlres_copy(const jr_result *r, int n)
{
    jr_result *c = malloc((size_t)(n > 0 ? n : 1) * sizeof *c);

    int i;

    if (c != NULL && n > 0)
        memcpy(c, r, (size_t)n * sizeof *c);
    for (i = 0; c != NULL && i < n; i++)
        if (c[i].kind == JR_DONE && c[i].nsql > 0)
            c[i].sql_error[0] = '\0';  /* a batch tried again: afresh */
    return c;
}

void
jr_sqlres_fail(jr_result *r, int index, const char *why)
{
    snprintf(r->sql_error, JR_SQL_ERR_MAX, "jobrunner.sql statement %d of "
             "'%.128s' failed: %s", index, r->sql_handler ? r->sql_handler :
             "", why);
    r->kind = r->sql_kind == JR_DEAD ? JR_DEAD : JR_RETRY;
    r->delay = r->kind == JR_RETRY && r->sql_delay > 0 ? r->sql_delay : 0;
    r->error = r->sql_error;
    r->pushes = NULL;
    r->npushes = 0;
    r->result = NULL;
}
