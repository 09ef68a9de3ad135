/* fuzz_recipe.c — the recipe frontend and the compiler stages that trust no recipe (frontend/, ir/,
 * pipeline/): the input is a recipe's Lua text, run in the sandbox with a small instruction and memory
 * budget, then compiled to a graph-only package (passes, schedule, every kernel at its default config,
 * the package writer; no backend). Invariants besides "no crash, no leak, no UB, no hang": an error is
 * one line, and a failed compile leaves no file at the output path or beside it. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "pipeline/pl.h"

static int files_in_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)))
        n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (memchr(data, 0, size)) return 0; /* a recipe is text; a NUL would end it (Lua loads it whole, though) */
    char recipe[1024], out[1024], dir[1024];
    snprintf(recipe, sizeof recipe, "%s", fz_file("r.lua", data, size));
    snprintf(out, sizeof out, "%s", fz_path("out/r.kiln"));
    snprintf(dir, sizeof dir, "%s", fz_path("out"));
    if (access(dir, F_OK) != 0 && mkdir(dir, 0700) != 0) fz_fail("mkdir %s", dir);
    PlOptions o = pl_options_default();
    o.recipe = recipe;
    o.output = out;
    o.threads = 1;
    o.recipe_instr_limit = 2000000; /* a runaway recipe costs ~20 ms here, not the default's second */
    o.recipe_mem_limit = 32u << 20;
    PlStats st;
    IrDiag d = {0};
    IrStatus s = pl_compile(&o, &st, &d);
    if (s != IR_OK) {
        if (!d.msg[0] || strchr(d.msg, '\n')) fz_fail("error not one line: '%s'", d.msg);
        if (files_in_dir(dir)) fz_fail("a failed compile left a file in %s: %s", dir, d.msg);
    }
    unlink(out);
    return 0;
}
