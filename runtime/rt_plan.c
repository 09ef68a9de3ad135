/* rt_plan.c — loading and checking a package's launch plan for one target (rt_plan.h); the checks
 * against the kernels' families are rt_plan_check.c's. */
#define _POSIX_C_SOURCE 200809L
#include "rt_plan.h"

#include <sqlite3.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_file.h"
#include "rt_package.h"

typedef struct Loader {
    KilnPackage *pkg;
    sqlite3 *db;
    const char *path;
    RtPlan *p;
    char *err;
    int errlen;
    KilnStatus s;
} Loader;

static KilnStatus fail(Loader *L, KilnStatus s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static KilnStatus fail(Loader *L, KilnStatus s, const char *fmt, ...)
{
    if (L->s) return L->s;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    L->s = rt_file_errf(L->err, L->errlen, s, "%s: %s", L->path, msg);
    return L->s;
}

static char *dup_col(Loader *L, sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    char *s = strdup(t ? (const char *)t : "");
    if (!s) fail(L, KILN_ERR_NOMEM, "out of memory");
    return s;
}

static sqlite3_stmt *query(Loader *L, const char *sql)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(L->db, sql, -1, &st, NULL) != SQLITE_OK) {
        fail(L, KILN_ERR_CORRUPT, "corrupt package (%s)", sqlite3_errmsg(L->db));
        return NULL;
    }
    return st;
}

static int count_rows(Loader *L, const char *sql)
{
    sqlite3_stmt *st = query(L, sql);
    int n = st && sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
    sqlite3_finalize(st);
    if (n < 0 || n > 1 << 20) fail(L, KILN_ERR_CORRUPT, "corrupt package (%s)", sql);
    return n;
}

static int64_t meta_i(Loader *L, const char *key, int64_t hi)
{
    const char *v = kiln_package_meta(L->pkg, key);
    char *end;
    long long x = v ? strtoll(v, &end, 10) : -1;
    if (v && end != v && !*end && x > hi) {
        fail(L, KILN_ERR_CORRUPT, "meta %s %lld: above %lld", key, x, (long long)hi);
        return 1;
    }
    if (!v || end == v || *end || x < 1) {
        fail(L, KILN_ERR_FORMAT,
             "meta %s missing or not a positive integer (a package from an older kiln: "
             "compile it again)",
             key);
        return 1;
    }
    return x;
}

/* ---- tables ---- */

static void load_weights(Loader *L)
{
    RtPlan *p = L->p;
    if ((p->n_weights = count_rows(L, "SELECT count(*) FROM weights")) < 0) return;
    p->weights = calloc((size_t)p->n_weights + 1, sizeof *p->weights);
    sqlite3_stmt *st = query(L, "SELECT name, dtype, shape, nbytes FROM weights ORDER BY name");
    if (!p->weights) fail(L, KILN_ERR_NOMEM, "out of memory");
    int i = 0;
    for (; st && !L->s && i < p->n_weights && sqlite3_step(st) == SQLITE_ROW; i++) {
        RtPlanWeight *w = &p->weights[i];
        w->name = dup_col(L, st, 0), w->dtype = dup_col(L, st, 1), w->shape = dup_col(L, st, 2);
        w->nbytes = sqlite3_column_int64(st, 3);
        if (w->nbytes < 0) fail(L, KILN_ERR_CORRUPT, "weight %s: negative size", w->name);
    }
    if (st && !L->s && i < p->n_weights) /* fewer rows than count(*): a damaged table */
        fail(L, KILN_ERR_CORRUPT, "weights table: %d rows read of %d", i, p->n_weights);
    sqlite3_finalize(st);
}

