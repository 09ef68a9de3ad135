/* kt.h — a tiny test harness: KT_CHECK records a failure and goes on; kt_done prints the plain closing
 * line ("N passed, N failed") and returns the process exit status. */
#ifndef KILN_KT_H
#define KILN_KT_H

#include <stdio.h>

extern int kt_pass, kt_fail;
#define KT_CHECK(c, ...)                                                                                   \
    do {                                                                                                   \
        if (c) {                                                                                           \
            kt_pass++;                                                                                     \
        } else {                                                                                           \
            kt_fail++;                                                                                     \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #c);                          \
            fprintf(stderr, __VA_ARGS__);                                                                  \
            fputc('\n', stderr);                                                                           \
        }                                                                                                  \
    } while (0)
int kt_done(const char *suite);

#endif
