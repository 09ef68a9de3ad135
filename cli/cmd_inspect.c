/* cmd_inspect.c — `kiln inspect PACKAGE` (summary) and `kiln kernels PACKAGE` (kernels and binaries). */
#include <stdio.h>

#include "cli.h"
#include "rt_package.h"

int cli_inspect(const CliArgs *a)
{
    KilnPackage *pkg = NULL;
    char err[512];
    if (kiln_package_open(a->input, &pkg, err, sizeof err) != KILN_OK) {
        cli_error("%s", err);
        return 1;
    }
    KilnStatus s = rt_pkg_print_summary(pkg, stdout);
    kiln_package_close(pkg);
    if (s != KILN_OK) {
        cli_error("%s: cannot print summary (%s)", a->input, kiln_status_name(s));
        return 1;
    }
    return 0;
}

int cli_kernels(const CliArgs *a)
{
    KilnPackage *pkg = NULL;
    char err[512];
    if (kiln_package_open(a->input, &pkg, err, sizeof err) != KILN_OK) {
        cli_error("%s", err);
        return 1;
    }
    KilnStatus s = rt_pkg_print_kernels(pkg, stdout);
    kiln_package_close(pkg);
    if (s != KILN_OK) {
        cli_error("%s: cannot list kernels (%s)", a->input, kiln_status_name(s));
        return 1;
    }
    return 0;
}
