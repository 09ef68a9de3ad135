/* cli_num.h — the one way the CLI reads a number from an option: the whole text, strictly, against a
 * declared range. Prefix cli_num_.
 *
 *     int64_t n;
 *     if (cli_num_int("run", "--max-tokens", v, 1, CLI_MAX_TOKENS, &n)) return 2;
 *     // stderr: kiln run: --max-tokens wants a whole number in 1..16777216, got '12abc'
 *
 * Integers: an optional '-' then decimal digits, nothing else (no space, '+', hex, exponent or trailing
 * bytes); a value that does not fit in 64 bits is out of range, never wrapped. Reals: the characters of
 * a decimal number ([0-9.eE+-]) read by strtod, nothing after it, finite (no nan, inf or hex), in the
 * range. The _ok functions only answer (no output: a fuzz target and the runtime-free tests call them);
 * the others print one line "kiln CMD: FLAG wants ..., got 'TEXT'" (TEXT cut at 64 bytes, bytes outside
 * printable ASCII as \xNN, so the message stays one line) and return 2, the usage status of cli.h.
 */
#ifndef KILN_CLI_NUM_H
#define KILN_CLI_NUM_H

#include <stddef.h>
#include <stdint.h>

/* Ranges of the options shared by several subcommands (docs/RUNTIME.md repeats them). */
#define CLI_MAX_TOKENS  (1 << 24) /* --max-tokens, --top-k */
#define CLI_MAX_THREADS 1024      /* --threads: KILN_MAX_HOST_THREADS of kiln.h */
#define CLI_MAX_DEVICE  1023      /* --device N */
#define CLI_MAX_KV_MB   (1 << 24) /* --kv-cache-mb (16 TiB; the runtime then checks the device's memory) */

/* 1 when text is a whole decimal number in [lo, hi] (*out set), else 0 (*out untouched). */
int cli_num_int_ok(const char *text, int64_t lo, int64_t hi, int64_t *out);
/* 1 when text is a whole decimal number in 0..UINT64_MAX (no '-'), else 0. */
int cli_num_u64_ok(const char *text, uint64_t *out);
/* 1 when text is a finite decimal number in [lo, hi] ((lo, hi] when lo_open), else 0. */
int cli_num_real_ok(const char *text, double lo, double hi, int lo_open, double *out);

/* The same, for option `flag` of `kiln cmd`: 0, or 2 after printing the one-line usage error. */
int cli_num_int(const char *cmd, const char *flag, const char *text, int64_t lo, int64_t hi, int64_t *out);
int cli_num_u64(const char *cmd, const char *flag, const char *text, uint64_t *out);
int cli_num_real(const char *cmd, const char *flag, const char *text, double lo, double hi, int lo_open,
                 double *out);
/* Prints "kiln CMD: FLAG wants WANT, got 'TEXT'" (TEXT made printable as above) and returns 2: for
 * options whose values are words or lists ("--device wants auto, host or a GPU number in 0..1023"). */
int cli_num_error(const char *cmd, const char *flag, const char *want, const char *text);
/* TEXT as these messages quote it (cut, escaped) into buf (n bytes, NUL-terminated); returns buf. */
const char *cli_num_quote(const char *text, char *buf, size_t n);

#endif
