/* at_ahead.h — compile a kernel's candidates ahead, on CPU threads, while the device times earlier ones.
 * Prefix at_ahead_.
 *
 *     AtAhead *ah = at_ahead_create(4, target, cg_options);      // 4 compile threads; NULL: none
 *     at_ahead_start(ah, kernel, cands, n);   // compiles cands[0..n) in order, a few ahead of use
 *     AtCompiled c;
 *     KilnStatus s = at_ahead_take(ah, &cands[i].cfg, &c, msg, msglen);   // waits for candidate i
 *     ...                                                                  // (-1: not one of them)
 *     at_ahead_destroy(ah);
 *
 * The tuner's prepare() used to compile each candidate itself, so the GPU idled while NVRTC ran. The pool
 * compiles candidate j while the timer measures candidate i < j, at most 2 x threads candidates past the
 * last one taken (a budget that stops the kernel early wastes little). at_ahead_start for the next kernel
 * (or destroy) waits for the compiles in flight and drops what was not taken. Compiles are independent
 * (at_compile: own arena, cg_compile_jobs is thread-safe); nothing else is shared with the caller.
 */
#ifndef KILN_AT_AHEAD_H
#define KILN_AT_AHEAD_H

#include "at_compile.h"
#include "at_search.h"

typedef struct AtAhead AtAhead;

/* threads <= 0, or out of memory: NULL (the caller compiles inline). */
AtAhead *at_ahead_create(int threads, const CgTarget *t, const CgDriverOptions *o);
void at_ahead_destroy(AtAhead *ah); /* NULL is fine */

/* Starts compiling k's n candidates (their configs are copied; k must outlive the compiles, as the search's
 * kernels do). Drops the previous kernel's. */
void at_ahead_start(AtAhead *ah, const AtKernel *k, const AtCand *cands, int n);

/* The compile of the started kernel's candidate whose config prints as cfg: waits for it and moves it into
 * *out (at_compile's status and message). Returns -1, touching nothing, when cfg is none of them (or ah is
 * NULL): compile inline. */
int at_ahead_take(AtAhead *ah, const KirConfig *cfg, AtCompiled *out, KilnStatus *st, char *msg, int msglen);

#endif
