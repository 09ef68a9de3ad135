/* fuzz_main.c — main() of a fuzz target in an ordinary build (no libFuzzer): runs each input file named on
 * the command line once, or every regular file of a named directory (sorted), through
 * LLVMFuzzerTestOneInput. Prints how many ran; 0 inputs is a failure (a corpus that went missing). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 0;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0)
        if ((n += got) == cap) buf = realloc(buf, cap *= 2);
    fclose(f);
    if (!buf) {
        fprintf(stderr, "%s: out of memory\n", path);
        return 0;
    }
    uint8_t *exact = malloc(n ? n : 1); /* exactly n bytes, so ASan sees a read past the input */
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 1;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;
    char *names[4096];
    int n = 0, ran = 0;
    while (d && (e = readdir(d)) && n < 4096)
        if (e->d_name[0] != '.') names[n++] = strdup(e->d_name);
    if (d) closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    for (int i = 0; i < n; i++) {
        char p[2048];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", path, names[i]);
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) ran += run_file(p);
        free(names[i]);
    }
    return ran;
}

int main(int argc, char **argv)
{
    int ran = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 1;
        }
        ran += S_ISDIR(st.st_mode) ? run_dir(argv[i]) : run_file(argv[i]);
    }
    printf("%s: %d inputs ran\n", argv[0], ran);
    return ran > 0 ? 0 : 1;
}