static void load_buffers(Loader *L)
{
    RtPlan *p = L->p;
    if ((p->n_bufs = count_rows(L, "SELECT count(*) FROM buffers")) < 0) return;
    p->bufs = calloc((size_t)p->n_bufs + 1, sizeof *p->bufs);
    sqlite3_stmt *st = query(L, "SELECT name, kind, dtype, shape, offset, bytes, output FROM buffers");
    if (!p->bufs) fail(L, KILN_ERR_NOMEM, "out of memory");
    int i = 0;
    for (; st && !L->s && i < p->n_bufs && sqlite3_step(st) == SQLITE_ROW; i++) {
        RtPlanBuf *b = &p->bufs[i];
        b->name = dup_col(L, st, 0), b->dtype = dup_col(L, st, 2), b->shape = dup_col(L, st, 3);
        const char *kind = (const char *)sqlite3_column_text(st, 1);
        b->offset = sqlite3_column_int64(st, 4), b->bytes = sqlite3_column_int64(st, 5);
        if (sqlite3_column_type(st, 6) != SQLITE_NULL) b->output = dup_col(L, st, 6);
        if (kind && !strcmp(kind, "act")) {
            b->kind = RT_BUF_ACT;
            if (b->offset < 0 || b->bytes < 0 || b->offset > p->act_bytes - b->bytes)
                fail(L, KILN_ERR_CORRUPT, "buffer %s lies outside the %lld-byte arena",
                     b->name ? b->name : "?", (long long)p->act_bytes);
        } else if (kind && !strcmp(kind, "input")) {
            b->kind = RT_BUF_INPUT;
        } else {
            fail(L, KILN_ERR_CORRUPT, "buffer %s: unknown kind %s", b->name ? b->name : "?",
                 kind ? kind : "");
        }
    }
    if (st && !L->s && i < p->n_bufs) /* fewer rows than count(*): a damaged table */
        fail(L, KILN_ERR_CORRUPT, "buffers table: %d rows read of %d", i, p->n_bufs);
    sqlite3_finalize(st);
}

/* "x:ptr<bf16> n_rows:i32" */
static void parse_params(Loader *L, RtPlanKernel *k, const char *text)
{
    char *copy = strdup(text), *save = NULL;
    if (!copy) {
        fail(L, KILN_ERR_NOMEM, "out of memory");
        return;
    }
    for (char *t = strtok_r(copy, " ", &save); t && !L->s; t = strtok_r(NULL, " ", &save)) {
        char *colon = strchr(t, ':');
        if (!colon || k->n_params == RT_PLAN_MAX_ARGS) {
            fail(L, KILN_ERR_CORRUPT, "kernel %s: bad params '%s'", k->name, text);
            break;
        }
        *colon = 0;
        int ptr = !strncmp(colon + 1, "ptr<", 4);
        if (!ptr && strcmp(colon + 1, "i32")) {
            fail(L, KILN_ERR_CORRUPT, "kernel %s: param %s has type %s (a plan passes pointers and i32)",
                 k->name, t, colon + 1);
            break;
        }
        k->param_is_ptr[k->n_params] = ptr;
        size_t dl = ptr ? strlen(colon + 5) : 0;
        if (ptr && (dl < 2 || dl >= sizeof k->param_dtype[0] || colon[5 + dl - 1] != '>')) {
            fail(L, KILN_ERR_CORRUPT, "kernel %s: param %s has type %s", k->name, t, colon + 1);
            break;
        }
        if (ptr) memcpy(k->param_dtype[k->n_params], colon + 5, dl - 1);
        if (!(k->param_names[k->n_params++] = strdup(t))) fail(L, KILN_ERR_NOMEM, "out of memory");
    }
    free(copy);
}

/* The kernel IR text's param lines (%0 = param "x" : ptr<bf16> rdonly) must be the params column's, in
 * order; they say which pointers the kernel only reads. The text must hash to ir_hash (the tuning store's
 * key for the kernel). */
/* The kernel row names what its IR text is: the text's first line is "kernel NAME family=FAMILY ...", and
 * the name is the family and the spec's values mangled (ir/kfam.c kfam_spec_name: joined by '_', every
 * other byte not a letter or digit '_'). So a family or spec edited in the row alone is caught (the text
 * is covered by ir_hash), and the checks that follow read the contract the code was built from. */
