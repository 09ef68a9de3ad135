/* cg.c — the backend registry (the targets' limits and facts are cg_target.c's rows). Each backend file is
 * always compiled; one whose toolkit this build lacks reports itself unsupported, so this table needs no
 * #ifdefs. */
#include "cg.h"

#include <stdlib.h>
#include <string.h>

extern const CgBackend cg_cuda_backend; /* cuda/cg_cuda.c: CUDA C -> NVRTC */
extern const CgBackend cg_llvm_backend; /* llvm/cg_llvm.c: LLVM C API -> NVPTX, AMDGPU, host */

static const CgBackend *const backends[] = {&cg_cuda_backend, &cg_llvm_backend};

void cg_binary_free(CgBinary *b)
{
    if (!b) return;
    free(b->data);
    free(b->entry);
    b->data = NULL;
    b->entry = NULL;
    b->size = 0;
}

char *cg_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    return p ? memcpy(p, s, n) : NULL;
}

const CgBackend *cg_backend_for(const CgTarget *t, const char *prefer)
{
    if (!t) return NULL;
    for (unsigned i = 0; i < sizeof backends / sizeof backends[0]; i++) {
        const CgBackend *be = backends[i];
        if ((!prefer || !strcmp(prefer, be->name)) && be->supports(t)) return be;
    }
    return NULL;
}

