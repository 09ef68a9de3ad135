/* fuzz_package.c — the package reader and plan loader (runtime/rt_pkg_read.c, rt_plan.c): open, the meta
 * rows, `kiln inspect`'s and `kiln kernels`' printers (they must execute nothing and trust nothing), the
 * stored graph text, and the launch plan for every target the file names. Invariant besides "no crash,
 * no leak, no UB": errors are one line. */
#include <stdio.h>
#include <string.h>

#include "fuzz.h"
#include "runtime/kiln.h"
#include "runtime/rt_package.h"
#include "runtime/rt_plan.h"

static void one_line(const char *what, const char *err)
{
    if (!err[0] || strchr(err, '\n')) fz_fail("%s: error not one line: '%s'", what, err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fz_file("in.kiln", data, size);
    KilnPackage *pkg = NULL;
    char err[512];
    if (kiln_package_open(path, &pkg, err, sizeof err) != KILN_OK) {
        one_line("open", err);
        return 0;
    }
    static const char *const keys[] = {"model", "kiln_version", "graph_hash", "targets", "format"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        kiln_package_meta(pkg, keys[i]);
    rt_pkg_graph_text(pkg);
    FILE *null = fopen("/dev/null", "w");
    if (null) {
        rt_pkg_print_summary(pkg, null);
        rt_pkg_print_kernels(pkg, null);
        fclose(null);
    }
    static const char *const targets[] = {"host", "sm_90a", "sm_80", "sm_100a", "gfx942", "gfx950"};
    for (size_t i = 0; i < sizeof targets / sizeof *targets; i++) {
        RtPlan *p = NULL;
        if (rt_plan_load(pkg, targets[i], &p, err, sizeof err) == KILN_OK)
            rt_plan_free(p);
        else
            one_line(targets[i], err);
    }
    kiln_package_close(pkg);
    return 0;
}