static void check_identity(Loader *L, const RtPlanKernel *k, const char *text)
{
    char head[600], mangled[600];
    int n = snprintf(head, sizeof head, "kernel %s family=%s", k->name, k->family);
    size_t fl = strlen(k->family), at = 0;
    int ok = n > 0 && n < (int)sizeof head && !strncmp(text, head, (size_t)n) &&
             (text[n] == ' ' || text[n] == '\n' || !text[n]) && fl && !strncmp(k->spec, k->family, fl) &&
             (k->spec[fl] == ' ' || !k->spec[fl]);
    size_t len = 0;
    for (const char *v = k->spec + fl; ok && *v; v += 1 + len) { /* " key=value" -> "_value" */
        const char *eq = strchr(v + 1, '=');
        len = strcspn(v + 1, " ");
        ok = *v == ' ' && eq && eq < v + 1 + len && at + 1 + len < sizeof mangled;
        if (!ok) break;
        mangled[at++] = '_';
        for (const char *c = eq + 1; c < v + 1 + len; c++)
            mangled[at++] =
                (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ? *c : '_';
    }
    mangled[at] = 0;
    if (!ok || strncmp(k->name, k->family, fl) || strcmp(k->name + fl, mangled))
        fail(L, KILN_ERR_CORRUPT,
             "kernel %s: its family '%s' and spec '%s' are not what its kernel IR was built from", k->name,
             k->family, k->spec);
}

static void parse_ir_params(Loader *L, RtPlanKernel *k, const char *text)
{
    char want[17];
    snprintf(want, sizeof want, "%016llx", (unsigned long long)rt_pkg_fnv1a64(text, strlen(text)));
    if (RT_HASH_DIFFERS(strcmp(want, k->ir_hash))) {
        fail(L, KILN_ERR_CORRUPT, "kernel %s: kernel IR text does not hash to its ir_hash %.20s", k->name,
             k->ir_hash);
        return;
    }
    int n = 0, value[RT_PLAN_MAX_ARGS];
    for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        const char *q = strstr(line, " = param \""), *eol = strchr(line, '\n');
        if (!q || line[0] != '%' || (eol && q > eol)) continue;
        q += 10;
        const char *qe = strchr(q, '"');
        size_t len = qe ? (size_t)(qe - q) : 0;
        if (!qe || n == k->n_params || strlen(k->param_names[n]) != len ||
            strncmp(q, k->param_names[n], len) || strncmp(qe, "\" : ", 4)) {
            fail(L, KILN_ERR_CORRUPT, "kernel %s: params '%s' disagree with its kernel IR", k->name,
                 k->params);
            return;
        }
        const char *ty = qe + 4, *te = eol ? eol : ty + strlen(ty), *ro = ty + strcspn(ty, " \n");
        int rdonly = 0; /* flags after the type: "rdonly noalias" */
        for (const char *f = ro; f < te; f += strcspn(f + 1, " \n") + 1)
            rdonly |= te - f >= 7 && !strncmp(f, " rdonly", 7) && (f + 7 == te || f[7] == ' ');
        int ptr = !strncmp(ty, "ptr<", 4);
        size_t dl = strlen(k->param_dtype[n]);
        if (ptr != k->param_is_ptr[n] ||
            (ptr ? (size_t)(ro - ty) != dl + 5 || strncmp(ty + 4, k->param_dtype[n], dl)
                 : (ro - ty != 3 || strncmp(ty, "i32", 3)))) {
            fail(L, KILN_ERR_CORRUPT, "kernel %s: params '%s' disagree with its kernel IR", k->name,
                 k->params);
            return;
        }
        k->param_rdonly[n] = (unsigned char)rdonly;
        value[n++] = atoi(line + 1);
    }
    if (n != k->n_params) {
        fail(L, KILN_ERR_CORRUPT, "kernel %s: params '%s' disagree with its kernel IR", k->name, k->params);
        return;
    }
    /* which pointers the kernel loads from and which it stores to: "[%r = ]load %P, ...", P a param or a
     * pointer selected from params ("%r = select %c, %a, %b : ptr<bf16>": a group matmul's outputs) */
    enum { MAX_PTRS = 64 };
    int pv[MAX_PTRS], np = 0;
    unsigned pm[MAX_PTRS];
    for (int i = 0; i < k->n_params && np < MAX_PTRS; i++)
        if (k->param_is_ptr[i]) pv[np] = value[i], pm[np++] = 1u << i;
    for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        const char *op = line + strspn(line, " "), *eq = strstr(op, " = "), *eol = strchr(op, '\n');
        int res = -1;
        if (*op == '%' && eq && (!eol || eq < eol)) res = atoi(op + 1), op = eq + 3;
        unsigned m = 0;
        if (!strncmp(op, "select %", 8) && np < MAX_PTRS) {
            const char *a = strchr(op + 8, '%'), *b = a ? strchr(a + 1, '%') : NULL;
            for (int j = 0; b && (!eol || b < eol) && j < np; j++)
                if (pv[j] == atoi(a + 1) || pv[j] == atoi(b + 1)) m |= pm[j];
            if (m) pv[np] = res, pm[np++] = m;
            continue;
        }
        static const char *const ops[] = {"load %", "store %", "atomic_add %", "arrive %"};
        for (int o = 0; o < 4; o++) {
            size_t ol = strlen(ops[o]);
            if (strncmp(op, ops[o], ol)) continue;
            int v = atoi(op + ol);
            for (int j = 0; j < np; j++)
                if (pv[j] == v) m |= pm[j];
            for (int i = 0; i < k->n_params; i++)
                if (m >> i & 1) k->param_mem[i] |= o ? RT_PLAN_STORES : RT_PLAN_LOADS;
        }
    }
}

