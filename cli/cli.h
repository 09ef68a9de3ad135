/* cli.h — the `kiln` command: one function per subcommand, shared argument parsing. Prefix cli_.
 * Every subcommand returns the process exit status: 0 ok, 1 error (one line "kiln: ..." on stderr),
 * 2 usage error.
 */
#ifndef KILN_CLI_H
#define KILN_CLI_H

#include "frontend/fe.h"
#include "kiln.h"
#include "rt_tunedb.h"

enum { CLI_MAX_SETS = 64, CLI_MAX_TARGETS = 8 };

typedef struct CliArgs {
    const char *input;  /* recipe or package path */
    const char *output; /* -o */
    const char *model;  /* --model */
    const char *sets[CLI_MAX_SETS];
    int n_sets;
    const char *targets[CLI_MAX_TARGETS]; /* --target, repeatable or comma-separated */
    int n_targets;
    const char *dump_after; /* --dump-after=PASS */
    int verbose, locs, raw;
    int jobs;        /* -j: compile threads (0: all CPUs) */
    int emit_source; /* --emit source: binaries are the backends' generated source (CgDriverOptions.source) */
    const char
        *cache_dir; /* kernel cache: --cache-dir, else $KILN_CACHE_DIR, else ~/.cache/kiln; NULL: off */
    char cache_buf[1024];
} CliArgs;

/* Parses argv (after the subcommand name). Returns 0, or 2 after printing a usage error. */
int cli_parse(int argc, char **argv, CliArgs *a, const char *cmd);
void cli_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Prints "kiln CMD: FLAG wants a non-empty value" and returns 2. Every option that takes a text refuses
 * "": an empty --device filter would select every row, an empty --db would fall back to the default store. */
int cli_empty_error(const char *cmd, const char *flag);

/* The single-valued options a parser has seen: given twice, one would silently win, so the second is
 * refused. cli_seen returns 0 the first time flag (its canonical spelling: "--model" for "--model=X")
 * is seen, else 2 after printing "kiln CMD: FLAG given more than once". */
typedef struct CliSeen {
    const char *flags[32];
    int n;
} CliSeen;
int cli_seen(CliSeen *s, const char *cmd, const char *flag);

int cli_compile(const CliArgs *a);
int cli_ir(const CliArgs *a);
int cli_models(const CliArgs *a);
int cli_inspect(const CliArgs *a);
int cli_kernels(const CliArgs *a);
/* `kiln run`: parses its own options (argv after "run"). */
int cli_run(int argc, char **argv);
/* `kiln serve`: parses its own options (argv after "serve"); docs/SERVER.md. */
int cli_serve(int argc, char **argv);
/* `kiln tokenize FILE`: text on stdin to ids (or --decode). */
int cli_tokenize(int argc, char **argv);
/* `kiln template FILE`: a chat template rendered for JSON messages on stdin (chat_tpl.c). */
int cli_template(int argc, char **argv);
/* Appends the ids of text (kiln_engine_tokenize_v2 with flags) to *ids (*n of *cap, grown). */
KilnStatus cli_add_text(KilnEngine *e, const char *text, int flags, int32_t **ids, int *n, int *cap);
/* `kiln db ...` and `kiln tune ...` parse their own arguments (argv after the command name). */
int cli_db(int argc, char **argv);
int cli_tune(int argc, char **argv);
/* The tuning store's path: given (--db), else $KILN_TUNE_DB, else $XDG_CACHE_HOME/kiln/tune.db, else
 * ~/.cache/kiln/tune.db (built in buf, n bytes); NULL when there is none, and when KILN_TUNE_DB is set
 * but empty (cli_tune_db_env_empty). *is_default (may be NULL) is 1 for the last two, whose directory
 * the CLI may create. */
const char *cli_tune_db_path(const char *given, char *buf, size_t n, int *is_default);
/* 1, after printing the one-line error, when no store is given and KILN_TUNE_DB is set to the empty
 * string: refused rather than read as unset, since a store was asked for and the default is not it. */
int cli_tune_db_env_empty(const char *given);
/* Opens the store at cli_tune_db_path(given) (for writing, the default path's directory is created with
 * mode 0700). Returns NULL after printing the one-line error. */
RtTdb *cli_db_open(const char *given, RtTdbMode mode);

#endif
