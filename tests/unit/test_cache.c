/* test_cache.c — the compile driver's binary cache (codegen/cg_driver.c): directory modes and refusals,
 * keys (the host CPU keys host entries only), entry validation (corrupt, truncated, foreign entries are
 * misses and get replaced), stale temporary files, concurrent writers (threads and processes).
 * The directory checks run in every build; the rest needs a backend that compiles for "host" (LLVM) or
 * "sm_80" (NVRTC or LLVM) and is skipped without one.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "codegen/cg_driver.h"
#include "ir/kfam.h"
#include "kfacts.h"
#include "kt.h"

static char scratch[256];
static IrArena *arena;

static KirKernel *kernel(int64_t C)
{
    KfamSpec s = kfam_spec("rmsnorm");
    kfam_spec_int(&s, "C", C);
    kfam_spec_float(&s, "eps", 1e-5);
    kfam_spec_str(&s, "dtype", "f32");
    const KfamFamily *f = kfam_find("rmsnorm");
    KirConfig cfg = {0};
    KirKernel *k = NULL;
    IrDiag d = {0};
    f->defaults(&s, kfacts_sm90(), &cfg);
    if (f->build(arena, &s, kfacts_sm90(), &cfg, &k, &d) != IR_OK) {
        fprintf(stderr, "test_cache: cannot build rmsnorm: %s\n", d.msg);
        exit(1);
    }
    return k;
}

/* A fresh path under the scratch directory (not created). */
static const char *path_of(const char *name)
{
    static char buf[8][512];
    static int i;
    char *p = buf[i++ % 8];
    snprintf(p, 512, "%s/%s", scratch, name);
    return p;
}

/* One job through cg_compile_jobs; the caller frees job->bin. */
static void compile1(CgJob *job, const KirKernel *k, const char *target, const char *dir, const char *cpu,
                     const char *salt, IrDiag *warn)
{
    memset(job, 0, sizeof *job);
    job->k = k;
    job->target = cg_target_find(target);
    CgDriverOptions o = {.threads = 1, .cache_dir = dir, .salt = salt, .host_cpu = cpu, .warn = warn};
    cg_compile_jobs(job, 1, &o);
}

static int same_bin(const CgBinary *a, const CgBinary *b)
{
    return a->size == b->size && a->size && !memcmp(a->data, b->data, a->size) && a->format && b->format &&
           !strcmp(a->format, b->format) &&
           ((!a->entry && !b->entry) || (a->entry && b->entry && !strcmp(a->entry, b->entry)));
}

static int count_files(const char *dir, const char *suffix, char *first, size_t n)
{
    DIR *dp = opendir(dir);
    int c = 0;
    if (!dp) return -1;
    for (struct dirent *e; (e = readdir(dp));) {
        size_t l = strlen(e->d_name), s = strlen(suffix);
        if (e->d_name[0] == '.' || l < s || strcmp(e->d_name + l - s, suffix)) continue;
        if (first && c == 0) snprintf(first, n, "%s/%s", dir, e->d_name);
        c++;
    }
    closedir(dp);
    return c;
}

static int entries(const char *dir)
{
    return count_files(dir, ".kbin", NULL, 0);
}

static int tmp_files(const char *dir)
{
    char t[600];
    snprintf(t, sizeof t, "%s/tmp", dir);
    return count_files(t, "", NULL, 0);
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)len + 1);
    if (p && fread(p, 1, (size_t)len, f) != (size_t)len) {
        free(p);
        p = NULL;
    }
    fclose(f);
    if (p) p[len] = 0;
    *n = (size_t)len;
    return p;
}

static void spit(const char *path, const void *p, size_t n)
{
    unlink(path);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) {
        fprintf(stderr, "test_cache: cannot write %s\n", path);
        exit(1);
    }
    fclose(f);
}

static unsigned mode_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (unsigned)(st.st_mode & 07777) : 0xffffu;
}

/* ---- the directory ---- */

