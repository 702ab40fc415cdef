/* commands.h - the subcommands of the jobrunner binary, one function each,
 * called by main.c with the parsed common options, and what the command
 * files share. Owns the exit statuses. commands.c holds run, push, check,
 * migrate, reload and the workers' entry; inspect.c stats and dead;
 * control.c cancel, show and list; waitcmd.c wait; help.c help. They use config.h, the
 * client library (jobrunner.h) for push, stats and dead, backend.h for
 * migrate, master.h for run, worker.h for the workers. */
#ifndef JR_COMMANDS_H
#define JR_COMMANDS_H

#include "base/version.h"
#include "config/config.h"
#include "client/jobrunner.h"

/* Exit statuses, documented in --help. */
enum {
    JR_EXIT_OK = 0,
    JR_EXIT_FAIL = 1,           /* runtime or database failure */
    JR_EXIT_USAGE = 2,          /* bad command line or bad input */
    JR_EXIT_CONFIG = 3,         /* config or handler errors */
    JR_EXIT_NODB = 4,           /* a reader found no database */
    JR_EXIT_NOTFOUND = 5        /* show, cancel: no job with that id */
};

typedef struct jr_cli {
    const char  *config;        /* -c FILE, or NULL */
    const char  *backend;       /* --backend URL, or NULL */
    const char  *scripts;       /* --scripts DIR, or NULL */
    const char  *self;          /* path of this binary */
    int          argc;          /* what follows the subcommand, without */
    char       **argv;          /* its first "--" */
    int          optend;        /* argv[optend..argc) followed "--": names
                                   or ids, even if they start with '-' */
} jr_cli;

typedef int (*jr_command_fn)(jr_cli *cli);

int jr_cmd_run(jr_cli *cli);
int jr_cmd_push(jr_cli *cli);
int jr_cmd_stats(jr_cli *cli);
int jr_cmd_dead(jr_cli *cli);
int jr_cmd_check(jr_cli *cli);
int jr_cmd_migrate(jr_cli *cli);
int jr_cmd_reload(jr_cli *cli);
int jr_cmd_worker(jr_cli *cli);
int jr_cmd_queue(jr_cli *cli);          /* queuecmd.c */
int jr_cmd_cancel(jr_cli *cli);         /* control.c */
int jr_cmd_rerun(jr_cli *cli);          /* rerun.c */
int jr_cmd_show(jr_cli *cli);
int jr_cmd_list(jr_cli *cli);
int jr_cmd_wait(jr_cli *cli);           /* waitcmd.c */
int jr_cmd_limits(jr_cli *cli);         /* limitscmd.c */
int jr_cmd_push_flow(jr_cli *cli);      /* flowcmd.c */
int jr_cmd_sequences(jr_cli *cli);      /* seqcmd.c */
int jr_cmd_fair(jr_cli *cli);           /* faircmd.c */
int jr_cmd_keys(jr_cli *cli);           /* keyscmd.c */
int jr_cmd_batch(jr_cli *cli);
int jr_cmd_signal(jr_cli *cli);         /* signalcmd.c */
/* show ID --logs [--attempt N] (logscmd.c): the job's kept logs, those
 * of attempt N when attempt > 0, as text or JSON. */
int jr_cmd_show_logs(struct jr_client *client, int64_t id, int attempt,
                     int json);
/* cancel --batch ID (argv[0] is "--batch") */
int jr_cmd_cancel_batch(jr_cli *cli);
/* Job id's links (parents, children, batch) in a new string (free it),
 * NULL on failure; jr_cmd_links_print writes them as show does, as text
 * lines or as JSON members (",\"parents\":[...]..."). */
char *jr_cmd_links(struct jr_client *client, int64_t id);
void jr_cmd_links_print(const char *links, int json);
/* help.c: `help [TOPIC]`, the arguments after "help"; where the
 * manual's chapter on TOPIC is, or the list of topics. */
int jr_cmd_help(int argc, char **argv);

/* For the command files (commands.c, inspect.c). Each error is said in
 * one line on stderr, "jobrunner: ..."; each returns the exit status. */

int jr_cmd_die(int status, const char *msg);    /* returns status */
/* A bad command line, with a pointer to --help: JR_EXIT_USAGE. */
int jr_cmd_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A single-valued option opt at argv[i] must not stand among
 * argv[0..i) (a value equal to opt may: a false alarm refused, never a
 * repeat taken). Returns 0, or -1 after saying so (JR_EXIT_USAGE). */
int jr_cmd_once(const char *cmd, const char *opt, char **argv, int i);
/* Loads the config: defaults, then the file, then the command line.
 * Returns 0 (free c with jr_config_free), or the exit status. */
int jr_cmd_config(jr_cli *cli, jr_config *c);
/* Opens the producer library on c's backend; a reader (jr_cmd_reader)
 * opens an existing database only and gets JR_EXIT_NODB when there is
 * none. Returns 0 and *client, or the exit status. */
int jr_cmd_client(jr_config *c, jr_client **client);
int jr_cmd_reader(jr_config *c, jr_client **client);
/* A reader with the config's key file, whose encrypted values it shows
 * decrypted (show). */
int jr_cmd_reader_keyed(jr_config *c, jr_client **client);
/* Opens c's database for a command that reads the storage itself
 * (limits, schedules): an existing database only, creating nothing,
 * migrated. Returns 0, or the exit status after saying why: JR_EXIT_NODB,
 * naming it, when there is none (quiet: then nothing is said). db is
 * closed on failure. */
typedef struct jr_db jr_db;     /* a connection (backend.h) */
int jr_cmd_open_reader(const jr_config *c, jr_db *db, int quiet);
/* fairstats.c: stats' fair queues (",\"fair\":{...}" with json); 0 or
 * the exit status after saying why. */
int jr_cmd_stats_fair(const jr_config *c, int json);
/* agestats.c: the aging queues of c in stats (text, or ",\"aging\":{...}"
 * into the JSON object); an exit status. */
int jr_cmd_stats_aging(const jr_config *c, int json);
/* Says the client's error; JR_EXIT_USAGE for bad input, else
 * JR_EXIT_FAIL. */
int jr_cmd_client_fail(jr_client *client);

#endif
