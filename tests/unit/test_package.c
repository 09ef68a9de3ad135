/* test_package.c — the package file: writer round trip, atomic writing (no temporary files left, an
 * existing file untouched on failure), and hostile files, each of which must give the right status and
 * a one-line message that starts with the path, never crash, and never be modified by the reader. */
#define _POSIX_C_SOURCE 200809L

#define RT_STR_(x) #x
#define RT_STR(x)  RT_STR_(x)
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "kfile.h"
#include "kt.h"
#include "runtime/rt_package.h"
#include "runtime/rt_plan.h"

static const char *scratch; /* kf_scratch_open's directory */

/* Entries of the scratch directory that contain `needle` (e.g. ".tmp." or "-journal"). */
static int count_entries(const char *dir, const char *needle)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strstr(e->d_name, needle)) n++;
    if (d) closedir(d);
    return n;
}

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* A package shaped like a small real one: 40 config keys, a 30 kB graph, 150 weights. */
static KilnStatus write_package(const char *path, const char *model)
{
    RtPkgWriter *w;
    char err[512], k[64], v[128];
    KilnStatus s = rt_pkgw_create(path, &w, err, sizeof err);
    KT_CHECK(s == KILN_OK, "create: %s", err);
    if (s) return s;
    rt_pkgw_meta(w, "recipe", "llama");
    rt_pkgw_meta(w, "recipe_file", "recipes/llama.lua");
    rt_pkgw_meta(w, "recipe_hash", "0123456789abcdef");
    rt_pkgw_meta(w, "model", model);
    rt_pkgw_meta(w, "graph_hash", "89abcdef01234567");
    rt_pkgw_meta(w, "targets", "host");
    rt_pkgw_meta(w, "note", "line one\nline two"); /* a control character: the summary must stay one line */
    for (int i = 0; i < 40; i++) {
        snprintf(k, sizeof k, "key_%02d", i);
        snprintf(v, sizeof v, "%d", 1000 + i * 37);
        rt_pkgw_config(w, k, v);
    }
    char *graph = malloc(32768);
    size_t len = 0;
    for (int i = 0; len + 100 < 32768 && i < 600; i++)
        len += (size_t)snprintf(graph + len, 32768 - len, "%%%d = rms_norm(%%%d, w%d) : bf16[T,4096]\n",
                                i + 1, i, i);
    rt_pkgw_graph(w, graph);
    free(graph);
    for (int i = 0; i < 150; i++) {
        snprintf(k, sizeof k, "model.layers.%d.self_attn.q_proj.weight", i);
        rt_pkgw_weight(w, k, "bf16", "[4096,4096]", 4096LL * 4096 * 2 + i);
    }
    s = rt_pkgw_weight(w, "model.embed_tokens.weight", "bf16", "[128256,4096]", 128256LL * 4096 * 2);
    KT_CHECK(s == KILN_OK, "adds: %s", kiln_status_name(s));
    s = rt_pkgw_commit(w, err, sizeof err);
    KT_CHECK(s == KILN_OK, "commit: %s", err);
    return s;
}

