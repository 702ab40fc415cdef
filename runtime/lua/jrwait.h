/* jrwait.h - the handler module's durable waits: jobrunner.wait_signal,
 * sleep_until and sleep_for (docs/handlers.md, "Signals and durable
 * sleep"). Uses jrlib.h. */
#ifndef JR_JRWAIT_H
#define JR_JRWAIT_H

typedef struct lua_State lua_State;

/* Sets the wait functions in the module table on top. [-0, +0, m] */
void jr_jrwait_register(lua_State *L);

#endif
