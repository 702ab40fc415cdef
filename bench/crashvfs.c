/*
 * crashvfs.c - a test-only SQLite VFS that makes power cuts and I/O errors
 * reproducible (bench/crash, spec/crash_spec.lua). Never linked into
 * jobrunner: built as build/bench/crashvfs.so and injected with LD_PRELOAD
 * into the processes of a test (the runner, its workers, the producers and
 * the sqlite3 shell); its sqlite3_open_v2 registers the VFS "crash" over the
 * default one (unix) and makes it the default.
 *
 * Power cuts. Every write goes through to the real file (so the processes
 * see what a kernel page cache would show them), but first the pre-image
 * of each 512-byte chunk it touches is appended to a side log, FILE-cvlog,
 * opened O_APPEND and shared by every process writing FILE (the kernel
 * keeps one page cache per file, not per descriptor). A successful xSync
 * empties the log and records the file's size: what is synced is on the
 * platter. The log's records (native byte order):
 *
 *   'S' u64 size            the size at the last sync (first record)
 *   'N' u64 0               the file was created since: its directory entry
 *                           is not durable before its first sync
 *   'W' u64 offset u32 len  then len bytes: the content before a write (or
 *                           a truncation) of [offset, offset+len)
 *
 * A write holds a shared flock on the log from its record to the real
 * write, a sync an exclusive one from the real sync to the log's reset,
 * so a sync never forgets a write it did not cover. After every process is
 * killed, bench/crash (spec/helpers/crashcut.lua) applies the cut to each
 * log: "drop" restores every chunk's oldest pre-image and the synced size;
 * "torn" keeps a random subset of the unsynced chunks (SQLite's own crash
 * tests, src/test6.c, do the same by sector) and fills dropped chunks past
 * the synced size with garbage. Deletions are taken as durable (SQLite
 * deletes a WAL only after checkpointing and syncing its content).
 *
 * I/O errors. CRASHVFS_FAULTS names a control file holding one line
 * "OP ERRNO MODE [MATCH]": OP read, write or sync; ERRNO EIO or ENOSPC;
 * MODE "once" (the first matching call fails and empties the file) or
 * "on" (every matching call fails until the file is emptied); MATCH a
 * substring of the file's path. Each failure is appended to CONTROL.log
 * ("pid OP ERRNO path"). EIO fails a write with SQLITE_IOERR_WRITE, a sync
 * with SQLITE_IOERR_FSYNC, a read with SQLITE_IOERR_READ; ENOSPC fails a
 * write or a sync with SQLITE_FULL.
 *
 * Uses only sqlite3's VFS interface and POSIX.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sys/file.h>
#include <unistd.h>

#define CHUNK 512

typedef struct {
    sqlite3_file base;
    int          logfd;         /* -1: an untracked (temporary) file */
    const char  *path;
    sqlite3_file *real;         /* follows this struct */
} crash_file;

static sqlite3_vfs crash_vfs;
static sqlite3_vfs *real_vfs;

/* ---- the fault control file -------------------------------------------- */

enum { OP_READ, OP_WRITE, OP_SYNC };
static const char *const op_names[] = { "read", "write", "sync" };

static int
fault_rc(int op, int enospc)
{
    if (enospc && op != OP_READ)
        return SQLITE_FULL;
    return op == OP_READ ? SQLITE_IOERR_READ :
           op == OP_WRITE ? SQLITE_IOERR_WRITE : SQLITE_IOERR_FSYNC;
}

static void
fault_note(const char *ctl, int op, const char *err, const char *path)
{
    char logp[4096], line[4200];
    int fd, n;

    snprintf(logp, sizeof logp, "%s.log", ctl);
    fd = open(logp, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0)
        return;
    n = snprintf(line, sizeof line, "%ld %s %s %s\n", (long)getpid(),
                 op_names[op], err, path);
    if (write(fd, line, (size_t)n) < 0) { /* a note: best effort */ }
    close(fd);
}