static void test_round_trip(void)
{
    const char *path = kf_at("rt.kiln");
    if (write_package(path, "llama-3-8b")) return;
    KT_CHECK(count_entries(scratch, ".tmp.") == 0, "temporary file left after commit");
    KT_CHECK(count_entries(scratch, "-journal") == 0, "journal left after commit");

    KilnPackage *pkg;
    char err[512];
    KilnStatus s = kiln_package_open(path, &pkg, err, sizeof err);
    KT_CHECK(s == KILN_OK, "open: %s", err);
    if (s) return;
    const char *created = kiln_package_meta(pkg, "created");
    KT_CHECK(kiln_package_meta(pkg, "model") && !strcmp(kiln_package_meta(pkg, "model"), "llama-3-8b"),
             "model");
    KT_CHECK(kiln_package_meta(pkg, "format_version") &&
                 !strcmp(kiln_package_meta(pkg, "format_version"), RT_STR(RT_PKG_FORMAT_VERSION)),
             "format_version");
    KT_CHECK(kiln_package_meta(pkg, "kiln_version") &&
                 !strcmp(kiln_package_meta(pkg, "kiln_version"), "0.1.0"),
             "kiln_version");
    KT_CHECK(created && strlen(created) == 20 && created[10] == 'T' && created[19] == 'Z', "created %s",
             created ? created : "(null)");
    KT_CHECK(kiln_package_meta(pkg, "no_such_key") == NULL, "missing key");
    const char *g = rt_pkg_graph_text(pkg);
    KT_CHECK(g && starts_with(g, "%1 = rms_norm(%0, w0) : bf16[T,4096]\n"), "graph text");
    KT_CHECK(kiln_version() == 100, "kiln_version() = %d", kiln_version());
    KT_CHECK(!strcmp(kiln_status_name(KILN_ERR_CORRUPT), "corrupt file"), "status name");
    KT_CHECK(kiln_status_name((KilnStatus)99) != NULL, "unknown status name");

    char *out[2] = {0};
    for (int i = 0; i < 2; i++) {
        FILE *f = tmpfile();
        KT_CHECK(f && rt_pkg_print_summary(pkg, f) == KILN_OK, "summary");
        if (!f) continue;
        long n = ftell(f);
        out[i] = calloc(1, (size_t)n + 1);
        rewind(f);
        KT_CHECK(fread(out[i], 1, (size_t)n, f) == (size_t)n, "read summary");
        fclose(f);
    }
    if (out[0] && out[1]) {
        KT_CHECK(!strcmp(out[0], out[1]), "summary is not deterministic");
        KT_CHECK(strstr(out[0], "weights   151 tensors, 6.08 GB (largest: model.embed_tokens.weight "
                                "bf16[128256,4096] 1.05 GB"),
                 "weights line:\n%s", out[0]);
        KT_CHECK(strstr(out[0], "recipe    llama (recipes/llama.lua, hash 0123456789abcdef)"), "recipe line");
        KT_CHECK(strstr(out[0], "binaries  0 (no targets compiled yet)"), "binaries line");
        KT_CHECK(strstr(out[0], "note=line one?line two"), "control characters are escaped");
        int longest = 0, cur = 0;
        for (const char *p = out[0]; *p; p++)
            cur = *p == '\n' ? 0 : cur + 1, longest = cur > longest ? cur : longest;
        KT_CHECK(longest <= 100, "summary line of %d columns", longest);
        fputs(out[0], stdout);
    }
    free(out[0]);
    free(out[1]);
    kiln_package_close(pkg);
    kiln_package_close(NULL);
}