static int param_index(const RtPlanKernel *k, const char *name, size_t n)
{
    for (int i = 0; i < k->n_params; i++)
        if (strlen(k->param_names[i]) == n && !strncmp(k->param_names[i], name, n)) return i;
    return -1;
}

/* "cdiv(n_tokens*1,1) 4 1" */
static void parse_grid(Loader *L, const RtPlanKernel *k, RtPlanBinary *b, const char *text)
{
    const char *s = text;
    for (int a = 0; a < 3 && !L->s; a++) {
        while (*s == ' ')
            s++;
        RtGridAxis *g = &b->grid[a];
        char *end;
        if (!strncmp(s, "cdiv(", 5)) {
            const char *name = s + 5, *star = strchr(name, '*');
            long long mul = 0, div = 0;
            if (star) mul = strtoll(star + 1, &end, 10);
            if (!star || *end != ',' || (div = strtoll(end + 1, &end, 10)) < 1 || *end != ')' || mul < 1 ||
                mul > INT32_MAX || div > INT32_MAX ||
                (g->param = param_index(k, name, (size_t)(star - name))) < 0 || k->param_is_ptr[g->param]) {
                fail(L, KILN_ERR_CORRUPT, "kernel %s: bad grid '%s'", k->name, text);
                return;
            }
            g->mul = mul, g->div = div;
            s = end + 1;
        } else {
            long long c = strtoll(s, &end, 10);
            if (end == s || c < 0 || c > INT32_MAX) {
                fail(L, KILN_ERR_CORRUPT, "kernel %s: bad grid '%s'", k->name, text);
                return;
            }
            g->param = -1, g->c = c;
            s = end;
        }
    }
}

