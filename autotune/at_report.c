/* at_report.c — tuned-vs-default reports (at_report.h). */
#define _POSIX_C_SOURCE 200809L
#include "at_report.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_file.h" /* rt_file_errf, rt_file_line */

struct AtReport {
    RtTdbRow *rows;
    int n, cap;
    int oom;
};

static int collect(void *ctx, const RtTdbRow *row)
{
    AtReport *r = ctx;
    if (row->damaged) return 0;
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 64;
        RtTdbRow *n = realloc(r->rows, (size_t)cap * sizeof *n);
        if (!n) {
            r->oom = 1;
            return 1;
        }
        r->rows = n, r->cap = cap;
    }
    r->rows[r->n++] = *row;
    return 0;
}

/* The bucket's size for ordering: the sum of log2 of its values ("" is 0). */
static double bucket_size(const char *text)
{
    RtTdbBucket b;
    double s = 0;
    if (rt_tdb_bucket_parse(text, &b, NULL, 0)) return -1;
    for (int i = 0; i < b.n; i++)
        s += log2((double)b.val[i]);
    return s;
}

static int by_kernel_bucket(const void *x, const void *y)
{
    const RtTdbRow *a = x, *b = y;
    int c = strcmp(a->device, b->device);
    if (!c) c = strcmp(a->kernel, b->kernel);
    if (c) return c;
    double sa = bucket_size(a->bucket), sb = bucket_size(b->bucket);
    return sa < sb ? -1 : sa > sb ? 1 : strcmp(a->bucket, b->bucket);
}

KilnStatus at_report_load(RtTdb *db, const RtTdbFilter *f, AtReport **out, char *err, int errlen)
{
    *out = NULL;
    AtReport *r = calloc(1, sizeof *r);
    if (!r) return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "out of memory");
    RtTdbFilter all = {0};
    KilnStatus s = rt_tdb_rows(db, f ? f : &all, collect, r, err, errlen);
    if (!s && r->oom) s = rt_file_errf(err, errlen, KILN_ERR_NOMEM, "out of memory");
    if (s) {
        at_report_free(r);
        return s;
    }
    if (r->n) qsort(r->rows, (size_t)r->n, sizeof *r->rows, by_kernel_bucket);
    *out = r;
    return KILN_OK;
}

void at_report_free(AtReport *r)
{
    if (!r) return;
    free(r->rows);
    free(r);
}

int at_report_rows(const AtReport *r)
{
    return r->n;
}

static double speedup(const RtTdbRow *w)
{
    return w->default_us > 0 && w->median_us > 0 ? w->default_us / w->median_us : -1;
}

void at_report_text(const AtReport *r, FILE *out)
{
    const char *device = "";
    double log_sum = 0;
    int n_sp = 0;
    for (int i = 0; i < r->n; i++) {
        const RtTdbRow *w = &r->rows[i];
        if (strcmp(device, w->device)) {
            device = w->device;
            if (i) fputc('\n', out);
            rt_file_line(out, "device %s", device); /* the store's text: control characters as '?' */
            fprintf(out, "%-40s %-10s %12s %12s %8s %3s  %s\n", "kernel", "bucket", "default", "tuned",
                    "speedup", "pin", "config");
        }
        char dflt[32] = "-", sp[32] = "-";
        double x = speedup(w);
        if (x > 0) {
            snprintf(dflt, sizeof dflt, "%.2f us", w->default_us);
            snprintf(sp, sizeof sp, "%.2fx", x);
            log_sum += log(x), n_sp++;
        }
        char med[32];
        snprintf(med, sizeof med, "%.2f us", w->median_us);
        rt_file_line(out, "%-40s %-10s %12s %12s %8s %3s  %s", w->kernel, w->bucket[0] ? w->bucket : "-",
                     dflt, med, sp, w->pinned ? "*" : "", w->config);
    }
    if (!r->n) fprintf(out, "no tuning results\n");
    if (n_sp)
        fprintf(out, "\n%d result%s, geometric mean speedup %.2fx over %d with a default time\n", r->n,
                r->n == 1 ? "" : "s", exp(log_sum / n_sp), n_sp);
}

/* ---- HTML ---- */

static void html_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else if (*s == '"')
            fputs("&quot;", f);
        else
            fputc(*s, f);
    }
}