static void test_writer_errors(void)
{
    const char *path = kf_at("sticky.kiln");
    RtPkgWriter *w;
    char err[512] = "";
    KT_CHECK(rt_pkgw_create(path, &w, err, sizeof err) == KILN_OK, "create: %s", err);
    KT_CHECK(rt_pkgw_config(w, "hidden_size", "4096") == KILN_OK, "first config");
    KT_CHECK(rt_pkgw_config(w, "hidden_size", "4096") == KILN_ERR_ARG, "duplicate config key");
    KT_CHECK(rt_pkgw_weight(w, "x", "bf16", "[1]", 2) == KILN_ERR_ARG, "sticky after failure");
    KT_CHECK(rt_pkgw_meta(w, "model", "m") == KILN_ERR_ARG, "sticky after failure");
    KT_CHECK(rt_pkgw_commit(w, err, sizeof err) == KILN_ERR_ARG, "commit refuses");
    KT_CHECK(starts_with(err, path) && strstr(err, "hidden_size") && !strchr(err, '\n'), "message: %s", err);
    KT_CHECK(access(path, F_OK) != 0, "no package after a refused commit");

    KT_CHECK(rt_pkgw_create(path, &w, err, sizeof err) == KILN_OK, "create: %s", err);
    KT_CHECK(rt_pkgw_meta(w, "format_version", "7") == KILN_ERR_ARG, "format_version is the writer's");
    rt_pkgw_abort(w);
    KT_CHECK(rt_pkgw_create(path, &w, err, sizeof err) == KILN_OK, "create: %s", err);
    KT_CHECK(rt_pkgw_graph(w, "g") == KILN_OK && rt_pkgw_graph(w, "g") == KILN_ERR_ARG, "one graph");
    rt_pkgw_abort(w);
    KT_CHECK(rt_pkgw_create(path, &w, err, sizeof err) == KILN_OK, "create: %s", err);
    KT_CHECK(rt_pkgw_weight(w, "w", "bf16", "[1]", -1) == KILN_ERR_ARG, "negative size");
    rt_pkgw_abort(w);
    KT_CHECK(rt_pkgw_create(NULL, &w, err, sizeof err) == KILN_ERR_ARG, "NULL path");
    KT_CHECK(rt_pkgw_create(path, NULL, NULL, 0) == KILN_ERR_ARG, "NULL out, no err buffer");
    KT_CHECK(rt_pkgw_meta(NULL, "a", "b") == KILN_ERR_ARG, "NULL writer");
    rt_pkgw_abort(NULL);
    KT_CHECK(count_entries(scratch, "sticky") == 0, "leftovers after writer errors");

    /* characters that mean something in an SQLite URI are plain file name characters here */
    path = kf_at("we?ird #name%20&mode=ro.kiln");
    KT_CHECK(rt_pkgw_create(path, &w, err, sizeof err) == KILN_OK &&
                 rt_pkgw_commit(w, err, sizeof err) == KILN_OK,
             "odd name: %s", err);
    KilnPackage *odd = NULL;
    KT_CHECK(kiln_package_open(path, &odd, err, sizeof err) == KILN_OK, "open odd name: %s", err);
    kiln_package_close(odd);
    KT_CHECK(unlink(path) == 0 && count_entries(scratch, "we") == 0, "odd name: exact file name");

    /* created may be fixed by the caller (reproducible packages); an empty package is valid */
    path = kf_at("fixed.kiln");
    KT_CHECK(rt_pkgw_create(path, &w, err, sizeof err) == KILN_OK, "create: %s", err);
    rt_pkgw_meta(w, "created", "2000-01-01T00:00:00Z");
    KT_CHECK(rt_pkgw_commit(w, err, sizeof err) == KILN_OK, "commit: %s", err);
    KilnPackage *pkg = NULL;
    KT_CHECK(kiln_package_open(path, &pkg, err, sizeof err) == KILN_OK, "open: %s", err);
    const char *created = kiln_package_meta(pkg, "created");
    KT_CHECK(created && !strcmp(created, "2000-01-01T00:00:00Z"), "created %s", created ? created : "(null)");
    KT_CHECK(rt_pkg_graph_text(pkg) == NULL, "no graph");
    FILE *f = fopen("/dev/null", "w");
    KT_CHECK(f && rt_pkg_print_summary(pkg, f) == KILN_OK, "summary of an empty package");
    if (f) fclose(f);
    kiln_package_close(pkg);
    unlink(path);
}

