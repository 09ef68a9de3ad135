/* main.c — `kiln`: dispatch to subcommands and parse their shared flags. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_num.h"
#include "rt_file.h" /* rt_file_out_on_signals */
#include "ir/base.h"

static const char usage[] =
    "usage: kiln <command> [options]\n"
    "\n"
    "commands:\n"
    "  compile RECIPE -o OUT.kiln   compile a recipe into a package\n"
    "  ir RECIPE                    print the recipe's graph IR\n"
    "  models RECIPE                list the recipe's named configs\n"
    "  inspect PACKAGE              print a package's summary\n"
    "  kernels PACKAGE              list a package's kernels and binaries\n"
    "  run PACKAGE --weights W --prompt TEXT   generate text (kiln run --help for its options)\n"
    "  serve PACKAGE --weights W  an OpenAI-compatible HTTP server (kiln serve --help)\n"
    "  tokenize FILE [--special] [--no-bos] [--decode]   a GGUF's or tokenizer.json's ids of stdin\n"
    "  template FILE [--bos T] [--eos T] [--marks] < MESSAGES   render a chat template (JSON messages)\n"
    "  tune PACKAGE [--db F] [--budget SECONDS] [--kernels PATTERN] [--device host|N]\n"
    "                               tune the package's kernels on this device into the tuning DB\n"
    "                               (kiln tune --help; --report for speedups)\n"
    "  db list|show|pin|unpin|export|import|prune|upgrade [--db F]\n"
    "                               look after the tuning DB ('kiln db help' for more)\n"
    "  version                      print kiln's version\n"
    "\n"
    "options:\n"
    "  --model NAME        named config of the recipe (default: the recipe's default)\n"
    "  --set KEY=VALUE     override a config value (repeatable; checked against the recipe's limits)\n"
    "  --target T[,T...]   compile targets: host, sm_80, sm_90a, sm_100a, gfx942, gfx950\n"
    "                      (repeatable; no empty item)\n"
    "  -o PATH             output package\n"
    "  --dump-after=PASS   (ir) print the graph after PASS, or after every pass with 'all'\n"
    "  --raw               (ir) print the graph as the recipe built it, before passes\n"
    "  --locs              (ir) annotate each node with its recipe file:line\n"
    "  -j N                compile with N threads, 1..64 (default: all CPUs)\n"
    "  --cache-dir DIR     kernel binary cache (default $KILN_CACHE_DIR or ~/.cache/kiln)\n"
    "  --no-cache          compile every kernel afresh\n"
    "  --emit source       (compile) store each kernel's generated source (CUDA C, LLVM IR) instead of\n"
    "                      its binary: the golden kernel corpus, or reading what kiln generates\n"
    "  -v                  print timings\n"
    "  --db FILE           (tune, db) the tuning DB (default $KILN_TUNE_DB, else\n"
    "                      $XDG_CACHE_HOME/kiln/tune.db, else ~/.cache/kiln/tune.db)\n"
    "\n"
    "An option's value may not be empty, and a single-valued option is given at most once.\n";

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("kiln: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_empty_error(const char *cmd, const char *flag)
{
    fprintf(stderr, "kiln %s: %s wants a non-empty value\n", cmd, flag);
    return 2;
}

int cli_seen(CliSeen *s, const char *cmd, const char *flag)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->flags[i], flag)) {
            fprintf(stderr, "kiln %s: %s given more than once\n", cmd, flag);
            return 2;
        }
    if (s->n < (int)(sizeof s->flags / sizeof s->flags[0])) s->flags[s->n++] = flag;
    return 0;
}

static int usage_error(const char *cmd, const char *what, const char *arg)
{
    fprintf(stderr, "kiln %s: %s%s%s\n(run 'kiln help' for usage)\n", cmd, what, arg ? ": " : "",
            arg ? arg : "");
    return 2;
}

/* Adds the comma-separated targets in list (split in place). An empty list or item (--target '',
 * --target ,,,) is refused: it would compile for no target and still succeed. */
static int add_targets(CliArgs *a, char *list, const char *cmd)
{
    size_t n = strlen(list);
    if (!n || list[0] == ',' || list[n - 1] == ',' || strstr(list, ",,"))
        return cli_num_error(cmd, "--target", "a comma-separated list of targets, none empty", list);
    for (char *t = strtok(list, ","); t; t = strtok(NULL, ",")) {
        if (a->n_targets == CLI_MAX_TARGETS) return usage_error(cmd, "too many targets", NULL);
        a->targets[a->n_targets++] = t;
    }
    return 0;
}