static void test_dirs(void)
{
    KirKernel *k = kernel(256);
    CgJob job;
    IrDiag w = {0};

    /* created 0700, with its missing parents and tmp/ */
    const char *top = path_of("a"), *mid = path_of("a/b"), *dir = path_of("a/b/cache"),
               *tmp = path_of("a/b/cache/tmp");
    compile1(&job, k, "host", dir, "cpu-A", "s", &w);
    KT_CHECK(w.status == IR_OK, "fresh dir refused: %s", w.msg);
    KT_CHECK(mode_of(dir) == 0700 && mode_of(tmp) == 0700 && mode_of(mid) == 0700 && mode_of(top) == 0700,
             "modes: dir %o tmp %o parents %o %o", mode_of(dir), mode_of(tmp), mode_of(mid), mode_of(top));
    cg_binary_free(&job.bin);

    /* an existing 0755 directory (what older kilns made) is fine and keeps its mode */
    dir = path_of("c755");
    mkdir(dir, 0700);
    chmod(dir, 0755);
    ir_diag_clear(&w);
    compile1(&job, k, "host", dir, "cpu-A", "s", &w);
    KT_CHECK(w.status == IR_OK && mode_of(dir) == 0755, "0755 dir: %s (mode %o)", w.msg, mode_of(dir));
    cg_binary_free(&job.bin);

    /* group- or world-writable: refused with one line, and left untouched; the job still compiles */
    static const unsigned bad_modes[] = {0777, 0770, 0702, 01777};
    for (unsigned i = 0; i < sizeof bad_modes / sizeof bad_modes[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "open%o", bad_modes[i]);
        dir = path_of(name);
        mkdir(dir, 0700);
        chmod(dir, bad_modes[i]);
        ir_diag_clear(&w);
        compile1(&job, k, "host", dir, "cpu-A", "s", &w);
        KT_CHECK(w.status == IR_ERR_IO && strstr(w.msg, "writable by group or others") &&
                     strstr(w.msg, dir) && !strchr(w.msg, '\n'),
                 "mode %o: warning '%s'", bad_modes[i], w.msg);
        KT_CHECK(job.cached == 0 && entries(dir) == 0 && tmp_files(dir) == -1 && mode_of(dir) == bad_modes[i],
                 "mode %o: the refused dir was used", bad_modes[i]);
        KT_CHECK(job.status == IR_OK || job.status == IR_ERR_UNSUPPORTED, "mode %o: job failed: %s",
                 bad_modes[i], job.msg);
        cg_binary_free(&job.bin);
    }

    /* a writable tmp/ inside a good directory: refused too */
    dir = path_of("opentmp");
    mkdir(dir, 0700);
    mkdir(path_of("opentmp/tmp"), 0700);
    chmod(path_of("opentmp/tmp"), 0777);
    ir_diag_clear(&w);
    compile1(&job, k, "host", dir, "cpu-A", "s", &w);
    KT_CHECK(w.status == IR_ERR_IO && strstr(w.msg, "/tmp: writable by group"), "writable tmp/: '%s'", w.msg);
    KT_CHECK(entries(dir) == 0, "writable tmp/: used");
    cg_binary_free(&job.bin);

    /* owned by someone else: as root, chown a directory away; otherwise "/" is root's */
    if (geteuid() == 0) {
        dir = path_of("foreign");
        mkdir(dir, 0700);
        KT_CHECK(chown(dir, 1, 1) == 0, "chown: %s", strerror(errno));
    } else {
        dir = "/";
    }
    ir_diag_clear(&w);
    compile1(&job, k, "host", dir, "cpu-A", "s", &w);
    KT_CHECK(w.status == IR_ERR_IO && strstr(w.msg, "not by this user"), "foreign owner: '%s'", w.msg);
    KT_CHECK(entries(dir) == 0, "foreign dir used");
    cg_binary_free(&job.bin);

    /* not a directory, or cannot be created */
    dir = path_of("plainfile");
    spit(dir, "x", 1);
    ir_diag_clear(&w);
    compile1(&job, k, "host", dir, "cpu-A", "s", &w);
    KT_CHECK(w.status == IR_ERR_IO && strstr(w.msg, "not a directory"), "plain file: '%s'", w.msg);
    cg_binary_free(&job.bin);
    dir = path_of("plainfile/sub");
    ir_diag_clear(&w);
    compile1(&job, k, "host", dir, "cpu-A", "s", &w);
    KT_CHECK(w.status == IR_ERR_IO && strstr(w.msg, "cannot create"), "under a file: '%s'", w.msg);
    cg_binary_free(&job.bin);

    /* no warn slot: refused silently */
    compile1(&job, k, "host", path_of("open777"), "cpu-A", "s", NULL);
    KT_CHECK(entries(path_of("open777")) == 0, "refused dir used without a warn slot");
    cg_binary_free(&job.bin);
}