static void test_atomicity(void)
{
    char err[512] = "";
    RtPkgWriter *w;

    /* abort leaves nothing */
    const char *path = kf_at("aborted.kiln");
    KT_CHECK(rt_pkgw_create(path, &w, err, sizeof err) == KILN_OK, "create: %s", err);
    KT_CHECK(count_entries(scratch, "aborted.kiln.tmp.") == 1, "temporary file beside the target");
    rt_pkgw_meta(w, "model", "m");
    rt_pkgw_abort(w);
    KT_CHECK(count_entries(scratch, "aborted") == 0, "abort left files");

    /* the target is a directory: create refuses it, nothing is made */
    path = kf_at("isdir.kiln");
    mkdir(path, 0755);
    KT_CHECK(rt_pkgw_create(path, &w, err, sizeof err) == KILN_ERR_IO, "create onto a directory");
    KT_CHECK(starts_with(err, path) && strstr(err, "is a directory, not a regular file"), "message: %s", err);
    struct stat st;
    KT_CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode), "directory untouched");
    KT_CHECK(count_entries(scratch, ".tmp.") == 0, "temporary file left after a refused create");
    rmdir(path);

    /* the target becomes a directory after create: commit checks again, fails, removes the temporary */
    KT_CHECK(rt_pkgw_create(path, &w, err, sizeof err) == KILN_OK, "create: %s", err);
    mkdir(path, 0755);
    KT_CHECK(rt_pkgw_commit(w, err, sizeof err) == KILN_ERR_IO, "commit onto a directory");
    KT_CHECK(starts_with(err, path), "message: %s", err);
    KT_CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode), "directory untouched");
    KT_CHECK(count_entries(scratch, ".tmp.") == 0, "temporary file left after a failed commit");
    rmdir(path);

    /* a FIFO and a symbolic link are refused too (a rename would replace them) */
    path = kf_at("fifo-out.kiln");
    KT_CHECK(mkfifo(path, 0644) == 0, "mkfifo");
    KT_CHECK(rt_pkgw_create(path, &w, err, sizeof err) == KILN_ERR_IO, "create onto a FIFO");
    KT_CHECK(starts_with(err, path) && strstr(err, "is a FIFO, not a regular file"), "message: %s", err);
    KT_CHECK(lstat(path, &st) == 0 && S_ISFIFO(st.st_mode), "FIFO untouched");
    unlink(path);
    path = kf_at("link-out.kiln");
    KT_CHECK(symlink("elsewhere.kiln", path) == 0, "symlink");
    KT_CHECK(rt_pkgw_create(path, &w, err, sizeof err) == KILN_ERR_IO, "create onto a link");
    KT_CHECK(starts_with(err, path) && strstr(err, "symbolic link"), "message: %s", err);
    KT_CHECK(lstat(path, &st) == 0 && S_ISLNK(st.st_mode), "link untouched");
    unlink(path);
    KT_CHECK(count_entries(scratch, ".tmp.") == 0, "temporary file left after a refused create");

    /* no directory to write into */
    path = kf_at("nodir/x.kiln");
    KT_CHECK(rt_pkgw_create(path, &w, err, sizeof err) == KILN_ERR_IO, "create in a missing directory");
    KT_CHECK(starts_with(err, path) && strstr(err, "cannot create temporary file"), "message: %s", err);
    kf_spit(kf_at("plainfile"), "x", 1);
    path = kf_at("plainfile/x.kiln");
    KT_CHECK(rt_pkgw_create(path, &w, err, sizeof err) == KILN_ERR_IO, "create under a regular file");
    KT_CHECK(starts_with(err, path), "message: %s", err);
    unlink(kf_at("plainfile"));
    if (geteuid() != 0) { /* root writes anywhere */
        const char *ro = kf_at("ro");
        mkdir(ro, 0555);
        path = kf_at("ro/x.kiln");
        KT_CHECK(rt_pkgw_create(path, &w, err, sizeof err) == KILN_ERR_IO, "create in a read-only directory");
        KT_CHECK(starts_with(err, path) && strstr(err, "Permission denied"), "message: %s", err);
        KT_CHECK(count_entries(ro, "") == 0, "leftovers in read-only dir");
        rmdir(ro);
    }

    /* an existing package survives a failed commit and an abort, and is replaced by a good one */
    path = kf_at("existing.kiln");
    if (write_package(path, "old-model")) return;
    long n0, n1;
    char *before = kf_slurp(path, &n0);
    KT_CHECK(rt_pkgw_create(path, &w, err, sizeof err) == KILN_OK, "create: %s", err);
    rt_pkgw_config(w, "a", "1");
    rt_pkgw_config(w, "a", "2");
    KT_CHECK(rt_pkgw_commit(w, err, sizeof err) != KILN_OK, "failed commit");
    KT_CHECK(rt_pkgw_create(path, &w, err, sizeof err) == KILN_OK, "create: %s", err);
    rt_pkgw_abort(w);
    char *after = kf_slurp(path, &n1);
    KT_CHECK(before && after && n0 == n1 && !memcmp(before, after, (size_t)n0), "existing file changed");
    KT_CHECK(count_entries(scratch, ".tmp.") == 0, "temporary files left");
    free(before);
    free(after);
    if (write_package(path, "new-model")) return;
    KilnPackage *pkg;
    KT_CHECK(kiln_package_open(path, &pkg, err, sizeof err) == KILN_OK, "open: %s", err);
    if (pkg) {
        KT_CHECK(!strcmp(kiln_package_meta(pkg, "model"), "new-model"), "replaced");
        kiln_package_close(pkg);
    }
    unlink(path);
}

/* Opens a hostile file: the status must match, the message start with the path and be one line, *out
 * stay NULL, and the file and directory stay exactly as they were. */
