/* scheddef.h - a schedule managed at run time (docs/schedules.md,
 * "Schedules managed at run time"): its fields as a JSON object (the
 * config's schedule fields, name aside), read by the config's reader
 * (schedules.c) so that one check serves both; a change merged into a
 * definition. Uses schedules.h, err.h. */
#ifndef JR_SCHEDDEF_H
#define JR_SCHEDDEF_H

#include <stddef.h>

#include "config/schedules.h"

#define JR_SCHEDDEF_MAX  (1024 * 1024)  /* a definition's JSON at most */

/* Reads schedule name from def (JSON text) into out (a set of one;
 * free with jr_schedules_free), its zone defaulting to timezone (NULL:
 * UTC), its payload within max_payload. -1 with err set (JR_EINPUT):
 * "schedule 'NAME': 'FIELD' what is wrong". */
int jr_scheddef_read(const char *name, const char *def,
                     const char *timezone, size_t max_payload,
                     jr_schedules *out, jr_err *err);
/* Merges patch (a JSON object of fields; null removes one; cron and
 * every replace each other, a patch giving both is refused) into def,
 * schedule name's, into *out (malloc'd). -1 with err set. */
int jr_scheddef_merge(const char *name, const char *def, const char *patch,
                      char **out, jr_err *err);

#endif