/* ---- keys ---- */

static void test_keys(const char *host, const char *gpu)
{
    KirKernel *k = kernel(256);
    CgJob a, b;
    if (host) {
        const char *dir = path_of("keys-host");
        compile1(&a, k, host, dir, "cpu-A", "s", NULL);
        KT_CHECK(a.status == IR_OK && !a.cached && entries(dir) == 1, "first compile: %s", a.msg);
        compile1(&b, k, host, dir, "cpu-A", "s", NULL);
        KT_CHECK(b.status == IR_OK && b.cached && same_bin(&a.bin, &b.bin), "same cpu: not a hit");
        cg_binary_free(&b.bin);
        compile1(&b, k, host, dir, "cpu-B", "s", NULL);
        KT_CHECK(b.status == IR_OK && !b.cached && entries(dir) == 2, "another cpu served from the cache");
        cg_binary_free(&b.bin);
        compile1(&b, k, host, dir, "cpu-B", "s", NULL);
        KT_CHECK(b.cached && entries(dir) == 2, "cpu-B: not a hit");
        cg_binary_free(&b.bin);
        compile1(&b, k, host, dir, "cpu-A", "s2", NULL);
        KT_CHECK(!b.cached && entries(dir) == 3, "another salt served from the cache");
        cg_binary_free(&b.bin);
        /* this machine's own description (the LLVM backend's) is another key again */
        compile1(&b, k, host, dir, NULL, "s", NULL);
        KT_CHECK(b.status == IR_OK && !b.cached && entries(dir) == 4, "real cpu keyed like cpu-A");
        KT_CHECK(same_bin(&a.bin, &b.bin), "host code differs between compiles");
        cg_binary_free(&b.bin);
        compile1(&b, k, host, dir, NULL, "s", NULL);
        KT_CHECK(b.cached && entries(dir) == 4, "real cpu: not a hit");
        cg_binary_free(&b.bin);
        /* the entry says what it was built for */
        char first[600];
        count_files(dir, ".kbin", first, sizeof first);
        size_t n;
        char *e = slurp(first, &n);
        KT_CHECK(e && !strncmp(e, "kiln-cache 3\nkey ", 17) && strstr(e, "\ntarget host\n") &&
                     strstr(e, "\ncpu ") && strstr(e, "\nkiln " KILN_VERSION_STRING "\n"),
                 "host entry header: %.300s", e ? e : "(none)");
        free(e);
        cg_binary_free(&a.bin);
    } else {
        printf("test_cache: no host backend in this build: host keys not checked\n");
    }
    if (gpu) {
        const char *dir = path_of("keys-gpu");
        compile1(&a, k, gpu, dir, "cpu-A", "s", NULL);
        KT_CHECK(a.status == IR_OK && !a.cached, "%s: %s", gpu, a.msg);
        compile1(&b, k, gpu, dir, "cpu-B", "s", NULL);
        KT_CHECK(b.cached && entries(dir) == 1 && same_bin(&a.bin, &b.bin), "%s: the host cpu keys it", gpu);
        cg_binary_free(&b.bin);
        char first[600];
        count_files(dir, ".kbin", first, sizeof first);
        size_t n;
        char *e = slurp(first, &n);
        KT_CHECK(e && strstr(e, "\ntarget ") && !strstr(e, "\ncpu "), "%s entry has a cpu line", gpu);
        free(e);
        cg_binary_free(&a.bin);
    }
}

/* ---- entries ---- */

static const char *find_line(const char *e, const char *name)
{
    char pat[32];
    snprintf(pat, sizeof pat, "\n%s ", name);
    const char *p = strstr(e, pat);
    return p ? p + 1 : NULL;
}

