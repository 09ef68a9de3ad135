/* kfile.c — small weight files written from C for the reader tests (kfile.h). */
#define _POSIX_C_SOURCE 200809L
#include "kfile.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kt.h"

/* ---- scratch directory and files ---- */

static char scratch[128];

const char *kf_scratch_open(const char *tag)
{
    snprintf(scratch, sizeof scratch, "/tmp/kiln-test-%s-XXXXXX", tag);
    if (!mkdtemp(scratch)) {
        perror("mkdtemp");
        scratch[0] = 0;
        return NULL;
    }
    return scratch;
}

const char *kf_at(const char *name)
{
    static char buf[8][512];
    static int next;
    char *b = buf[next++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", scratch, name);
    return b;
}

static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (unlink(p) != 0 && (errno == EISDIR || errno == EPERM)) remove_tree(p);
    }
    if (d) closedir(d);
    rmdir(dir);
}

void kf_scratch_close(void)
{
    if (scratch[0]) remove_tree(scratch);
    scratch[0] = 0;
}

char *kf_slurp(const char *path, long *n)
{
    struct stat st;
    *n = 0;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    *n = (long)st.st_size;
    char *b = malloc((size_t)*n + 1);
    if (b && fread(b, 1, (size_t)*n, f) != (size_t)*n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

void kf_spit(const char *path, const void *data, size_t n)
{
    unlink(path); /* a new file: truncating one in place is slow on some file systems */
    FILE *f = fopen(path, "wb");
    KT_CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    if (n) fwrite(data, 1, n, f);
    fclose(f);
}

int kf_starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* ---- a growing byte buffer ---- */

void kf_put(KfBuf *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}

void kf_u8(KfBuf *b, uint8_t v)
{
    kf_put(b, &v, 1);
}

void kf_le(KfBuf *b, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        kf_u8(b, (uint8_t)(v >> 8 * i));
}

void kf_u32(KfBuf *b, uint32_t v)
{
    kf_le(b, v, 4);
}

void kf_u64(KfBuf *b, uint64_t v)
{
    kf_le(b, v, 8);
}

void kf_f32(KfBuf *b, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    kf_u32(b, u);
}

void kf_f64(KfBuf *b, double f)
{
    uint64_t u;
    memcpy(&u, &f, 8);
    kf_u64(b, u);
}

void kf_strn(KfBuf *b, const char *s, size_t n)
{
    kf_u64(b, n);
    kf_put(b, s, n);
}

void kf_str(KfBuf *b, const char *s)
{
    kf_strn(b, s, strlen(s));
}

void kf_pad(KfBuf *b, size_t align)
{
    while (b->n % align)
        kf_u8(b, 0);
}

void kf_free(KfBuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* ---- GGUF ---- */

void kf_gg_header(KfBuf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    kf_put(b, "GGUF", 4);
    kf_u32(b, version);
    kf_u64(b, n_tensors);
    kf_u64(b, n_kv);
}

void kf_gg_kv_head(KfBuf *b, const char *key, RtGgufVal type)
{
    kf_str(b, key);
    kf_u32(b, type);
}

void kf_gg_tensor_info(KfBuf *b, const char *name, int n_dims, const uint64_t *ne, uint32_t type,
                       uint64_t offset)
{
    kf_str(b, name);
    kf_u32(b, (uint32_t)n_dims);
    for (int d = 0; d < n_dims; d++)
        kf_u64(b, ne[d]);
    kf_u32(b, type);
    kf_u64(b, offset);
}

static void kv_head(KfGgKvs *k, const char *key, RtGgufVal type)
{
    kf_gg_kv_head(&k->b, key, type);
    k->n++;
}

void kf_gg_kv_str(KfGgKvs *k, const char *key, const char *v)
{
    kv_head(k, key, RT_GGUF_VAL_STRING);
    kf_str(&k->b, v);
}

void kf_gg_kv_u32(KfGgKvs *k, const char *key, uint32_t v)
{
    kv_head(k, key, RT_GGUF_VAL_U32);
    kf_u32(&k->b, v);
}

void kf_gg_kv_strs(KfGgKvs *k, const char *key, const char *list)
{
    kv_head(k, key, RT_GGUF_VAL_ARRAY);
    kf_u32(&k->b, RT_GGUF_VAL_STRING);
    uint64_t n = 0;
    for (const char *p = list; *list && p; p = strchr(p, '|'), p = p ? p + 1 : NULL)
        n++;
    kf_u64(&k->b, n);
    for (const char *p = list; n--;) {
        const char *e = strchr(p, '|');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        kf_strn(&k->b, p, len);
        p = e ? e + 1 : p + len;
    }
}

void kf_gg_kv_i32s(KfGgKvs *k, const char *key, int n, const int32_t *v)
{
    kv_head(k, key, RT_GGUF_VAL_ARRAY);
    kf_u32(&k->b, RT_GGUF_VAL_I32);
    kf_u64(&k->b, (uint64_t)n);
    for (int i = 0; i < n; i++)
        kf_u32(&k->b, (uint32_t)v[i]);
}

void kf_gg_kv_f32s(KfGgKvs *k, const char *key, int n, const float *v)
{
    kv_head(k, key, RT_GGUF_VAL_ARRAY);
    kf_u32(&k->b, RT_GGUF_VAL_F32);
    kf_u64(&k->b, (uint64_t)n);
    for (int i = 0; i < n; i++)
        kf_f32(&k->b, v[i]);
}

void kf_gg_kvs_free(KfGgKvs *k)
{
    kf_free(&k->b);
    k->n = 0;
}

void kf_gg_write(const char *path, const KfGgKvs *kvs, const KfGgTensor *t, int n)
{
    KfBuf b = {0};
    kf_gg_header(&b, 3, (uint64_t)n, kvs ? kvs->n : 0);
    if (kvs) kf_put(&b, kvs->b.p, kvs->b.n);
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        kf_gg_tensor_info(&b, t[i].name, t[i].n_dims, t[i].ne, t[i].type, off);
        off = (off + t[i].nbytes + 31) / 32 * 32;
    }
    for (int i = 0; i < n; i++) {
        kf_pad(&b, 32);
        kf_put(&b, t[i].data, t[i].nbytes);
    }
    kf_spit(path, b.p, b.n);
    kf_free(&b);
}

/* ---- safetensors ---- */

void kf_st_write(const char *path, const char *json, const void *data, size_t n)
{
    KfBuf b = {0};
    size_t len = strlen(json), padded = (len + 7) / 8 * 8;
    kf_u64(&b, padded);
    kf_put(&b, json, len);
    while (b.n < 8 + padded)
        kf_u8(&b, ' ');
    kf_put(&b, data, n);
    kf_spit(path, b.p, b.n);
    kf_free(&b);
}

void kf_st_write_tensors(const char *path, const KfStTensor *t, int n)
{
    KfBuf json = {0}, data = {0};
    char entry[1024];
    kf_put(&json, "{", 1);
    for (int i = 0; i < n; i++) {
        size_t o = (size_t)snprintf(entry, sizeof entry, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[",
                                    i ? "," : "", t[i].name, t[i].dtype);
        for (int d = 0; d < t[i].n_dims; d++)
            o +=
                (size_t)snprintf(entry + o, sizeof entry - o, d ? ",%lld" : "%lld", (long long)t[i].shape[d]);
        snprintf(entry + o, sizeof entry - o, "],\"data_offsets\":[%zu,%zu]}", data.n, data.n + t[i].nbytes);
        kf_put(&json, entry, strlen(entry));
        kf_put(&data, t[i].data, t[i].nbytes);
    }
    kf_put(&json, "}", 2); /* with the NUL */
    kf_st_write(path, (const char *)json.p, data.p, data.n);
    kf_free(&json);
    kf_free(&data);
}