/* Whether call op on path must fail now; its SQLite code in *rc. */
static int
fault_check(int op, const char *path, int *rc)
{
    const char *ctl = getenv("CRASHVFS_FAULTS");
    char buf[512], o[16], e[16], mode[16], match[400];
    int fd, n, fire = 0;

    if (ctl == NULL || (fd = open(ctl, O_RDWR)) < 0)
        return 0;
    n = (int)pread(fd, buf, sizeof buf - 1, 0);
    if (n > 0) {
        buf[n] = '\0';
        match[0] = '\0';
        if (sscanf(buf, "%15s %15s %15s %399s", o, e, mode, match) >= 3 &&
            strcmp(o, op_names[op]) == 0 && strstr(path, match) != NULL) {
            fire = 1;
            if (strcmp(mode, "once") == 0) {   /* one process takes it */
                flock(fd, LOCK_EX);
                fire = pread(fd, buf, 1, 0) == 1 && ftruncate(fd, 0) == 0;
                flock(fd, LOCK_UN);
            }
        }
    }
    close(fd);
    if (!fire)
        return 0;
    errno = strcmp(e, "ENOSPC") == 0 ? ENOSPC : EIO;
    *rc = fault_rc(op, errno == ENOSPC);
    fault_note(ctl, op, e, path);
    return 1;
}

/* ---- the pre-image log --------------------------------------------------- */

static void
log_put(int fd, char tag, uint64_t a, const void *data, uint32_t len)
{
    char hdr[1 + 8 + 4];
    char *rec = malloc(sizeof hdr + len);

    if (rec == NULL)
        abort();                /* a test tool: never lose a record */
    hdr[0] = tag;
    memcpy(hdr + 1, &a, 8);
    memcpy(hdr + 9, &len, 4);
    memcpy(rec, hdr, sizeof hdr);
    if (len)
        memcpy(rec + sizeof hdr, data, len);
    /* one write(): O_APPEND keeps concurrent records whole */
    if (write(fd, rec, sizeof hdr + len) != (ssize_t)(sizeof hdr + len))
        abort();
    free(rec);
}

/* Logs the current content of [from, to) (clipped to the file's size). */
static int
log_preimage(crash_file *f, sqlite3_int64 from, sqlite3_int64 to)
{
    sqlite3_int64 size, off;
    char buf[CHUNK];
    int rc;

    if ((rc = f->real->pMethods->xFileSize(f->real, &size)) != SQLITE_OK)
        return rc;
    if (to > size)
        to = size;
    for (off = from - from % CHUNK; off < to; off += CHUNK) {
        int n = (int)(off + CHUNK <= size ? CHUNK : size - off);
        rc = f->real->pMethods->xRead(f->real, buf, n, off);
        if (rc != SQLITE_OK)
            return rc;
        log_put(f->logfd, 'W', (uint64_t)off, buf, (uint32_t)n);
    }
    return SQLITE_OK;
}

/* ---- the file methods ------------------------------------------------------ */

static int
c_close(sqlite3_file *pf)
{
    crash_file *f = (crash_file *)pf;
    int rc = f->real->pMethods->xClose(f->real);

    if (f->logfd >= 0)
        close(f->logfd);
    return rc;
}

static int
c_read(sqlite3_file *pf, void *buf, int amt, sqlite3_int64 off)
{
    crash_file *f = (crash_file *)pf;
    int rc;

    if (f->logfd >= 0 && fault_check(OP_READ, f->path, &rc))
        return rc;
    return f->real->pMethods->xRead(f->real, buf, amt, off);
}

