/* commands.h - the subcommands of the jobrunner binary, one function each,
 * called by main.c with the parsed common options. Owns the exit statuses
 * and the version. commands.c uses config.h, the client library
 * (jobrunner.h) for push, stats and dead, backend.h for migrate, master.h
 * for run, worker.h for the workers. */
#ifndef JR_COMMANDS_H
#define JR_COMMANDS_H

#define JR_VERSION "0.1.0"

/* Exit statuses, documented in --help. */
enum {
    JR_EXIT_OK = 0,
    JR_EXIT_FAIL = 1,           /* runtime or database failure */
    JR_EXIT_USAGE = 2,          /* bad command line or bad input */
    JR_EXIT_CONFIG = 3,         /* config or handler errors */
    JR_EXIT_NODB = 4            /* a reader found no database */
};

typedef struct jr_cli {
    const char  *config;        /* -c FILE, or NULL */
    const char  *backend;       /* --backend URL, or NULL */
    const char  *scripts;       /* --scripts DIR, or NULL */
    const char  *self;          /* path of this binary */
    int          argc;          /* what follows the subcommand */
    char       **argv;
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

#endif