static void test_entries(const char *target)
{
    KirKernel *k = kernel(256), *k2 = kernel(512);
    const char *dir = path_of("entries");
    CgJob ref, j;
    compile1(&ref, k, target, dir, "cpu-A", "s", NULL);
    KT_CHECK(ref.status == IR_OK && entries(dir) == 1, "reference: %s", ref.msg);
    char path[600], other[600];
    count_files(dir, ".kbin", path, sizeof path);
    size_t n, n2;
    char *good = slurp(path, &n);
    /* an entry of another kernel, for the foreign-key case */
    const char *dir2 = path_of("entries2");
    compile1(&j, k2, target, dir2, "cpu-A", "s", NULL);
    cg_binary_free(&j.bin);
    count_files(dir2, ".kbin", other, sizeof other);
    char *foreign = slurp(other, &n2);
    if (!good || !foreign) {
        KT_CHECK(0, "no entries to corrupt");
        return;
    }
    size_t payload = n - ref.bin.size; /* where the payload starts */
    enum { CASES = 16 };
    for (int c = 0; c < CASES; c++) {
        char *e = malloc(n + 64);
        memcpy(e, good, n);
        size_t len = n;
        const char *what = "";
        char *line;
        switch (c) {
        case 0: what = "payload byte flipped", e[n - 1] ^= 0x40; break;
        case 1: what = "first payload byte flipped", e[payload] ^= 1; break;
        case 2: what = "truncated by one byte", len = n - 1; break;
        case 3: what = "truncated to half", len = n / 2; break;
        case 4: what = "header only", len = payload; break;
        case 5: what = "empty", len = 0; break;
        case 6: what = "a byte appended", e[n] = 'x', len = n + 1; break;
        case 7:
            what = "size line changed";
            line = (char *)find_line(e, "size");
            line[5] = line[5] == '1' ? '2' : '1';
            break;
        case 8:
            what = "sum line changed";
            line = (char *)find_line(e, "sum");
            line[4] = line[4] == 'a' ? 'b' : 'a';
            break;
        case 9:
            what = "key text changed (target)";
            line = (char *)find_line(e, "target");
            line[7] ^= 0x20;
            break;
        case 10:
            what = "format unknown";
            line = (char *)find_line(e, "format");
            line[7] = 'X';
            break;
        case 11: what = "magic changed", e[0] = 'K'; break;
        case 12:
            what = "another kernel's entry";
            free(e);
            e = malloc(n2);
            memcpy(e, foreign, n2);
            len = n2;
            break;
        case 13: {
            what = "old format";
            const char *old = "kiln-bin 1 host-obj x 3 0\nabc";
            len = strlen(old);
            memcpy(e, old, len);
            break;
        }
        case 14:
            what = "random bytes";
            for (size_t i = 0; i < n; i++)
                e[i] = (char)(rand() & 0xff);
            break;
        case 15: what = "header with no end", len = 40; break;
        }
        spit(path, e, len);
        free(e);
        compile1(&j, k, target, dir, "cpu-A", "s", NULL);
        KT_CHECK(j.status == IR_OK && !j.cached && same_bin(&j.bin, &ref.bin), "%s: served (%s)", what,
                 j.msg);
        cg_binary_free(&j.bin);
        size_t now_n;
        char *now = slurp(path, &now_n);
        KT_CHECK(now && now_n == n && !memcmp(now, good, n), "%s: entry not replaced by a good one", what);
        free(now);
        KT_CHECK(entries(dir) == 1 && tmp_files(dir) == 0, "%s: %d entries, %d temp files", what,
                 entries(dir), tmp_files(dir));
    }

    /* links and special files are no entries (and reading them must not block) */
    char elsewhere[600];
    snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere", scratch);
    spit(elsewhere, good, n);
    unlink(path);
    KT_CHECK(symlink(elsewhere, path) == 0, "symlink: %s", strerror(errno));
    compile1(&j, k, target, dir, "cpu-A", "s", NULL);
    struct stat st;
    KT_CHECK(!j.cached && same_bin(&j.bin, &ref.bin) && lstat(path, &st) == 0 && S_ISREG(st.st_mode),
             "symlink entry served or kept");
    cg_binary_free(&j.bin);
    unlink(path);
    KT_CHECK(mkfifo(path, 0600) == 0, "mkfifo: %s", strerror(errno));
    compile1(&j, k, target, dir, "cpu-A", "s", NULL);
    KT_CHECK(!j.cached && same_bin(&j.bin, &ref.bin) && lstat(path, &st) == 0 && S_ISREG(st.st_mode),
             "fifo entry served or kept");
    cg_binary_free(&j.bin);

    /* a bad entry is removed even when the good one cannot be written (tmp/ read-only; root writes anyway) */
    if (geteuid() != 0) {
        char tmp[600];
        snprintf(tmp, sizeof tmp, "%s/tmp", dir);
        spit(path, good, n / 2);
        chmod(tmp, 0500);
        compile1(&j, k, target, dir, "cpu-A", "s", NULL);
        KT_CHECK(!j.cached && same_bin(&j.bin, &ref.bin) && access(path, F_OK) != 0, "truncated entry kept");
        cg_binary_free(&j.bin);
        chmod(tmp, 0700);
    }
    free(good);
    free(foreign);
    cg_binary_free(&ref.bin);
}