static void expect_open(const char *path, KilnStatus want, const char *needle)
{
    long n0 = 0, n1 = 0;
    char *before = kf_slurp(path, &n0);
    int entries = count_entries(scratch, "");
    KilnPackage *pkg = (KilnPackage *)1;
    char err[512] = "";
    KilnStatus s = kiln_package_open(path, &pkg, err, sizeof err);
    KT_CHECK(s == want, "%s: got %s, want %s (%s)", path, kiln_status_name(s), kiln_status_name(want), err);
    KT_CHECK((s == KILN_OK) == (pkg != NULL), "%s: *out is wrong", path);
    KT_CHECK(s == KILN_OK || (starts_with(err, path) && !strchr(err, '\n')), "%s: message: %s", path, err);
    KT_CHECK(!needle || strstr(err, needle), "%s: message lacks '%s': %s", path, needle, err);
    char *after = kf_slurp(path, &n1);
    KT_CHECK((!before && !after) || (before && after && n0 == n1 && !memcmp(before, after, (size_t)n0)),
             "%s: the reader modified the file", path);
    KT_CHECK(count_entries(scratch, "") == entries, "%s: the reader left files behind", path);
    if (s == KILN_OK) kiln_package_close(pkg);
    KT_CHECK(kiln_package_open(path, &pkg, NULL, 0) == want, "%s: without an err buffer", path);
    kiln_package_close(pkg);
    free(before);
    free(after);
}

/* Runs SQL on a copy of the good package (as `sqlite3` would), for hand-made damage. */
static void edit_copy(const char *good, const char *path, const char *sql)
{
    long n;
    char *b = kf_slurp(good, &n);
    kf_spit(path, b, n);
    free(b);
    sqlite3 *db = NULL;
    KT_CHECK(sqlite3_open(path, &db) == SQLITE_OK && sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK,
             "%s: %s", sql, db ? sqlite3_errmsg(db) : "open");
    sqlite3_close(db);
}