static int
c_write(sqlite3_file *pf, const void *buf, int amt, sqlite3_int64 off)
{
    crash_file *f = (crash_file *)pf;
    int rc;

    if (f->logfd < 0)
        return f->real->pMethods->xWrite(f->real, buf, amt, off);
    if (fault_check(OP_WRITE, f->path, &rc))
        return rc;
    flock(f->logfd, LOCK_SH);
    rc = log_preimage(f, off, off + amt);
    if (rc == SQLITE_OK)
        rc = f->real->pMethods->xWrite(f->real, buf, amt, off);
    flock(f->logfd, LOCK_UN);
    return rc;
}

static int
c_truncate(sqlite3_file *pf, sqlite3_int64 size)
{
    crash_file *f = (crash_file *)pf;
    int rc;

    if (f->logfd < 0)
        return f->real->pMethods->xTruncate(f->real, size);
    flock(f->logfd, LOCK_SH);
    rc = log_preimage(f, size, INT64_MAX);
    if (rc == SQLITE_OK)
        rc = f->real->pMethods->xTruncate(f->real, size);
    flock(f->logfd, LOCK_UN);
    return rc;
}

static int
c_sync(sqlite3_file *pf, int flags)
{
    crash_file *f = (crash_file *)pf;
    sqlite3_int64 size;
    int rc;

    if (f->logfd < 0)
        return f->real->pMethods->xSync(f->real, flags);
    if (fault_check(OP_SYNC, f->path, &rc))
        return rc;
    flock(f->logfd, LOCK_EX);
    rc = f->real->pMethods->xSync(f->real, flags);
    if (rc == SQLITE_OK &&
        (rc = f->real->pMethods->xFileSize(f->real, &size)) == SQLITE_OK) {
        if (ftruncate(f->logfd, 0) != 0)
            abort();
        log_put(f->logfd, 'S', (uint64_t)size, NULL, 0);
    }
    flock(f->logfd, LOCK_UN);
    return rc;
}

#define PASS(name, proto, args) \
    static int c_##name proto { \
        crash_file *f = (crash_file *)pf; \
        return f->real->pMethods->x##name args; }

PASS(FileSize, (sqlite3_file *pf, sqlite3_int64 *p), (f->real, p))
PASS(Lock, (sqlite3_file *pf, int l), (f->real, l))
PASS(Unlock, (sqlite3_file *pf, int l), (f->real, l))
PASS(CheckReservedLock, (sqlite3_file *pf, int *p), (f->real, p))
PASS(FileControl, (sqlite3_file *pf, int op, void *a), (f->real, op, a))
PASS(SectorSize, (sqlite3_file *pf), (f->real))
PASS(DeviceCharacteristics, (sqlite3_file *pf), (f->real))
PASS(ShmMap, (sqlite3_file *pf, int i, int sz, int e, void volatile **pp),
     (f->real, i, sz, e, pp))
PASS(ShmLock, (sqlite3_file *pf, int o, int n, int fl), (f->real, o, n, fl))
PASS(ShmUnmap, (sqlite3_file *pf, int d), (f->real, d))
PASS(Fetch, (sqlite3_file *pf, sqlite3_int64 o, int n, void **pp),
     (f->real, o, n, pp))
PASS(Unfetch, (sqlite3_file *pf, sqlite3_int64 o, void *p), (f->real, o, p))

static void
c_ShmBarrier(sqlite3_file *pf)
{
    crash_file *f = (crash_file *)pf;
    f->real->pMethods->xShmBarrier(f->real);
}

static const sqlite3_io_methods crash_methods = {
    3, c_close, c_read, c_write, c_truncate, c_sync, c_FileSize, c_Lock,
    c_Unlock, c_CheckReservedLock, c_FileControl, c_SectorSize,
    c_DeviceCharacteristics, c_ShmMap, c_ShmLock, c_ShmBarrier, c_ShmUnmap,
    c_Fetch, c_Unfetch,
};

/* ---- the VFS ---------------------------------------------------------------- */

