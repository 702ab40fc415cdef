/* fairlua.h - jobrunner.fair in the config's state (fairlua.c): a job
 * name's fair weights from a hook. */
#ifndef JR_FAIRLUA_H
#define JR_FAIRLUA_H

struct master;

/* Puts "jobrunner.fair" (set_name) in the config's state. */
void jr_fairlua_open(struct master *m);

#endif