static void load_kernels(Loader *L)
{
    RtPlan *p = L->p;
    if ((p->n_kernels = count_rows(L, "SELECT count(*) FROM kernels")) < 0) return;
    p->kernels = calloc((size_t)p->n_kernels + 1, sizeof *p->kernels);
    if (!p->kernels) {
        fail(L, KILN_ERR_NOMEM, "out of memory");
        return;
    }
    /* kernel ids are 0..n-1 (the writer numbers them in schedule order) */
    sqlite3_stmt *st =
        query(L, "SELECT id, name, family, spec, params, ir_hash, ir_text FROM kernels ORDER BY id");
    for (int i = 0; st && !L->s && sqlite3_step(st) == SQLITE_ROW; i++) {
        RtPlanKernel *k = &p->kernels[i];
        if (i >= p->n_kernels || sqlite3_column_int64(st, 0) != i) {
            fail(L, KILN_ERR_CORRUPT, "corrupt package (kernel ids are not 0..%d)", p->n_kernels - 1);
            break;
        }
        k->name = dup_col(L, st, 1), k->family = dup_col(L, st, 2), k->spec = dup_col(L, st, 3);
        k->ir_hash = dup_col(L, st, 5), k->params = dup_col(L, st, 4);
        const char *params = (const char *)sqlite3_column_text(st, 4);
        if (!params) fail(L, KILN_ERR_CORRUPT, "kernel %s: no params", k->name);
        if (!L->s) parse_params(L, k, params);
        const char *ir = (const char *)sqlite3_column_text(st, 6);
        if (!L->s) parse_ir_params(L, k, ir ? ir : "");
        if (!L->s) check_identity(L, k, ir ? ir : "");
        k->m_param = param_index(k, "M", 1);
        if (k->m_param >= 0 && k->param_is_ptr[k->m_param]) k->m_param = -1;
    }
    sqlite3_finalize(st);
    /* one binary per kernel for the target: the first by config order (a tuned config, when the
     * package has several, is chosen by the tuning store, not here) */
    st = query(L, "SELECT kernel_id, config, grid, format, entry, block, smem, data, hash FROM binaries "
                  "WHERE target = ?1 ORDER BY kernel_id, config");
    if (st) sqlite3_bind_text(st, 1, p->target, -1, SQLITE_STATIC);
    while (st && !L->s && sqlite3_step(st) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        if (id < 0 || id >= p->n_kernels) {
            fail(L, KILN_ERR_CORRUPT, "binary of unknown kernel %lld", (long long)id);
            break;
        }
        RtPlanKernel *k = &p->kernels[id];
        if (k->n_bins == RT_PLAN_MAX_VARIANTS) {
            fail(L, KILN_ERR_CORRUPT, "kernel %s: more than %d %s binaries", k->name, RT_PLAN_MAX_VARIANTS,
                 p->target);
            break;
        }
        const void *data = sqlite3_column_blob(st, 7);
        size_t size = (size_t)sqlite3_column_bytes(st, 7);
        const char *hash = (const char *)sqlite3_column_text(st, 8);
        char want[17];
        const char *f[4];
        for (int c = 0; c < 4; c++)
            f[c] = (const char *)sqlite3_column_text(st, 1 + c);
        rt_pkg_binary_hash(data, size, p->target, f[0], f[1], f[2], f[3], sqlite3_column_int(st, 5),
                           sqlite3_column_int(st, 6), want);
        if (!data || !size) {
            fail(L, KILN_ERR_CORRUPT, "kernel %s: %s binary is empty", k->name, p->target);
            break;
        }
        if (!f[3] || strcmp(f[3], k->name)) { /* the code's symbol is the kernel's name (ir/kfam.c) */
            fail(L, KILN_ERR_CORRUPT, "kernel %s: %s binary's entry %.80s is not the kernel's name", k->name,
                 p->target, f[3] ? f[3] : "(none)");
            break;
        }
        if (!hash || RT_HASH_DIFFERS(strcmp(hash, want))) {
            fail(L, KILN_ERR_CORRUPT,
                 "kernel %s: %s binary damaged (hash %s, stored %s; it covers the code, its config, grid and "
                 "launch fields)",
                 k->name, p->target, want, hash ? hash : "none");
            break;
        }
        RtPlanBinary *b = &k->bins[k->n_bins++];
        k->n_pkg = k->n_bins;
        b->config = dup_col(L, st, 1), b->format = dup_col(L, st, 3), b->entry = dup_col(L, st, 4);
        b->block = sqlite3_column_int(st, 5), b->smem = sqlite3_column_int(st, 6);
        b->bm = rt_plan_config_i(b->config, "BM", 0);
        b->split = rt_plan_config_i(b->config, "SPLIT_K", 1);
        if (!(b->data = malloc(size))) {
            fail(L, KILN_ERR_NOMEM, "out of memory");
            break;
        }
        memcpy(b->data, data, size);
        b->size = size;
        const char *grid = (const char *)sqlite3_column_text(st, 2);
        if (!grid || !b->format[0] || !b->entry[0]) {
            fail(L, KILN_ERR_CORRUPT, "kernel %s: %s binary without grid, format or entry", k->name,
                 p->target);
            break;
        }
        parse_grid(L, k, b, grid);
        char why[300];
        if (!L->s && rt_plan_binary_check(k, b, why, sizeof why))
            fail(L, KILN_ERR_CORRUPT, "kernel %s: %s binary %s: %s", k->name, p->target, b->config, why);
    }
    sqlite3_finalize(st);
}

static int find_weight(const RtPlan *p, const char *name)
{
    for (int i = 0; i < p->n_weights; i++)
        if (p->weights[i].name && !strcmp(p->weights[i].name, name)) return i;
    return -1;
}

