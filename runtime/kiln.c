/* kiln.c — the library's version and the names of its status codes (kiln.h). No state, no allocation. */
#include "kiln.h"

int kiln_version(void)
{
    return KILN_VERSION_MAJOR * 10000 + KILN_VERSION_MINOR * 100 + KILN_VERSION_PATCH;
}

const char *kiln_status_name(KilnStatus s)
{
    switch (s) {
    case KILN_OK: return "ok";
    case KILN_ERR_ARG: return "bad argument";
    case KILN_ERR_IO: return "i/o error";
    case KILN_ERR_FORMAT: return "wrong file format";
    case KILN_ERR_CORRUPT: return "corrupt file";
    case KILN_ERR_NOMEM: return "out of memory";
    case KILN_ERR_DEVICE: return "device error";
    case KILN_ERR_UNSUPPORTED: return "unsupported";
    case KILN_ERR_FULL: return "pool full";
    }
    return "unknown status";
}
