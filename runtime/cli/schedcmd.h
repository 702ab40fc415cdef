/* schedcmd.h - the `schedules` command and check's schedule warnings
 * (schedcmd.c). Uses commands.h, config.h, job.h. */
#ifndef JR_SCHEDCMD_H
#define JR_SCHEDCMD_H

#include "cli/commands.h"
#include "config/config.h"
#include "base/job.h"

/* jobrunner schedules [--json] */
int jr_cmd_schedules(jr_cli *cli);
/* jobrunner schedule list|pause|resume|fire NAME [--at TIME]
 * (schedctl.c) */
int jr_cmd_schedule(jr_cli *cli);
/* schedrt.c: `schedule add|set|remove|backfill NAME ...`, argv[0] the
 * subcommand: schedules managed at run time. */
int jr_cmd_schedule_rt(jr_cli *cli);
/* Prints to stderr a warning, with the config's file:line, for each
 * schedule of c that never fires (a cron no date matches) and each whose
 * job is not among the handlers h[0..n). Returns how many. */
int jr_schedcmd_warn(const jr_config *c, const jr_handler *h, int n);

#endif