static void parse_arg(Loader *L, const RtPlanKernel *k, int i, const char *t, RtPlanArg *a)
{
    static const char *const syms[] = {"T", "B", "MP", "R", "P"};
    static const char *const rtvs[] = {"max_q", "n_splits", "split_tokens"};
    const char *v = strchr(t, ':');
    int ok = 0;
    if (v) {
        v++;
        if (!strncmp(t, "input:", 6) || !strncmp(t, "act:", 4)) {
            a->kind = t[0] == 'i' ? RT_ARG_INPUT : RT_ARG_ACT;
            a->index = rt_plan_buf(L->p, v);
            ok = a->index >= 0 && L->p->bufs[a->index].kind == (t[0] == 'i' ? RT_BUF_INPUT : RT_BUF_ACT);
        } else if (!strncmp(t, "weight:", 7)) {
            a->kind = RT_ARG_WEIGHT;
            const char *at = strrchr(v, '@');
            char name[512];
            int len = at ? (int)(at - v) : (int)strlen(v);
            if (len < (int)sizeof name) {
                memcpy(name, v, (size_t)len);
                name[len] = 0;
                ok = (a->index = find_weight(L->p, name)) >= 0;
            }
            if (ok && at) { /* a plane of the weight: strictly inside it */
                char *end = NULL;
                long long off = strtoll(at + 1, &end, 10);
                ok = end != at + 1 && !*end && off > 0 && off < L->p->weights[a->index].nbytes;
                a->offset = ok ? off : 0;
            }
        } else if (!strncmp(t, "sym:", 4)) {
            a->kind = RT_ARG_SYM;
            for (int s = 0; s < RT_SYM_COUNT; s++)
                if (!strcmp(v, syms[s])) a->index = s, ok = 1;
        } else if (!strncmp(t, "rt:", 3)) {
            a->kind = RT_ARG_RTV;
            for (int s = 0; s < RT_RTV_COUNT; s++)
                if (!strcmp(v, rtvs[s])) a->index = s, ok = 1;
        }
    }
    int want_ptr = a->kind == RT_ARG_INPUT || a->kind == RT_ARG_WEIGHT || a->kind == RT_ARG_ACT;
    if (!ok || i >= k->n_params || k->param_is_ptr[i] != want_ptr)
        fail(L, KILN_ERR_CORRUPT, "launch of %s: argument %d '%s' does not fit", k->name, i, t);
}

static void load_launches(Loader *L)
{
    RtPlan *p = L->p;
    if ((p->n_launches = count_rows(L, "SELECT count(*) FROM launch_plan")) < 0) return;
    p->launches = calloc((size_t)p->n_launches + 1, sizeof *p->launches);
    if (!p->launches) {
        fail(L, KILN_ERR_NOMEM, "out of memory");
        return;
    }
    sqlite3_stmt *st = query(L, "SELECT kernel_id, args, step FROM launch_plan ORDER BY step");
    for (int i = 0; st && !L->s && i < p->n_launches && sqlite3_step(st) == SQLITE_ROW; i++) {
        RtPlanLaunch *l = &p->launches[i];
        int64_t id = sqlite3_column_int64(st, 0);
        if (sqlite3_column_type(st, 2) != SQLITE_INTEGER || sqlite3_column_int64(st, 2) != i) {
            fail(L, KILN_ERR_CORRUPT, "launch plan step %d is missing (steps must be 0..%d, each once)", i,
                 p->n_launches - 1);
            break;
        }
        if (id < 0 || id >= p->n_kernels) {
            fail(L, KILN_ERR_CORRUPT, "launch %d of unknown kernel %lld", i, (long long)id);
            break;
        }
        l->kernel = (int)id;
        const RtPlanKernel *k = &p->kernels[id];
        if (!k->n_bins) {
            fail(L, KILN_ERR_UNSUPPORTED, "no %s binary for kernel %s (compile with --target %s)", p->target,
                 k->name, p->target);
            break;
        }
        char *args = dup_col(L, st, 1), *save = NULL;
        for (char *t = args ? strtok_r(args, " ", &save) : NULL; t && !L->s; t = strtok_r(NULL, " ", &save)) {
            if (l->n_args == k->n_params) {
                fail(L, KILN_ERR_CORRUPT, "launch of %s: more arguments than params", k->name);
                break;
            }
            parse_arg(L, k, l->n_args, t, &l->args[l->n_args]);
            l->n_args++;
        }
        if (!L->s && l->n_args != k->n_params)
            fail(L, KILN_ERR_CORRUPT, "launch of %s: %d arguments for %d params", k->name, l->n_args,
                 k->n_params);
        free(args);
    }
    sqlite3_finalize(st);
}