static void test_hostile(void)
{
    char good[512];
    snprintf(good, sizeof good, "%s", kf_at("good.kiln"));
    if (write_package(good, "llama-3-8b")) return;
    long n;
    char *g = kf_slurp(good, &n);
    KT_CHECK(g && n > 8 * 4096 && n % 4096 == 0, "package of %ld bytes", n);
    if (!g) return;
    expect_open(good, KILN_OK, NULL);

    expect_open(kf_at("missing.kiln"), KILN_ERR_IO, "does not exist");
    mkdir(kf_at("dir.kiln"), 0755);
    expect_open(kf_at("dir.kiln"), KILN_ERR_IO, "directory");
    mkfifo(kf_at("fifo.kiln"), 0644);
    expect_open(kf_at("fifo.kiln"), KILN_ERR_IO, "not a regular file");
    kf_spit(kf_at("empty.kiln"), "", 0);
    expect_open(kf_at("empty.kiln"), KILN_ERR_FORMAT, "empty");
    char noise[5000];
    srand(42);
    for (size_t i = 0; i < sizeof noise; i++)
        noise[i] = (char)rand();
    kf_spit(kf_at("random.kiln"), noise, sizeof noise);
    expect_open(kf_at("random.kiln"), KILN_ERR_FORMAT, "not an SQLite file");
    const char *text = "model: llama\nthis is a text file, not a package\n";
    kf_spit(kf_at("text.kiln"), text, (long)strlen(text));
    expect_open(kf_at("text.kiln"), KILN_ERR_FORMAT, "not an SQLite file");
    kf_spit(kf_at("short.kiln"), "SQLite", 6);
    expect_open(kf_at("short.kiln"), KILN_ERR_FORMAT, "not an SQLite file");

    const long cut[] = {n / 2, n - 4096, 100, 4096, 50, n - 1};
    for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++) {
        kf_spit(kf_at("truncated.kiln"), g, cut[i]);
        expect_open(kf_at("truncated.kiln"), KILN_ERR_CORRUPT, "truncated");
    }

    /* Damaged pages. SQLite keeps no page checksums, so damage inside a stored value (a text payload, an
     * overflow page, free space) is invisible to quick_check; these aim at b-tree structure: 64 bytes in
     * the middle of every table-leaf page whose cells reach its middle, and 16 bytes over the cell-pointer
     * array of every non-empty b-tree page (page 1 included). Each must be reported as corrupt. */
    int damaged = 0;
    for (long pg = 0; pg < n / 4096; pg++) {
        const unsigned char *page = (const unsigned char *)g + pg * 4096;
        int hdr = pg == 0 ? 100 : 0, type = page[hdr], ncell = page[hdr + 3] << 8 | page[hdr + 4];
        int content = page[hdr + 5] << 8 | page[hdr + 6]; /* where the cells begin */
        if ((type != 2 && type != 5 && type != 10 && type != 13) || ncell == 0) continue;
        for (int where = 0; where < 2; where++) {
            long off = where ? hdr + 8 : 2048;
            int len = where ? 16 : 64;
            if (!where && (type != 13 || content == 0 || content > 2048)) continue;
            char *b = malloc((size_t)n);
            memcpy(b, g, (size_t)n);
            for (int k = 0; k < len; k++)
                b[pg * 4096 + off + k] ^= 0x5a;
            kf_spit(kf_at("flipped.kiln"), b, n);
            free(b);
            expect_open(kf_at("flipped.kiln"), KILN_ERR_CORRUPT, "corrupt package");
            damaged++;
        }
    }
    KT_CHECK(damaged >= 10, "only %d damaged variants", damaged);
    {
        char *b = malloc((size_t)n);
        memcpy(b, g, (size_t)n);
        b[16] = 3, b[17] = 0; /* page size 768 */
        kf_spit(kf_at("pagesize.kiln"), b, n);
        free(b);
        expect_open(kf_at("pagesize.kiln"), KILN_ERR_CORRUPT, "page size");
    }

    sqlite3 *db;
    sqlite3_open(kf_at("foreign.db"), &db);
    sqlite3_exec(db, "CREATE TABLE people(name TEXT, age INTEGER); INSERT INTO people VALUES ('ada', 36);",
                 NULL, NULL, NULL);
    sqlite3_close(db);
    expect_open(kf_at("foreign.db"), KILN_ERR_FORMAT, "not a kiln package (application_id 0x00000000");

    edit_copy(good, kf_at("future.kiln"), "PRAGMA user_version = " RT_STR(RT_PKG_FORMAT_VERSION) "0");
    expect_open(kf_at("future.kiln"), KILN_ERR_FORMAT, "newer");
    edit_copy(good, kf_at("past.kiln"), "PRAGMA user_version = 1");
    expect_open(kf_at("past.kiln"), KILN_ERR_FORMAT, "older");
    edit_copy(good, kf_at("noweights.kiln"), "DROP TABLE weights");
    expect_open(kf_at("noweights.kiln"), KILN_ERR_CORRUPT, "missing table weights");
    edit_copy(good, kf_at("nocolumn.kiln"), "ALTER TABLE weights RENAME COLUMN nbytes TO size");
    expect_open(kf_at("nocolumn.kiln"), KILN_ERR_CORRUPT, "missing column weights.nbytes");
    edit_copy(good, kf_at("view.kiln"),
              "DROP TABLE weights; CREATE VIEW weights(name, dtype, shape, nbytes) AS"
              " SELECT 'a', 'b', 'c', 1");
    expect_open(kf_at("view.kiln"), KILN_ERR_CORRUPT, "missing table weights");
    /* a leftover journal beside a package must be ignored, not rolled back into it */
    edit_copy(good, kf_at("journal.kiln"), "PRAGMA user_version = " RT_STR(RT_PKG_FORMAT_VERSION));
    kf_spit(kf_at("journal.kiln-journal"), noise, sizeof noise);
    expect_open(kf_at("journal.kiln"), KILN_OK, NULL);

    KilnPackage *pkg = (KilnPackage *)1;
    KT_CHECK(kiln_package_open(NULL, &pkg, NULL, 0) == KILN_ERR_ARG && pkg == NULL, "NULL path");
    KT_CHECK(kiln_package_open(good, NULL, NULL, 0) == KILN_ERR_ARG, "NULL out");
    KT_CHECK(kiln_package_meta(NULL, "model") == NULL && rt_pkg_graph_text(NULL) == NULL, "NULL package");
    free(g);
}

/* rt_plan_pick: the smallest BM >= M, else the largest BM, but a binary that splits K inside the launch
 * (matmul ws=1) only when its BM covers M, even when a retried default has the same BM; a bucket routed
 * to a tuned binary (rt_tune.h) runs it. */
