/* kt.c — counters and the closing line for kt.h. */
#include "kt.h"

int kt_pass, kt_fail;

int kt_done(const char *suite)
{
    printf("%s: %d passed, %d failed\n", suite, kt_pass, kt_fail);
    return kt_fail ? 1 : 0;
}