KilnStatus rt_plan_load(KilnPackage *pkg, const char *target, RtPlan **out, char *err, int errlen)
{
    Loader L = {.pkg = pkg, .db = rt_pkg_db(pkg), .path = rt_pkg_path(pkg), .err = err, .errlen = errlen};
    *out = NULL;
    if (!L.db || !target)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "rt_plan_load: no package or target");
    if (!(L.p = calloc(1, sizeof *L.p)) || !(L.p->target = strdup(target)))
        fail(&L, KILN_ERR_NOMEM, "out of memory");
    RtPlan *p = L.p;
    if (!L.s) {
        /* the compiler's own bounds (ir/base.h): step sizes are i32 kernel arguments, a tensor and the
         * arena at most 2^48 bytes */
        p->max_tokens = meta_i(&L, "plan_max_tokens", INT32_MAX);
        p->max_seqs = meta_i(&L, "plan_max_seqs", INT32_MAX);
        p->max_rows = meta_i(&L, "plan_max_rows", INT32_MAX);
        p->max_split_rows = meta_i(&L, "plan_max_split_rows", INT32_MAX);
        p->act_bytes = meta_i(&L, "plan_act_bytes", INT64_C(1) << 48);
    }
    if (!L.s) load_weights(&L);
    if (!L.s) load_buffers(&L);
    if (!L.s) load_kernels(&L);
    if (!L.s) load_launches(&L);
    if (!L.s && p->n_launches == 0) fail(&L, KILN_ERR_CORRUPT, "empty launch plan");
    if (!L.s) L.s = rt_plan_check(p, L.path, err, errlen);
    if (L.s) {
        rt_plan_free(p);
        return L.s;
    }
    *out = p;
    return KILN_OK;
}

void rt_plan_free(RtPlan *p)
{
    if (!p) return;
    for (int i = 0; p->kernels && i < p->n_kernels; i++) {
        RtPlanKernel *k = &p->kernels[i];
        free(k->name), free(k->family), free(k->spec), free(k->ir_hash), free(k->params);
        for (int b = 0; b < k->n_bins; b++)
            free(k->bins[b].config), free(k->bins[b].format), free(k->bins[b].entry), free(k->bins[b].data);
        for (int j = 0; j < k->n_params; j++)
            free(k->param_names[j]);
    }
    for (int i = 0; p->bufs && i < p->n_bufs; i++)
        free(p->bufs[i].name), free(p->bufs[i].dtype), free(p->bufs[i].shape), free(p->bufs[i].output);
    for (int i = 0; p->weights && i < p->n_weights; i++)
        free(p->weights[i].name), free(p->weights[i].dtype), free(p->weights[i].shape);
    free(p->kernels), free(p->launches), free(p->bufs), free(p->weights), free(p->target);
    free(p);
}

int rt_plan_buf(const RtPlan *p, const char *name)
{
    for (int i = 0; i < p->n_bufs; i++)
        if (p->bufs[i].name && !strcmp(p->bufs[i].name, name)) return i;
    return -1;
}

int rt_plan_output(const RtPlan *p, const char *output)
{
    for (int i = 0; i < p->n_bufs; i++)
        if (p->bufs[i].output && !strcmp(p->bufs[i].output, output)) return i;
    return -1;
}

int rt_plan_bucket(const RtPlanKernel *k, const int64_t *vals)
{
    if (k->m_param < 0 || k->n_buckets < 2) return 0;
    int64_t m = vals[k->m_param];
    int b = 0;
    while (b < k->n_buckets - 1 && ((int64_t)1 << b) < m)
        b++;
    return b;
}

/* Of the unsplit binaries with b's BM (b: rt_plan_pick_rows'), the one with the widest N tile whose grid
 * still fills the device (programs >= SMs), else the one with the most programs: a prefill chunk keeps
 * the wide tile, 65-256 rows get the narrow one their variant was compiled for (pl_compile.c, m_hint
 * 256); a BM with one binary keeps it. */