/* The chart: one bar per row with a speedup, on a log2 axis centred on 1x (bars right of it faster). */
static void html_chart(const AtReport *r, FILE *f)
{
    enum { ROW = 18, LABEL = 380, PLOT = 420 };
    double lo = -1, hi = 1; /* log2 range shown: at least 0.5x .. 2x */
    int n = 0;
    for (int i = 0; i < r->n; i++) {
        double x = speedup(&r->rows[i]);
        if (x <= 0) continue;
        n++;
        lo = fmin(lo, floor(log2(x))), hi = fmax(hi, ceil(log2(x)));
    }
    int height = (n + 2) * ROW;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"monospace\" "
            "font-size=\"12\">\n",
            LABEL + PLOT + 80, height);
    double scale = PLOT / (hi - lo), x1 = LABEL + (0 - lo) * scale;
    for (double t = lo; t <= hi; t++) {
        double x = LABEL + (t - lo) * scale;
        fprintf(f, "<line x1=\"%.1f\" y1=\"0\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\"/>\n", x, x, height - ROW,
                t == 0 ? "#000" : "#ddd");
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%gx</text>\n", x, height - 4, exp2(t));
    }
    int y = 0;
    for (int i = 0; i < r->n; i++) {
        const RtTdbRow *w = &r->rows[i];
        double x = speedup(w);
        if (x <= 0) continue;
        double end = LABEL + (log2(x) - lo) * scale;
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", LABEL - 6, y + ROW - 5);
        html_text(f, w->kernel);
        fputc(' ', f);
        html_text(f, w->bucket[0] ? w->bucket : "-");
        fprintf(f, "</text>\n<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>",
                fmin(x1, end), y + 3, fabs(end - x1) + 1, ROW - 6, x >= 1 ? "#3a7" : "#c54");
        html_text(f, w->config);
        fprintf(f, "</title></rect>\n<text x=\"%.1f\" y=\"%d\">%.2fx</text>\n", fmax(x1, end) + 4,
                y + ROW - 5, x);
        y += ROW;
    }
    fputs("</svg>\n", f);
}

static void html_page(const AtReport *r, FILE *f)
{
    fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>kiln tuning report</title>\n"
          "<style>body{font-family:sans-serif} td,th{padding:2px 8px;font-family:monospace;text-align:right}"
          " td.l,th.l{text-align:left}</style></head><body>\n<h1>kiln tuning report</h1>\n"
          "<p>Speedup of each tuned config over the family's default config, both measured in the same run"
          " (median per launch).</p>\n",
          f);
    html_chart(r, f);
    fputs(
        "<table>\n<tr><th class=\"l\">device</th><th class=\"l\">kernel</th><th class=\"l\">bucket</th>"
        "<th>default us</th><th>tuned us</th><th>speedup</th><th>pin</th><th class=\"l\">config</th></tr>\n",
        f);
    for (int i = 0; i < r->n; i++) {
        const RtTdbRow *w = &r->rows[i];
        double x = speedup(w);
        fputs("<tr><td class=\"l\">", f);
        html_text(f, w->device);
        fputs("</td><td class=\"l\">", f);
        html_text(f, w->kernel);
        fputs("</td><td class=\"l\">", f);
        html_text(f, w->bucket[0] ? w->bucket : "-");
        if (x > 0)
            fprintf(f, "</td><td>%.2f</td><td>%.2f</td><td>%.2fx</td>", w->default_us, w->median_us, x);
        else
            fprintf(f, "</td><td>-</td><td>%.2f</td><td>-</td>", w->median_us);
        fprintf(f, "<td>%s</td><td class=\"l\">", w->pinned ? "*" : "");
        html_text(f, w->config);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n</body></html>\n", f);
}

KilnStatus at_report_html(const AtReport *r, const char *path, char *err, int errlen)
{
    RtFileOut o; /* a temporary beside path, renamed into place; path must be new or a regular file */
    KilnStatus s = rt_file_out_begin(&o, path, 0, err, errlen);
    if (s) return s;
    int fd = dup(o.fd);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        int e = errno;
        if (fd >= 0) close(fd);
        rt_file_out_abort(&o);
        return rt_file_errf(err, errlen, KILN_ERR_IO, "%s: cannot write: %s", path, strerror(e));
    }
    html_page(r, f);
    int bad = fflush(f) != 0 || ferror(f), e = errno;
    if (fclose(f) != 0 && !bad) bad = 1, e = errno;
    if (bad) {
        rt_file_out_abort(&o);
        return rt_file_errf(err, errlen, KILN_ERR_IO, "%s: cannot write: %s", path, strerror(e));
    }
    return rt_file_out_commit(&o, err, errlen); /* fsync, re-check, rename */
}