int cli_parse(int argc, char **argv, CliArgs *a, const char *cmd)
{
    const char *cache = NULL;
    int no_cache = 0;
    CliSeen seen = {0};
    memset(a, 0, sizeof *a);
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        /* NAME=VALUE spellings of the valued options: the value, and the option's canonical name */
        const char *eqv = !strncmp(s, "--model=", 8)         ? s + 8
                          : !strncmp(s, "--target=", 9)      ? s + 9
                          : !strncmp(s, "--set=", 6)         ? s + 6
                          : !strncmp(s, "--dump-after=", 13) ? s + 13
                                                             : NULL;
        char flag[16] = "";
        if (eqv) snprintf(flag, sizeof flag, "%.*s", (int)(eqv - 1 - s), s);
        if (eqv && !*eqv) return cli_empty_error(cmd, flag);
        if (!strcmp(s, "-v") || !strcmp(s, "--verbose") || !strcmp(s, "-vv")) {
            if (s[2] == 'v') a->verbose++;
            a->verbose++;
        } else if (!strcmp(s, "--locs")) {
            a->locs = 1;
        } else if (!strcmp(s, "--raw")) {
            a->raw = 1;
        } else if (!strcmp(s, "--no-cache")) {
            no_cache = 1;
        } else if (!strcmp(s, "--emit") || !strcmp(s, "--emit=source")) {
            if (s[6] != '=' && !(next && !strcmp(next, "source")))
                return usage_error(cmd, "--emit wants 'source', got", next ? next : "nothing");
            i += s[6] != '=';
            if (cli_seen(&seen, cmd, "--emit")) return 2;
            a->emit_source = 1;
        } else if (!strncmp(s, "--dump-after=", 13)) {
            if (cli_seen(&seen, cmd, "--dump-after")) return 2;
            a->dump_after = s + 13;
        } else if (!strcmp(s, "-o") || !strcmp(s, "--model") || !strcmp(s, "--set") || !strcmp(s, "-j") ||
                   !strcmp(s, "--target") || !strcmp(s, "--dump-after") || !strcmp(s, "--cache-dir")) {
            if (!next) return usage_error(cmd, "missing value for", s);
            if (!*next && strcmp(s, "-j")) return cli_empty_error(cmd, s);
            if (strcmp(s, "--set") && strcmp(s, "--target") && cli_seen(&seen, cmd, s)) return 2;
            i++;
            if (!strcmp(s, "-o"))
                a->output = next;
            else if (!strcmp(s, "--model"))
                a->model = next;
            else if (!strcmp(s, "--dump-after"))
                a->dump_after = next;
            else if (!strcmp(s, "--cache-dir"))
                cache = next;
            else if (!strcmp(s, "-j")) {
                int64_t j;
                if (cli_num_int(cmd, "-j", next, 1, 64, &j)) return 2;
                a->jobs = (int)j;
            } else if (!strcmp(s, "--target")) {
                if (add_targets(a, argv[i], cmd)) return 2;
            } else {
                if (a->n_sets == CLI_MAX_SETS) return usage_error(cmd, "too many --set options", NULL);
                if (!strchr(next, '=')) return usage_error(cmd, "--set wants KEY=VALUE, got", next);
                a->sets[a->n_sets++] = next;
            }
        } else if (!strncmp(s, "--model=", 8)) {
            if (cli_seen(&seen, cmd, "--model")) return 2;
            a->model = s + 8;
        } else if (!strncmp(s, "--target=", 9)) {
            if (add_targets(a, argv[i] + 9, cmd)) return 2;
        } else if (!strncmp(s, "--set=", 6)) {
            if (a->n_sets == CLI_MAX_SETS || !strchr(s + 6, '=')) return usage_error(cmd, "bad --set", s);
            a->sets[a->n_sets++] = s + 6;
        } else if (s[0] == '-' && s[1]) {
            return usage_error(cmd, "unknown option", s);
        } else if (!a->input) {
            a->input = s;
        } else {
            return usage_error(cmd, "unexpected argument", s);
        }
    }
    if (!a->input) return usage_error(cmd, "missing input file", NULL);
    /* the cache directory: read once here (STYLE: knobs in one place) */
    const char *env = getenv("KILN_CACHE_DIR"), *home = getenv("HOME"), *xdg = getenv("XDG_CACHE_HOME");
    if (!no_cache) {
        if (cache)
            snprintf(a->cache_buf, sizeof a->cache_buf, "%s", cache);
        else if (env && *env)
            snprintf(a->cache_buf, sizeof a->cache_buf, "%s", env);
        else if (xdg && *xdg)
            snprintf(a->cache_buf, sizeof a->cache_buf, "%s/kiln", xdg);
        else if (home && *home)
            snprintf(a->cache_buf, sizeof a->cache_buf, "%s/.cache/kiln", home);
        if (a->cache_buf[0]) a->cache_dir = a->cache_buf;
    }
    return 0;
}

int main(int argc, char **argv)
{
    rt_file_out_on_signals(); /* an interrupted compile leaves no temporary */
    if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("kiln %s\n", KILN_VERSION_STRING);
        return 0;
    }
    if (!strcmp(cmd, "run")) return cli_run(argc - 2, argv + 2);
    if (!strcmp(cmd, "serve")) return cli_serve(argc - 2, argv + 2);
    if (!strcmp(cmd, "tokenize")) return cli_tokenize(argc - 2, argv + 2);
    if (!strcmp(cmd, "template")) return cli_template(argc - 2, argv + 2);
    if (!strcmp(cmd, "db")) return cli_db(argc - 2, argv + 2);
    if (!strcmp(cmd, "tune")) return cli_tune(argc - 2, argv + 2);
    static const struct {
        const char *name;
        int (*fn)(const CliArgs *);
    } cmds[] = {{"compile", cli_compile},
                {"ir", cli_ir},
                {"models", cli_models},
                {"inspect", cli_inspect},
                {"kernels", cli_kernels}};
    for (unsigned i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(cmd, cmds[i].name)) {
            CliArgs a;
            int rc = cli_parse(argc - 2, argv + 2, &a, cmd);
            return rc ? rc : cmds[i].fn(&a);
        }
    fprintf(stderr, "kiln: unknown command '%s' (run 'kiln help')\n", cmd);
    return 2;
}