static int fill_device(const RtPlanKernel *k, const int64_t *vals, int b)
{
    int best = -1;
    int64_t best_p = 0, best_bn = 0;
    for (int i = 0; i < k->n_pkg; i++) {
        unsigned g[3];
        if (k->bins[i].split > 1 || k->bins[i].bm != k->bins[b].bm || rt_plan_grid(&k->bins[i], vals, g))
            continue;
        int64_t p = (int64_t)g[0] * g[1] * g[2], bn = rt_plan_config_i(k->bins[i].config, "BN", 0);
        int fills = p >= k->n_sms, best_fills = best >= 0 && best_p >= k->n_sms;
        if (best < 0 || (fills && !best_fills) || (fills && best_fills && bn > best_bn) ||
            (!fills && !best_fills && p > best_p))
            best = i, best_p = p, best_bn = bn;
    }
    return best >= 0 ? best : b;
}

int rt_plan_pick(const RtPlanKernel *k, const int64_t *vals)
{
    if (k->n_buckets > 0) {
        int r = k->route[rt_plan_bucket(k, vals)];
        if (r >= 0) return r;
    }
    if (k->m_param < 0) return 0;
    int b = rt_plan_pick_rows(k, vals[k->m_param]);
    return k->n_sms > 0 && k->bins[b].split <= 1 ? fill_device(k, vals, b) : b;
}

int rt_plan_pick_rows(const RtPlanKernel *k, int64_t m)
{
    if (k->n_pkg < 2 || k->m_param < 0) return 0;
    int best = -1, largest = -1;
    for (int i = 0; i < k->n_pkg; i++) {
        int64_t bm = k->bins[i].bm;
        /* a binary that splits K inside the launch serves at most its BM rows: never the fallback */
        if (k->bins[i].split <= 1 && (largest < 0 || bm > k->bins[largest].bm)) largest = i;
        if (bm >= m && (best < 0 || bm < k->bins[best].bm)) best = i;
    }
    return best >= 0 ? best : largest >= 0 ? largest : 0;
}

int rt_plan_binary_add(RtPlanKernel *k, const char *config, const char *format, const char *entry,
                       const char *grid, int block, int smem, const void *data, size_t size, char *err,
                       int errlen)
{
    Loader L = {.path = "tuning DB", .err = err, .errlen = errlen};
    if (k->n_bins == RT_PLAN_MAX_BINS) {
        fail(&L, KILN_ERR_UNSUPPORTED, "kernel %s: more than %d binaries", k->name, RT_PLAN_MAX_BINS);
        return -1;
    }
    RtPlanBinary *b = &k->bins[k->n_bins];
    memset(b, 0, sizeof *b);
    b->tuned = 1, b->block = block, b->smem = smem, b->size = size;
    if (!(b->config = strdup(config)) || !(b->format = strdup(format)) || !(b->entry = strdup(entry)) ||
        !(b->data = malloc(size ? size : 1)))
        fail(&L, KILN_ERR_NOMEM, "out of memory");
    if (!L.s) {
        memcpy(b->data, data, size);
        b->bm = rt_plan_config_i(config, "BM", 0), b->split = rt_plan_config_i(config, "SPLIT_K", 1);
        parse_grid(&L, k, b, grid);
        char why[300];
        if (!L.s && rt_plan_binary_check(k, b, why, sizeof why))
            fail(&L, KILN_ERR_CORRUPT, "kernel %s: binary %s: %s", k->name, config, why);
    }
    if (L.s) {
        free(b->config), free(b->format), free(b->entry), free(b->data);
        memset(b, 0, sizeof *b);
        return -1;
    }
    return k->n_bins++;
}

int rt_plan_grid(const RtPlanBinary *b, const int64_t *vals, unsigned grid[3])
{
    int64_t total = 1;
    for (int a = 0; a < 3; a++) {
        const RtGridAxis *g = &b->grid[a];
        int64_t v = g->param < 0 ? 0 : vals[g->param];
        if (v < 0) v = 0;
        int64_t n = g->param < 0 ? g->c : (v * g->mul + g->div - 1) / g->div; /* mul, v < 2^31: no overflow */
        if (n > INT32_MAX || (a && n > 65535)) return -1;
        grid[a] = (unsigned)n;
        total *= n;
    }
    return total > INT32_MAX ? -1 : 0;
}

int64_t rt_plan_config_i(const char *config, const char *key, int64_t dflt)
{
    size_t n = strlen(key);
    for (const char *s = config ? config : ""; (s = strstr(s, key)); s += n)
        if ((s == config || s[-1] == ' ') && s[n] == '=') return strtoll(s + n + 1, NULL, 10);
    return dflt;
}
