/* at_report.h — tuned-vs-default speedups from the tuning store: a text table and a self-contained HTML
 * page with an SVG bar chart (`kiln tune --report [--html OUT.html]`). Prefix at_report_.
 *
 *     AtReport *r;
 *     at_report_load(db, &filter, &r, err, sizeof err);     // the results rows f selects
 *     at_report_text(r, stdout);
 *     at_report_html(r, "tune.html", err, sizeof err);      // written whole or not at all
 *     at_report_free(r);
 *
 * A row's speedup is default_us / median_us, both measured by the same tuning run (docs/AUTOTUNE.md);
 * rows without a default time (the default did not fit, or an older store) show "-" and no bar.
 */
#ifndef KILN_AT_REPORT_H
#define KILN_AT_REPORT_H

#include <stdio.h>

#include "rt_tunedb.h"

typedef struct AtReport AtReport;

/* Reads the rows f selects (NULL: all), ordered by device, kernel and bucket size. */
KilnStatus at_report_load(RtTdb *db, const RtTdbFilter *f, AtReport **out, char *err, int errlen);
void at_report_free(AtReport *r);
int at_report_rows(const AtReport *r);

/* Per device, one line per kernel and bucket: default and tuned medians, speedup, pin, config; then
 * the geometric mean speedup of the rows with a default time. */
void at_report_text(const AtReport *r, FILE *out);

/* The same as an HTML page with an SVG chart (a bar per kernel and bucket, log-scaled speedup, 1x
 * marked) and the table, written to "<path>.tmp.<pid>", fsynced and renamed onto path: path is never
 * half-written, and is left as it was after any error (KILN_ERR_IO with one line). */
KilnStatus at_report_html(const AtReport *r, const char *path, char *err, int errlen);

#endif
