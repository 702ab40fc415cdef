/* stmtmap.h - a connection's prepared statements, keyed by the address of
 * the statement's own static definition (SQLite: its sql_text[] entry;
 * PostgreSQL: its pg_stmt), so that a statement lives in the file that
 * runs it alone, with no number in a shared list. An open-addressing
 * table of pointers that doubles when half full; the engines' private
 * headers hold one in struct jr_backend. Uses nothing. */
#ifndef JR_STMTMAP_H
#define JR_STMTMAP_H

#include <stdint.h>
#include <stdlib.h>

typedef struct jr_stmtmap {
    const void **key;           /* NULL: a free slot */
    void       **val;           /* the engine's handle (never NULL) */
    unsigned     cap;           /* a power of two, or 0 */
    unsigned     n;             /* slots in use */
} jr_stmtmap;

static inline unsigned
jr_stmtmap_slot(const jr_stmtmap *m, const void *key)
{
    uint64_t h = (uint64_t)(uintptr_t)key * 0x9E3779B97F4A7C15ull;

    return (unsigned)(h >> 32) & (m->cap - 1);
}

/* The value stored for key, or NULL. */
static inline void *
jr_stmtmap_get(const jr_stmtmap *m, const void *key)
{
    unsigned i;

    if (m->cap == 0)
        return NULL;
    for (i = jr_stmtmap_slot(m, key); m->key[i] != NULL;
         i = (i + 1) & (m->cap - 1))
        if (m->key[i] == key)
            return m->val[i];
    return NULL;
}

/* Makes room for one more key: 0, or -1 when out of memory (then m is
 * as it was). */
static inline int
jr_stmtmap_room(jr_stmtmap *m)
{
    jr_stmtmap g = {NULL, NULL, m->cap ? m->cap * 2 : 64, 0};
    unsigned i, j;

    if ((m->n + 1) * 2 <= m->cap)
        return 0;
    g.key = calloc(g.cap, sizeof *g.key);
    g.val = calloc(g.cap, sizeof *g.val);
    if (g.key == NULL || g.val == NULL) {
        free(g.key);
        free(g.val);
        return -1;
    }
    for (i = 0; i < m->cap; i++) {
        if (m->key[i] == NULL)
            continue;
        for (j = jr_stmtmap_slot(&g, m->key[i]); g.key[j] != NULL;
             j = (j + 1) & (g.cap - 1))
            ;
        g.key[j] = m->key[i];
        g.val[j] = m->val[i];
        g.n++;
    }
    free(m->key);
    free(m->val);
    *m = g;
    return 0;
}

/* Stores val (not NULL) for key, new or not. 0, or -1 when out of
 * memory (then m is as it was); after jr_stmtmap_room, 0 always. */
static inline int
jr_stmtmap_put(jr_stmtmap *m, const void *key, void *val)
{
    unsigned i;

    if (jr_stmtmap_room(m) < 0)
        return -1;
    for (i = jr_stmtmap_slot(m, key); m->key[i] != NULL;
         i = (i + 1) & (m->cap - 1))
        if (m->key[i] == key) {
            m->val[i] = val;
            return 0;
        }
    m->key[i] = key;
    m->val[i] = val;
    m->n++;
    return 0;
}

/* Forgets every key, keeping the table's memory. */
static inline void
jr_stmtmap_clear(jr_stmtmap *m)
{
    unsigned i;

    for (i = 0; i < m->cap; i++)
        m->key[i] = NULL;
    m->n = 0;
}

/* Frees the table (the values are the caller's); m is empty after. */
static inline void
jr_stmtmap_free(jr_stmtmap *m)
{
    free(m->key);
    free(m->val);
    *m = (jr_stmtmap){0};
}

#endif
