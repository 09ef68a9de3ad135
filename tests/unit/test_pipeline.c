/* test_pipeline.c — the compile pipeline as a library call (pipeline/pl.h), and the one kernel stage that
 * `kiln compile` and `kiln tune` share:
 *   - a package compiled by pl_compile, and each of its binaries compiled again through at_compile (the
 *     tuner's path) at the binary's spec and config: the same bytes, format, entry, config, grid and
 *     launch geometry, for the host target (LLVM) and, where this build has NVRTC, sm_90a (cubin);
 *   - --emit source: every binary is text of its backend ("cuda-c", "llvm-ir") with the same rows;
 *   - stage errors leave no package and say where: a recipe error names recipe file:line, an unknown
 *     dump point is refused, a missing output path is an error;
 *   - the dump points print the schedule and the kernels.
 * Nothing here is random: the recipe fixes the model, and compiled code is deterministic.
 */
#define _POSIX_C_SOURCE 200809L
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "at_compile.h"
#include "cg_kernel.h"
#include "kiln.h"
#include "kt.h"
#include "pipeline/pl.h"
#include "rt_package.h"

static char recipe[4096], dir[] = "/tmp/kiln_test_pipeline_XXXXXX";

static IrStatus compile(const char *out, const CgTarget *const *targets, int n_targets, int source, IrDiag *d)
{
    PlOptions o = pl_options_default();
    o.recipe = recipe;
    o.model = "tiny";
    o.output = out;
    o.targets = targets;
    o.n_targets = n_targets;
    o.threads = 2;
    o.emit_source = source;
    return pl_compile(&o, NULL, d);
}

/* Every binary row of the package at path, compiled again by at_compile, must match. Returns the rows. */
static int check_same(const char *path, const CgTarget *t)
{
    KilnPackage *pkg = NULL;
    char err[512];
    if (kiln_package_open(path, &pkg, err, sizeof err) != KILN_OK) {
        KT_CHECK(0, "%s: %s", path, err);
        return 0;
    }
    sqlite3_stmt *q = NULL;
    sqlite3_prepare_v2(rt_pkg_db(pkg),
                       "select k.spec, b.config, b.grid, b.format, b.entry, b.block, b.smem, b.data, k.name "
                       "from binaries b join kernels k on k.id = b.kernel_id where b.target = ?1",
                       -1, &q, NULL);
    sqlite3_bind_text(q, 1, t->name, -1, SQLITE_STATIC);
    int rows = 0;
    while (q && sqlite3_step(q) == SQLITE_ROW) {
        rows++;
        const char *spec_s = (const char *)sqlite3_column_text(q, 0), *cfg_s = (const char *)sqlite3_column_text(q, 1);
        const char *name = (const char *)sqlite3_column_text(q, 8);
        IrArena *a = ir_arena_create();
        KfamSpec spec;
        KirConfig cfg;
        AtCompiled c;
        int ok = at_spec_parse(a, spec_s, &spec, err, sizeof err) == KILN_OK &&
                 at_config_parse(a, cfg_s, &cfg, err, sizeof err) == KILN_OK;
        KT_CHECK(ok, "%s: %s", name, err);
        if (ok && at_compile(kfam_find(spec.family), &spec, &cfg, t, NULL, &c, err, sizeof err) == KILN_OK) {
            size_t n = (size_t)sqlite3_column_bytes(q, 7);
            KT_CHECK(c.bin.size == n && !memcmp(c.bin.data, sqlite3_column_blob(q, 7), n),
                     "%s %s %s: at_compile's %zu bytes differ from the package's %zu", name, t->name, cfg_s,
                     c.bin.size, n);
            KT_CHECK(!strcmp(c.config, cfg_s) && !strcmp(c.grid, (const char *)sqlite3_column_text(q, 2)),
                     "%s %s: config/grid '%s' '%s' vs the package's '%s' '%s'", name, t->name, c.config, c.grid,
                     cfg_s, sqlite3_column_text(q, 2));
            KT_CHECK(!strcmp(c.bin.format, (const char *)sqlite3_column_text(q, 3)) &&
                         !strcmp(c.bin.entry, (const char *)sqlite3_column_text(q, 4)),
                     "%s %s: format/entry %s %s vs %s %s", name, t->name, c.bin.format, c.bin.entry,
                     sqlite3_column_text(q, 3), sqlite3_column_text(q, 4));
            KT_CHECK(c.block == sqlite3_column_int(q, 5) && c.smem == sqlite3_column_int(q, 6),
                     "%s %s: geometry %d/%d vs the package's %d/%d", name, t->name, c.block, c.smem,
                     sqlite3_column_int(q, 5), sqlite3_column_int(q, 6));
            at_compiled_free(&c);
        } else if (ok) {
            KT_CHECK(0, "%s %s %s: at_compile: %s", name, t->name, cfg_s, err);
        }
        ir_arena_destroy(a);
    }
    sqlite3_finalize(q);
    kiln_package_close(pkg);
    return rows;
}

