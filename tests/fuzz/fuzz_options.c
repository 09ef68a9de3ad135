/* fuzz_options.c — the CLI's number parser (cli/cli_num.c) and the tuning store's bucket parser
 * (rt_tdb_bucket_parse: `--bucket`, and bucket text read from stores), on hostile text. The first byte
 * picks a range; the rest, up to a NUL, is the text. Invariants: an integer is accepted exactly when the
 * text is an optional '-' and decimal digits whose value (computed here digit by digit, independently)
 * lies in the range, and then it is that value; an accepted real is finite and in its range; a quoted
 * text is one printable line; a bucket that parses prints to a canonical text that parses to the same
 * bucket and prints the same. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_num.h"
#include "fuzz.h"
#include "runtime/rt_tunedb.h"

static const int64_t ranges[][2] = {{1, 1 << 24}, {0, 1024}, {INT64_MIN, INT64_MAX}, {-5, 5}, {0, 0}};

/* The reference: 1 and *v when s is -?[0-9]+ whose value fits in int64, else 0. */
static int ref_int(const char *s, int64_t *v)
{
    int neg = *s == '-';
    const char *p = s + neg;
    if (!*p) return 0;
    uint64_t mag = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; *p; p++) {
        if (*p < '0' || *p > '9') return 0;
        unsigned dgt = (unsigned)(*p - '0');
        if (mag > (lim - dgt) / 10) return -1; /* well formed, out of 64 bits */
        mag = mag * 10 + dgt;
    }
    *v = neg ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    char *text = malloc(size);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = 0;
    const int64_t *r = ranges[data[0] % 5];

    int64_t got = 12345, want = 0;
    int ok = cli_num_int_ok(text, r[0], r[1], &got), ref = ref_int(text, &want);
    int should = ref == 1 && want >= r[0] && want <= r[1];
    if (ok != should) fz_fail("cli_num_int_ok('%s', %lld..%lld) = %d, the reference says %d", text, (long long)r[0],
                              (long long)r[1], ok, should);
    if (ok && got != want) fz_fail("'%s' read as %lld, not %lld", text, (long long)got, (long long)want);

    uint64_t u = 0;
    if (cli_num_u64_ok(text, &u)) {
        char back[32];
        snprintf(back, sizeof back, "%llu", (unsigned long long)u);
        if (strcmp(back, text) && !(text[0] == '0' && strtoull(text, NULL, 10) == u))
            fz_fail("'%s' read as u64 %s", text, back);
    }

    double x = 0, lo = (double)(data[0] & 7) - 4, hi = lo + (double)(data[0] >> 3);
    if (cli_num_real_ok(text, lo, hi, data[0] & 1, &x) &&
        (!isfinite(x) || x < lo || x > hi || ((data[0] & 1) && x == lo)))
        fz_fail("'%s' accepted as %g outside [%g, %g]", text, x, lo, hi);

    char q[96];
    cli_num_quote(text, q, sizeof q);
    for (const char *p = q; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e) fz_fail("the quote of '%s' is not printable", text);

    RtTdbBucket b, b2;
    char err[256], canon[RT_TDB_MAX_BUCKET], canon2[RT_TDB_MAX_BUCKET];
    if (rt_tdb_bucket_parse(text, &b, err, sizeof err) == KILN_OK) {
        rt_tdb_bucket_format(&b, canon);
        if (rt_tdb_bucket_parse(canon, &b2, err, sizeof err) != KILN_OK)
            fz_fail("bucket '%s' prints as '%s', which does not parse: %s", text, canon, err);
        rt_tdb_bucket_format(&b2, canon2);
        if (strcmp(canon, canon2)) fz_fail("bucket '%s': '%s' then '%s'", text, canon, canon2);
        if (rt_tdb_bucket_distance(&b, &b2) != 0) fz_fail("bucket '%s' is not at distance 0 from itself", text);
    } else if (strchr(err, '\n')) {
        fz_fail("bucket error not one line: '%s'", err);
    }
    free(text);
    return 0;
}
