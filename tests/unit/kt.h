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
/* 1 under CI=true (bash .ci/run), where a toolkit CI must have (LLVM, NVRTC, the end-to-end model) is
 * never a reason to skip. */
int kt_ci(void);
/* A test that cannot run without a toolkit CI must have: prints why and returns the exit status, 77
 * (SKIP) normally, 1 (FAIL) under CI=true. A missing GPU is not such a toolkit: CI has none. */
int kt_skip_toolkit(const char *suite, const char *why);

#endif
