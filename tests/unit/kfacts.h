/* kfacts.h — the target facts tests shape default configs by: sm_90a's row of codegen's target table, the
 * reference every package's defaults use (cg_target_defaults), so a test's default config is the one a
 * package holds and the family rules the tests pin are sm_90a's; and the host's row, which shapes a
 * package's host binaries. Prefix kfacts_. */
#ifndef KILN_TESTS_KFACTS_H
#define KILN_TESTS_KFACTS_H

#include "codegen/cg_target.h"

static inline const KfamFacts *kfacts_sm90(void)
{
    return cg_target_facts(cg_target_find("sm_90a"));
}

/* The host row's facts (cpu = 1): what the host target's binaries are shaped by (pl_compile.c). */
static inline const KfamFacts *kfacts_host(void)
{
    return cg_target_facts(cg_target_find("host"));
}

#endif