/* Opens (or makes, whole, by link()) the log of path; -1 on failure. */
static int
log_open(crash_file *f, const char *path, int existed)
{
    char lp[4200], tmp[4300];
    sqlite3_int64 size = 0;
    int fd;

    snprintf(lp, sizeof lp, "%s-cvlog", path);
    if ((fd = open(lp, O_WRONLY | O_APPEND)) >= 0)
        return fd;
    snprintf(tmp, sizeof tmp, "%s.%ld", lp, (long)getpid());
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644)) < 0)
        return -1;
    f->real->pMethods->xFileSize(f->real, &size);
    log_put(fd, 'S', (uint64_t)size, NULL, 0);
    if (!existed)
        log_put(fd, 'N', 0, NULL, 0);
    close(fd);
    if (link(tmp, lp) != 0 && errno != EEXIST) {
        unlink(tmp);
        return -1;
    }
    unlink(tmp);
    return open(lp, O_WRONLY | O_APPEND);
}

static int
c_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *pf, int flags,
       int *out)
{
    crash_file *f = (crash_file *)pf;
    int tracked, existed, rc;

    (void)vfs;
    memset(f, 0, sizeof *f);
    f->real = (sqlite3_file *)(f + 1);
    f->logfd = -1;
    tracked = name != NULL && !(flags & SQLITE_OPEN_DELETEONCLOSE) &&
              (flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_WAL |
                        SQLITE_OPEN_MAIN_JOURNAL));
    existed = name != NULL && access(name, F_OK) == 0;
    rc = real_vfs->xOpen(real_vfs, name, f->real, flags, out);
    if (rc != SQLITE_OK)
        return rc;
    pf->pMethods = &crash_methods;
    if (tracked) {
        f->path = name;         /* SQLite keeps it until xClose */
        if ((f->logfd = log_open(f, name, existed)) < 0) {
            f->real->pMethods->xClose(f->real);
            pf->pMethods = NULL;
            return SQLITE_CANTOPEN;
        }
    }
    return SQLITE_OK;
}

static int
c_delete(sqlite3_vfs *vfs, const char *name, int dirsync)
{
    char lp[4200];
    int rc = real_vfs->xDelete(real_vfs, name, dirsync);

    (void)vfs;
    snprintf(lp, sizeof lp, "%s-cvlog", name);
    unlink(lp);
    return rc;
}

static void
register_once(void)
{
    real_vfs = sqlite3_vfs_find(NULL);
    if (real_vfs == NULL)
        return;
    crash_vfs = *real_vfs;
    crash_vfs.zName = "crash";
    crash_vfs.szOsFile = (int)sizeof(crash_file) + real_vfs->szOsFile;
    crash_vfs.xOpen = c_open;
    crash_vfs.xDelete = c_delete;
    crash_vfs.pAppData = NULL;
    crash_vfs.pNext = NULL;
    sqlite3_vfs_register(&crash_vfs, 1);
}

/* Registers "crash" as the default VFS, at the first open: not from a
 * constructor, which would initialize SQLite before a program's own
 * sqlite3_config() calls (the sqlite3 shell makes some). */
static void
crashvfs_register(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    pthread_once(&once, register_once);
}

typedef int open_v2_fn(const char *, sqlite3 **, int, const char *);
typedef int open_fn(const char *, sqlite3 **);

/* The entry points a program opens a database with, interposed by
 * LD_PRELOAD: register, then call SQLite's own. */
int
sqlite3_open_v2(const char *name, sqlite3 **db, int flags, const char *vfs)
{
    static open_v2_fn *next;

    crashvfs_register();
    if (next == NULL)
        *(void **)&next = dlsym(RTLD_NEXT, "sqlite3_open_v2");
    return next(name, db, flags, vfs);
}

int
sqlite3_open(const char *name, sqlite3 **db)
{
    static open_fn *next;

    crashvfs_register();
    if (next == NULL)
        *(void **)&next = dlsym(RTLD_NEXT, "sqlite3_open");
    return next(name, db);
}