/* ---- stale temporary files ---- */

static void test_stale(const char *target)
{
    KirKernel *k = kernel(256);
    const char *dir = path_of("stale");
    CgJob j;
    compile1(&j, k, target, dir, "cpu-A", "s", NULL); /* creates dir and tmp/ */
    cg_binary_free(&j.bin);
    static const struct {
        const char *name;
        long age_s;
        int kept;
    } files[] = {{"0123456789abcdef.999999.0.deadbeef", 7200, 0},
                 {"old.kbin.tmp", 3 * 86400, 0},
                 {"0123456789abcdef.999999.1.deadbeef", 600, 1},
                 {"fresh", 0, 1}};
    char p[700];
    time_t now = time(NULL);
    for (unsigned i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/tmp/%s", dir, files[i].name);
        spit(p, "partial", 7);
        struct timespec ts[2] = {{now - files[i].age_s, 0}, {now - files[i].age_s, 0}};
        KT_CHECK(utimensat(AT_FDCWD, p, ts, 0) == 0, "utimensat: %s", strerror(errno));
    }
    compile1(&j, k, target, dir, "cpu-A", "s", NULL);
    KT_CHECK(j.status == IR_OK && j.cached, "stale: %s", j.msg);
    cg_binary_free(&j.bin);
    for (unsigned i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/tmp/%s", dir, files[i].name);
        KT_CHECK((access(p, F_OK) == 0) == files[i].kept, "%s (age %lds): %s", files[i].name, files[i].age_s,
                 files[i].kept ? "removed" : "kept");
    }
    KT_CHECK(tmp_files(dir) == 2, "%d temp files left, want the 2 fresh ones", tmp_files(dir));
}

/* ---- concurrent writers ---- */

enum { CHILDREN = 4, ROUNDS = 12, PER_CALL = 4 };

/* One process's share: ROUNDS times (dropping the entry every third round), PER_CALL copies of the job on
 * PER_CALL threads; every result must equal ref. Returns the number of bad results. */
static int hammer(const KirKernel *k, const char *target, const char *dir, const char *entry,
                  const CgBinary *ref, int *hits)
{
    int bad = 0;
    for (int r = 0; r < ROUNDS; r++) {
        if (r % 3 == 0) unlink(entry);
        CgJob jobs[PER_CALL];
        memset(jobs, 0, sizeof jobs);
        for (int i = 0; i < PER_CALL; i++) {
            jobs[i].k = k;
            jobs[i].target = cg_target_find(target);
        }
        CgDriverOptions o = {.threads = PER_CALL, .cache_dir = dir, .salt = "s", .host_cpu = "cpu-A"};
        cg_compile_jobs(jobs, PER_CALL, &o);
        for (int i = 0; i < PER_CALL; i++) {
            if (jobs[i].status != IR_OK || !same_bin(&jobs[i].bin, ref)) bad++;
            *hits += jobs[i].cached;
            cg_binary_free(&jobs[i].bin);
        }
    }
    return bad;
}