static void test_pick(void)
{
    static RtPlanKernel k = {.n_bins = 3, .n_pkg = 3, .m_param = 0};
    RtPlanBinary *bins = k.bins;
    bins[0] = (RtPlanBinary){.bm = 64, .split = 4}, bins[1] = (RtPlanBinary){.bm = 64, .split = 1};
    bins[2] = (RtPlanBinary){.bm = 16, .split = 1};
    static const struct {
        int64_t m;
        int want;
    } cases[] = {{1, 2}, {16, 2}, {17, 0}, {64, 0}, {65, 1}, {4096, 1}};
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = rt_plan_pick(&k, &cases[i].m);
        KT_CHECK(got == cases[i].want, "pick M=%lld: bin %d, want %d", (long long)cases[i].m, got,
                 cases[i].want);
    }
    bins[1].bm = 32; /* no bin covers M = 100 but the split one's 64: fall back to the largest unsplit */
    int64_t m = 100;
    KT_CHECK(rt_plan_pick(&k, &m) == 1, "pick M=100 falls back to an unsplit binary");
    /* buckets T=1..128: a launch of M rows meets T = 2^ceil(log2 M), clamped to the last */
    k.n_buckets = 8, k.n_bins = 5;
    memset(k.route, -1, sizeof k.route);
    k.route[0] = 3, k.route[7] = 4;
    static const struct {
        int64_t m;
        int bucket, pick;
    } tuned[] = {{0, 0, 3},  {1, 0, 3},  {2, 1, 2},   {3, 2, 2},
                 {64, 6, 0}, {65, 7, 4}, {100, 7, 4}, {5000, 7, 4}};
    for (unsigned i = 0; i < sizeof tuned / sizeof tuned[0]; i++) {
        int b = rt_plan_bucket(&k, &tuned[i].m), got = rt_plan_pick(&k, &tuned[i].m);
        KT_CHECK(b == tuned[i].bucket && got == tuned[i].pick,
                 "M=%lld: bucket %d (want %d), bin %d (want %d)", (long long)tuned[i].m, b, tuned[i].bucket,
                 got, tuned[i].pick);
    }
}

/* rt_plan_pick among binaries of one BM (pl_compile.c's fourth variant, m_hint 256, beside the default):
 * of the unsplit binaries with the BM it picks, the widest N tile whose grid fills the device, else the one
 * with the most programs; with the SM count unknown (a host), the first. N 4096 on 132 SMs: 100 rows give 16
 * and 64 programs, 160 rows BN 256 32 programs and BN 64 128 (neither fills: BN 64), 1024 rows 128 and 512
 * (only BN 64 fills), 2048 rows 256 and 1024 (both: BN 256). */
static void test_pick_fill(void)
{
    static RtPlanKernel k = {.n_bins = 3, .n_pkg = 3, .m_param = 0, .n_sms = 132};
    static char c0[] = "BM=16 BN=32", c1[] = "BM=128 BN=256", c2[] = "BM=128 BN=64";
    char *cfg[3] = {c0, c1, c2};
    int64_t bm[3] = {16, 128, 128}, bn[3] = {32, 256, 64};
    for (int i = 0; i < 3; i++) {
        k.bins[i] = (RtPlanBinary){.config = cfg[i], .bm = bm[i], .split = 1};
        k.bins[i].grid[0] = (RtGridAxis){0, 0, 1, bm[i]}; /* cdiv(M, BM) */
        k.bins[i].grid[1] = (RtGridAxis){-1, 4096 / bn[i], 0, 1};
        k.bins[i].grid[2] = (RtGridAxis){-1, 1, 0, 1};
    }
    static const struct {
        int64_t m;
        int want, want_no_sms;
    } cases[] = {{8, 0, 0}, {100, 2, 1}, {160, 2, 1}, {1024, 2, 1}, {2048, 1, 1}};
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        k.n_sms = 132;
        int got = rt_plan_pick(&k, &cases[i].m);
        k.n_sms = 0;
        int got0 = rt_plan_pick(&k, &cases[i].m);
        KT_CHECK(got == cases[i].want && got0 == cases[i].want_no_sms,
                 "pick M=%lld: bin %d on 132 SMs (want %d), %d with none (want %d)", (long long)cases[i].m,
                 got, cases[i].want, got0, cases[i].want_no_sms);
    }
}

int main(void)
{
    if (!(scratch = kf_scratch_open("package"))) return 1;
    test_pick_fill();
    test_round_trip();
    test_writer_errors();
    test_atomicity();
    test_hostile();
    test_pick();
    kf_scratch_close();
    return kt_done("test_package");
}
