/* cli_num.c — strict option numbers (cli_num.h): whole text, declared range, one-line error. Integers are
 * read digit by digit with an overflow check before each step (no strtol: it skips leading space, takes
 * '+' and hex prefixes with base 0, and saturates); reals go to strtod only after their characters are
 * known to be a plain decimal number, so "nan", "inf" and "0x1p3" never reach it. No state, no allocation.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_num.h"

int cli_num_int_ok(const char *text, int64_t lo, int64_t hi, int64_t *out)
{
    if (!text) return 0;
    const char *p = text;
    int neg = *p == '-';
    p += neg;
    if (!*p) return 0;
    uint64_t mag = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; *p; p++) {
        if (*p < '0' || *p > '9') return 0;
        unsigned d = (unsigned)(*p - '0');
        if (mag > (limit - d) / 10) return 0;
        mag = mag * 10 + d;
    }
    int64_t v = neg ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
    if (v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

int cli_num_u64_ok(const char *text, uint64_t *out)
{
    if (!text || !*text) return 0;
    uint64_t v = 0;
    for (const char *p = text; *p; p++) {
        if (*p < '0' || *p > '9') return 0;
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) return 0;
        v = v * 10 + d;
    }
    *out = v;
    return 1;
}

int cli_num_real_ok(const char *text, double lo, double hi, int lo_open, double *out)
{
    if (!text || !*text || strlen(text) > 64) return 0;
    int digits = 0;
    for (const char *p = text; *p; p++) {
        if (*p >= '0' && *p <= '9')
            digits = 1;
        else if (!strchr(".eE+-", *p))
            return 0;
    }
    if (!digits) return 0;
    char *end;
    double v = strtod(text, &end);
    if (*end || !isfinite(v) || v < lo || v > hi || (lo_open && v <= lo)) return 0;
    *out = v;
    return 1;
}

const char *cli_num_quote(const char *text, char *buf, size_t n)
{
    size_t used = 0, i = 0;
    if (!n) return buf;
    buf[0] = 0;
    if (!text) text = "";
    for (; text[i] && i < 64; i++) {
        unsigned char c = (unsigned char)text[i];
        char one[8];
        int w = c >= 0x20 && c < 0x7f && c != '\'' && c != '\\' ? snprintf(one, sizeof one, "%c", c)
                                                                : snprintf(one, sizeof one, "\\x%02x", c);
        if (used + (size_t)w + 4 >= n) break;
        memcpy(buf + used, one, (size_t)w + 1);
        used += (size_t)w;
    }
    if (text[i] && used + 4 <= n) memcpy(buf + used, "...", 4);
    return buf;
}

int cli_num_error(const char *cmd, const char *flag, const char *want, const char *text)
{
    char q[300];
    fprintf(stderr, "kiln %s: %s wants %s, got '%s'\n", cmd, flag, want, cli_num_quote(text, q, sizeof q));
    return 2;
}

int cli_num_int(const char *cmd, const char *flag, const char *text, int64_t lo, int64_t hi, int64_t *out)
{
    if (cli_num_int_ok(text, lo, hi, out)) return 0;
    char want[96];
    snprintf(want, sizeof want, "a whole number in %lld..%lld", (long long)lo, (long long)hi);
    return cli_num_error(cmd, flag, want, text);
}

int cli_num_u64(const char *cmd, const char *flag, const char *text, uint64_t *out)
{
    if (cli_num_u64_ok(text, out)) return 0;
    return cli_num_error(cmd, flag, "a whole number in 0..18446744073709551615", text);
}

int cli_num_real(const char *cmd, const char *flag, const char *text, double lo, double hi, int lo_open,
                 double *out)
{
    if (cli_num_real_ok(text, lo, hi, lo_open, out)) return 0;
    char want[96];
    snprintf(want, sizeof want, "a number in %c%g, %g]", lo_open ? '(' : '[', lo, hi);
    return cli_num_error(cmd, flag, want, text);
}
