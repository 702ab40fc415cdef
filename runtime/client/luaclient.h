/* luaclient.h - what the producer module's two files share: the handle's
 * box and metatable name, the handle check, the nil-and-message return
 * (luaclient.c), and the control methods (luacontrol.c). Uses
 * jobrunner.h, err.h. */
#ifndef JR_LUACLIENT_H
#define JR_LUACLIENT_H

#include <lua.h>

#include "base/err.h"
#include "client/jobrunner.h"

#define JR_CLIENT_MT "jobrunner.client"

typedef struct client_box {
    jr_client *c;               /* NULL once closed */
} client_box;

/* The open client at argument 1, or raises.  [-0, +0, v] */
jr_client *jr_luaclient_check(lua_State *L);
/* Returns nil, msg.  [-0, +2, m] */
int jr_luaclient_fail(lua_State *L, const char *msg);
/* The schedule name at argument idx (a string, else raises); NULL with
 * the message in err when it is not a valid name, a NUL byte inside
 * included (C would see a shorter name: another schedule).  [-0, +0, v] */
const char *jr_luaclient_schedule_name(lua_State *L, int idx, jr_err *err);

/* luacontrol.c: q:cancel, q:show, q:list, q:pause, q:resume, q:queues */
int jr_luaclient_cancel(lua_State *L);
int jr_luaclient_show(lua_State *L);
int jr_luaclient_list(lua_State *L);
int jr_luaclient_pause(lua_State *L);
int jr_luaclient_resume(lua_State *L);
int jr_luaclient_queues(lua_State *L);
int jr_luaclient_wait(lua_State *L);
/* luaflow.c: q:flow, q:batch */
int jr_luaclient_flow(lua_State *L);
int jr_luaclient_batch(lua_State *L);
/* luacontrol.c: q:schedule_pause, q:schedule_resume, q:schedule_fire */
int jr_luaclient_schedule_pause(lua_State *L);
int jr_luaclient_schedule_resume(lua_State *L);
int jr_luaclient_schedule_fire(lua_State *L);
/* luaschedrt.c: q:schedule_add, _set, _remove, _backfill */
int jr_luaclient_schedule_add(lua_State *L);
int jr_luaclient_schedule_set(lua_State *L);
int jr_luaclient_schedule_remove(lua_State *L);
int jr_luaclient_schedule_backfill(lua_State *L);
/* luacontrol.c: q:signal */
int jr_luaclient_signal(lua_State *L);

#endif
