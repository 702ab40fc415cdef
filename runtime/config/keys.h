/* keys.h - the config's key table (keys.c): every top-level key of
 * jobrunner.lua, its type, range, default, words, one-line doc and
 * reader, and the readers its rows share (keyread.c). Uses config.h. */
#ifndef JR_KEYS_H
#define JR_KEYS_H

#include "config/config.h"

/* Sets the default of every plain key (a row of its own type: a number,
 * a string, true or false) in c.  */
void jr_keys_defaults(jr_config *c);

/* Reads the config table on top of L into c, key by key: an unknown key,
 * a wrong type or a value out of range is an error naming file:line
 * (found in text, the file's contents) and the key. Returns 0, or -1 with
 * err set (JR_ECONFIG). [-0, +0, -] */
int jr_keys_read(jr_config *c, lua_State *L, const char *file,
                 const char *text, jr_err *err);

typedef struct key_row key_row;

/* One reading of the config: the file, its text, the error, the row. */
typedef struct cfg_ctx {
    jr_config     *c;
    const char    *file;
    const char    *text;        /* file contents, to find a key's line */
    jr_err        *err;
    const key_row *row;         /* the row being read */
} cfg_ctx;

typedef int (*key_fn)(cfg_ctx *x, lua_State *L, const char *key);

/* How a plain key is read and stored (at its field in jr_config), or
 * K_FN: its own reader. */
typedef enum {
    K_FN,
    K_SECS,                     /* seconds in lo..hi, a double */
    K_PERIOD,                   /* seconds or a duration ("7d"), a double */
    K_INT,                      /* a whole number in lo..hi, an int */
    K_SIZE,                     /* bytes, a size_t */
    K_MIB,                      /* MiB, a size_t of bytes */
    K_LONG,                     /* a whole number, a long */
    K_STR,                      /* a string, a char * */
    K_BOOL                      /* true or false, an int */
} key_type;

/* A key of the config: one row, in the file's own units. The defaults
 * (jr_keys_defaults), the ranges the readers check, and the tables of
 * docs/configuration.md and jobrunner.lua.example come from these rows
 * (spec/example_config_spec.lua reads them). */
struct key_row {
    const char *key;
    key_type    type;
    size_t      off;            /* plain key: its field in jr_config */
    double      lo, hi;         /* its range; both 0: none */
    double      def;            /* its default; NONE: none or its own */
    const char *words;          /* the values it takes, as its error says */
    key_fn      fn;             /* K_FN: its reader */
    const char *doc;            /* one line */
};

/* keyread.c: the readers the rows of keys.c share. Each returns 0 (or
 * jr_key_word the index), or -1 with x->err set naming file:line and
 * key. The value read is at the top of L. */

/* The line where key is first assigned in the file, or 0. */
int jr_key_line(const cfg_ctx *x, const char *key);
__attribute__((format(printf, 3, 4)))
int jr_key_fail(cfg_ctx *x, const char *key, const char *fmt, ...);
/* A number of seconds in [lo, hi]. */
int jr_key_number(cfg_ctx *x, lua_State *L, const char *key, double lo,
                  double hi, double *out);
int jr_key_int(cfg_ctx *x, lua_State *L, const char *key, int lo, int hi,
               int *out);
int jr_key_string(cfg_ctx *x, lua_State *L, const char *key, char **out);
/* A key of enum words: the index of the value in list (NULL-ended), or
 * the row's words as its error. */
int jr_key_word(cfg_ctx *x, lua_State *L, const char *key,
                const char *const *list);
/* Walks the table at the top of L, calling the row for each key (a plain
 * key read by its row's type); unknown keys are errors listing the valid
 * ones. prefix is "" or "defaults.". */
int jr_key_walk(cfg_ctx *x, lua_State *L, const key_row *rows,
                const char *prefix);
/* The table at the top of L and the tables in it are plain: no metatable
 * and no string holding a NUL byte. path names it ("" at the top).
 * [-0, +0, m] */
int jr_key_plain(cfg_ctx *x, lua_State *L, const char *path, int depth);

#endif