static void test_concurrent(const char *target)
{
    KirKernel *k = kernel(256);
    const char *dir = path_of("concurrent");
    CgJob ref;
    compile1(&ref, k, target, NULL, "cpu-A", "s", NULL);
    KT_CHECK(ref.status == IR_OK, "reference: %s", ref.msg);

    /* threads: eight misses of one key at once, all writing the same entry */
    CgJob jobs[8];
    memset(jobs, 0, sizeof jobs);
    for (int i = 0; i < 8; i++) {
        jobs[i].k = k;
        jobs[i].target = cg_target_find(target);
    }
    CgDriverOptions o = {.threads = 8, .cache_dir = dir, .salt = "s", .host_cpu = "cpu-A"};
    cg_compile_jobs(jobs, 8, &o);
    for (int i = 0; i < 8; i++) {
        KT_CHECK(jobs[i].status == IR_OK && same_bin(&jobs[i].bin, &ref.bin), "thread writer %d: %s", i,
                 jobs[i].msg);
        cg_binary_free(&jobs[i].bin);
    }
    KT_CHECK(entries(dir) == 1 && tmp_files(dir) == 0, "threads: %d entries, %d temp files", entries(dir),
             tmp_files(dir));
    char entry[600];
    count_files(dir, ".kbin", entry, sizeof entry);

    /* processes: CHILDREN processes of PER_CALL threads drop, read and rewrite the entry at once */
    int go[2];
    KT_CHECK(pipe(go) == 0, "pipe");
    pid_t pids[CHILDREN];
    fflush(stdout); /* or the children print what this process buffered */
    for (int c = 0; c < CHILDREN; c++) {
        pids[c] = fork();
        if (pids[c] == 0) {
            char b;
            close(go[1]);
            if (read(go[0], &b, 1) < 0) _exit(3); /* all start together: the parent closes the pipe */
            int hits = 0, bad = hammer(k, target, dir, entry, &ref.bin, &hits);
            printf("test_cache: writer process %d: %d of %d jobs served from the cache\n", c, hits,
                   ROUNDS * PER_CALL);
            fflush(stdout);
            _exit(bad ? 1 : 0);
        }
        KT_CHECK(pids[c] > 0, "fork: %s", strerror(errno));
    }
    close(go[0]);
    close(go[1]);
    for (int c = 0; c < CHILDREN; c++) {
        int status = 0;
        if (pids[c] > 0) waitpid(pids[c], &status, 0);
        KT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer process %d: %s %d", c,
                 WIFEXITED(status) ? "exit" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    }
    KT_CHECK(entries(dir) <= 1 && tmp_files(dir) == 0, "processes: %d entries, %d temp files", entries(dir),
             tmp_files(dir));
    CgJob j;
    compile1(&j, k, target, dir, "cpu-A", "s", NULL); /* the last writers may have dropped the entry */
    cg_binary_free(&j.bin);
    compile1(&j, k, target, dir, "cpu-A", "s", NULL);
    KT_CHECK(j.cached && same_bin(&j.bin, &ref.bin), "after the writers: entry not a hit");
    cg_binary_free(&j.bin);
    cg_binary_free(&ref.bin);
}

int main(void)
{
    umask(022);
    srand(1);
    snprintf(scratch, sizeof scratch, "/tmp/kiln-test-cache-XXXXXX");
    if (!mkdtemp(scratch) || !(arena = ir_arena_create())) {
        fprintf(stderr, "test_cache: no scratch directory\n");
        return 1;
    }
    const char *host = cg_backend_for(cg_target_find("host"), NULL) ? "host" : NULL;
    const char *gpu = cg_backend_for(cg_target_find("sm_80"), NULL) ? "sm_80" : NULL;
    const char *any = host ? host : gpu;
    test_dirs();
    test_keys(host, gpu);
    if (any) {
        test_entries(any);
        test_stale(any);
        test_concurrent(any);
    } else {
        printf("test_cache: no backend for host or sm_80: entries, temp files and writers not checked\n");
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "chmod -R u+rwx '%s' 2>/dev/null; rm -rf '%s'", scratch, scratch);
    if (system(cmd) != 0) fprintf(stderr, "test_cache: could not remove %s\n", scratch);
    ir_arena_destroy(arena);
    return kt_done("test_cache");
}
