/* schedput.h - schedules managed at run time written and backfilled
 * (docs/schedules.md, "Schedules managed at run time"): the one path of
 * the CLI, the library, the Lua module and the HTTP API. A definition is
 * checked by the config's reader (scheddef.h) before the database sees
 * it; a name the config holds is refused. Uses scheddef.h, backend.h. */
#ifndef JR_SCHEDPUT_H
#define JR_SCHEDPUT_H

#include "config/scheddef.h"

struct jr_backend_ops;
struct jr_backend;

#define JR_BACKFILL_MAX 1000    /* fires one backfill pushes at most */

enum { JR_SCHEDPUT_ADD = 1, JR_SCHEDPUT_SET, JR_SCHEDPUT_REMOVE };

/* The config's side of a change: its schedules (NULL: unknown, as the
 * library's; those marked runtime are skipped, so the list a runner
 * follows will do), default zone and max_payload. */
typedef struct jr_schedput_cfg {
    const jr_schedules *schedules;
    const char         *timezone;
    size_t              max_payload;
} jr_schedput_cfg;

/* ADD: def (a JSON object of the fields) is schedule name's; SET: def's
 * fields change it (null removes one); REMOVE: def unused. -1 with err
 * set: JR_EINPUT for a bad name or field, a name the config holds (a
 * remove takes the run-time copy of a name in both), or an add of an
 * existing one; JR_ENOTFOUND for a set or a remove of none.
 * On success, *out (when not NULL) receives the definition written
 * (malloc'd; NULL for a remove). */
int  jr_schedput(const struct jr_backend_ops *ops, struct jr_backend *b,
                 const jr_schedput_cfg *cfg, int what, const char *name,
                 const char *def, char **out, jr_err *err);
/* Reads run-time schedule name's definition into *def (malloc'd). -1
 * with err set (JR_ENOTFOUND when there is none). */
int  jr_schedput_get(const struct jr_backend_ops *ops, struct jr_backend *b,
                     const char *name, char **def, jr_err *err);
/* Pushes each fire of schedule s at an instant in [from, to] (to not
 * after now) that has no fire record, once across runners and calls,
 * as backfill fires. Returns how many it pushed, -1 with err set (more
 * than JR_BACKFILL_MAX instants, from after to). */
long jr_schedput_backfill(const struct jr_backend_ops *ops,
                          struct jr_backend *b, const jr_schedule *s,
                          double from, double to, jr_err *err);
/* Finds schedule name: the config's (*s points into cfg), else the
 * run-time one read into own (free with jr_schedules_free). -1 with err
 * set (JR_ENOTFOUND). */
int  jr_schedput_find(const struct jr_backend_ops *ops, struct jr_backend *b,
                      const jr_schedput_cfg *cfg, const char *name,
                      jr_schedules *own, const jr_schedule **s, jr_err *err);

#endif