static int count(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    int n = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
        n = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
    return n;
}

static void shared_stage(void)
{
    const char *names[] = {"host", "sm_90a"};
    for (int i = 0; i < 2; i++) {
        const CgTarget *t = cg_target_find(names[i]);
        if (!cg_backend_for(t, NULL)) { /* CMake refuses such a build under CI=true */
            printf("no backend for %s in this build: not compared\n", names[i]);
            continue;
        }
        char path[256];
        snprintf(path, sizeof path, "%s/%s.kiln", dir, names[i]);
        IrDiag d = {0};
        KT_CHECK(compile(path, &t, 1, 0, &d) == IR_OK, "compile tiny for %s: %s", names[i], d.msg);
        int rows = check_same(path, t);
        KT_CHECK(rows >= 8, "%s: only %d binaries compared", names[i], rows);
        printf("%s: %d binaries of pl_compile and at_compile identical\n", names[i], rows);
    }
}

static void source_and_errors(void)
{
    const CgTarget *t[] = {cg_target_find("host"), cg_target_find("sm_90a"), cg_target_find("gfx942")};
    char path[256];
    snprintf(path, sizeof path, "%s/src.kiln", dir);
    IrDiag d = {0};
    KT_CHECK(compile(path, t, 3, 1, &d) == IR_OK, "--emit source: %s", d.msg);
    int all = count(path, "select count(*) from binaries");
    KT_CHECK(all > 20, "--emit source: %d binaries", all);
    KT_CHECK(count(path, "select count(*) from binaries where target = 'sm_90a' and format = 'cuda-c' and "
                         "instr(data, '__global__') > 0 and block >= 32") ==
                 count(path, "select count(*) from binaries where target = 'sm_90a'"),
             "sm_90a sources are CUDA C with a block of warps");
    KT_CHECK(count(path, "select count(*) from binaries where target <> 'sm_90a' and format = 'llvm-ir' and "
                         "instr(data, 'define') > 0 and block = 1 and smem = 0") ==
                 count(path, "select count(*) from binaries where target <> 'sm_90a'"),
             "host and gfx942 sources are LLVM IR, one thread a program");

    /* errors: no file left, one line that says where */
    char bad[256], out[256];
    snprintf(bad, sizeof bad, "%s/bad.lua", dir);
    snprintf(out, sizeof out, "%s/bad.kiln", dir);
    FILE *f = fopen(bad, "w");
    if (f) fputs("recipe { name = 'bad', configs = { t = {} },\n  build = function(g, cfg) error('no') end }\n", f), fclose(f);
    PlOptions o = pl_options_default();
    o.recipe = bad;
    o.output = out;
    d = (IrDiag){0};
    KT_CHECK(pl_compile(&o, NULL, &d) != IR_OK && strstr(d.msg, "bad.lua:2"), "bad recipe: '%s'", d.msg);
    KT_CHECK(access(out, F_OK) != 0, "a failed compile left %s", out);
    o.recipe = recipe, o.output = NULL;
    d = (IrDiag){0};
    KT_CHECK(pl_compile(&o, NULL, &d) != IR_OK && d.msg[0], "no output path: '%s'", d.msg);
    KT_CHECK(!pl_dump_known("no_such_pass") && pl_dump_known("schedule") && pl_dump_known("kernels") &&
                 pl_dump_known(gir_pass_name(0)),
             "dump points");

    /* dump points */
    IrBuf dump = {0};
    o = pl_options_default();
    o.recipe = recipe, o.model = "tiny", o.output = out, o.dump = &dump, o.dump_after = "kernels";
    d = (IrDiag){0};
    KT_CHECK(pl_compile(&o, NULL, &d) == IR_OK && dump.s && strstr(dump.s, "; kernel 0 ") &&
                 strstr(dump.s, "kernel "),
             "dump after kernels: %s", d.msg);
    ir_buf_free(&dump);
    o.dump_after = "schedule";
    d = (IrDiag){0};
    KT_CHECK(pl_compile(&o, NULL, &d) == IR_OK && dump.s && dump.len > 100, "dump after schedule: %s", d.msg);
    ir_buf_free(&dump);
}

int main(void)
{
    const char *src = getenv("KILN_SOURCE_DIR");
    snprintf(recipe, sizeof recipe, "%s/recipes/llama.lua", src ? src : ".");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    shared_stage();
    source_and_errors();
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return kt_done("test_pipeline");
}
