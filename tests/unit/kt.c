/* kt.c — counters and the closing line for kt.h. */
#include "kt.h"

#include <stdlib.h>
#include <string.h>

int kt_pass, kt_fail;

int kt_done(const char *suite)
{
    printf("%s: %d passed, %d failed\n", suite, kt_pass, kt_fail);
    return kt_fail ? 1 : 0;
}

int kt_ci(void)
{
    const char *ci = getenv("CI");
    return ci && !strcmp(ci, "true");
}

int kt_skip_toolkit(const char *suite, const char *why)
{
    if (kt_ci()) {
        printf("%s: FAIL: %s (CI=true: a toolkit CI must have is missing)\n", suite, why);
        return 1;
    }
    printf("%s: SKIP (%s)\n", suite, why);
    return 77;
}
