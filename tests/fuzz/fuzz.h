/* fuzz.h — what kiln's fuzz targets share (tests/fuzz/, docs/TESTING.md "Fuzzing"). Prefix fz_.
 * Each fuzz_<name>.c defines LLVMFuzzerTestOneInput. Built with clang's libFuzzer (make fuzz), a target
 * explores; built without it (every ordinary build), fuzz_main.c is its main and runs the files named on
 * the command line (or every file of a directory) once each: the seed corpus and every input that ever
 * crashed a target are ctests of both CI halves, so a fixed finding stays fixed under ASan+UBSan.
 * The readers under test take paths, so an input is written to a file first (fz_file).
 */
#ifndef KILN_FUZZ_H
#define KILN_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Writes data to "<a private temporary directory>/<name>" (the same path every call, replaced) and
 * returns that path (in a static buffer that fz_path and fz_file reuse: copy it to keep it); the directory is made on first use and removed at exit. Aborts when it cannot
 * (a harness failure, not a finding). */
const char *fz_file(const char *name, const uint8_t *data, size_t size);
/* "<the private directory>/<name>", for files a target makes itself (an output store). */
const char *fz_path(const char *name);
/* A finding that is not a crash (a broken invariant): prints it and aborts, which both libFuzzer and
 * the ctest runner report with the input. */
void fz_fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;

#endif
