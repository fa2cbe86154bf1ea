// quant/report.c — the HTML / SVG report of a --target-bpw run (see report.h).
#include "quant/report.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/fileio.h"

// ---- a growing string ---------------------------------------------------------------

typedef struct {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) return (void)(b->oom = 1);
        if (b->s && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap ? 2 * b->cap : 4096;
        while (cap < b->n + (size_t)k + 1) cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) return (void)(b->oom = 1);
        b->s = s, b->cap = cap;
    }
}

// Text with &, <, >, " escaped.
static void text(sbuf *b, const char *s) {
    for (; *s; s++) {
        if (*s == '&') put(b, "&amp;");
        else if (*s == '<') put(b, "&lt;");
        else if (*s == '>') put(b, "&gt;");
        else if (*s == '"') put(b, "&quot;");
        else put(b, "%c", *s);
    }
}

// ---- plot frames ------------------------------------------------------------------------

typedef struct {
    double x0, y0, w, h;               // the plotting area, pixels (y0 its top)
    double xmin, xmax, ymin, ymax;
    int ylog;
} frame;

static double fx(const frame *f, double x) { return f->x0 + (x - f->xmin) / (f->xmax - f->xmin) * f->w; }
static double fy(const frame *f, double y) {
    if (f->ylog) y = log10(y);
    double lo = f->ylog ? log10(f->ymin) : f->ymin, hi = f->ylog ? log10(f->ymax) : f->ymax;
    return f->y0 + f->h - (y - lo) / (hi - lo) * f->h;
}

// A step of 1, 2 or 5 x 10^k giving about n ticks over span.
static double nice_step(double span, int n) {
    double raw = span / n, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

// The frame's box, grid, ticks and axis labels.
static void axes(sbuf *b, const frame *f, const char *xlabel, const char *ylabel, int xticks) {
    put(b, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='#fff' stroke='#333'/>\n", f->x0, f->y0, f->w,
        f->h);
    if (xticks) {
        double st = nice_step(f->xmax - f->xmin, 8);
        for (double x = ceil(f->xmin / st) * st; x <= f->xmax + 1e-9; x += st) {
            double px = fx(f, x);
            put(b, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#e4e4e4'/>", px, f->y0, px, f->y0 + f->h);
            put(b, "<text x='%.1f' y='%.1f' font-size='11' text-anchor='middle'>%g</text>\n", px, f->y0 + f->h + 14,
                fabs(x) < 1e-12 ? 0 : x);
        }
    }
    if (f->ylog) {
        for (double e = ceil(log10(f->ymin) - 1e-9); e <= log10(f->ymax) + 1e-9; e++) {
            double py = fy(f, pow(10, e));
            put(b, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#e4e4e4'/>", f->x0, py, f->x0 + f->w, py);
            put(b, "<text x='%.1f' y='%.1f' font-size='11' text-anchor='end'>1e%d</text>\n", f->x0 - 5, py + 4, (int)e);
        }
    } else {
        double st = nice_step(f->ymax - f->ymin, 6);
        for (double y = ceil(f->ymin / st) * st; y <= f->ymax + 1e-9; y += st) {
            double py = fy(f, y);
            put(b, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#e4e4e4'/>", f->x0, py, f->x0 + f->w, py);
            put(b, "<text x='%.1f' y='%.1f' font-size='11' text-anchor='end'>%g</text>\n", f->x0 - 5, py + 4, y);
        }
    }
    put(b, "<text x='%.1f' y='%.1f' font-size='12' text-anchor='middle'>", f->x0 + f->w / 2, f->y0 + f->h + 32);
    text(b, xlabel);
    put(b, "</text>\n<text x='%.1f' y='%.1f' font-size='12' text-anchor='middle' transform='rotate(-90 %.1f %.1f)'>",
        f->x0 - 48, f->y0 + f->h / 2, f->x0 - 48, f->y0 + f->h / 2);
    text(b, ylabel);
    put(b, "</text>\n");
}

static void title(sbuf *b, double x, double y, const char *s) {
    put(b, "<text x='%.1f' y='%.1f' font-size='15' font-weight='bold'>", x, y);
    text(b, s);
    put(b, "</text>\n");
}

#define W 960.0

static const char *const GROUP_COLOR[PQ_NGROUPS] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759"};

// ---- 1. PPL against bits per weight -------------------------------------------------------

static void plot_pareto(sbuf *b, const pq_report_input *in, double y0) {
    const pq_report_point *p = in->pts, *fp = &p[0], *mix = &p[in->n_pts - 1];
    int n = in->n_pts;
    frame f = {80, y0 + 36, W - 120, 330, INFINITY, -INFINITY, fp->ppl, fp->ppl, 0};
    for (int i = 1; i < n; i++) {
        f.xmin = fmin(f.xmin, p[i].bpw), f.xmax = fmax(f.xmax, p[i].bpw);
        f.ymin = fmin(f.ymin, p[i].ppl), f.ymax = fmax(f.ymax, p[i].ppl);
    }
    f.xmin = fmin(f.xmin, in->target_bpw), f.xmax = fmax(f.xmax, in->target_bpw);
    double dx = (f.xmax - f.xmin) * 0.08 + 0.05, dy = (f.ymax - f.ymin) * 0.1 + 1e-3;
    f.xmin -= dx, f.xmax += dx, f.ymin -= dy, f.ymax += dy;
    title(b, 20, y0 + 20, "Perplexity against bits per weight (KL windows of the calibration text)");
    axes(b, &f, "bits per weight (codes, scales, zero points, shapes; fp16 linears at 16)", "perplexity", 1);
    double py = fy(&f, fp->ppl);
    put(b, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#555' stroke-dasharray='6 4'/>", f.x0, py,
        f.x0 + f.w, py);
    put(b, "<text x='%.1f' y='%.1f' font-size='11' fill='#555' text-anchor='end'>unquantized %.4f</text>\n",
        f.x0 + f.w - 4, py - 4, fp->ppl);
    double tx = fx(&f, in->target_bpw);
    put(b, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#c00' stroke-dasharray='2 3'/>", tx, f.y0, tx,
        f.y0 + f.h);
    put(b, "<text x='%.1f' y='%.1f' font-size='11' fill='#c00'>target %g</text>\n", tx + 4, f.y0 + 14, in->target_bpw);
    // the Pareto front of the uniform items: each cheaper-to-dearer point that lowers the PPL
    int order[PQ_MIX_MAX_MENU + 2], m = 0;
    for (int i = 1; i < n - 1; i++) order[m++] = i;
    for (int i = 1; i < m; i++)
        for (int j = i; j > 0 && p[order[j]].bpw < p[order[j - 1]].bpw; j--) {
            int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    put(b, "<polyline fill='none' stroke='#4e79a7' stroke-width='1.5' points='");
    double best = INFINITY;
    for (int i = 0; i < m; i++)
        if (p[order[i]].ppl < best) {
            best = p[order[i]].ppl;
            put(b, "%.1f,%.1f ", fx(&f, p[order[i]].bpw), fy(&f, p[order[i]].ppl));
        }
    put(b, "'/>\n");
    for (int i = 0; i < m; i++) { // labels above and below in turn, in order of bits, so neighbours do not collide
        double x = fx(&f, p[order[i]].bpw), y = fy(&f, p[order[i]].ppl);
        put(b, "<circle cx='%.1f' cy='%.1f' r='4.5' fill='#4e79a7'/>", x, y);
        put(b, "<text x='%.1f' y='%.1f' font-size='11'>", x + 7, i % 2 ? y + 15 : y - 7);
        text(b, p[order[i]].name);
        put(b, "</text>\n");
    }
    double x = fx(&f, mix->bpw), y = fy(&f, mix->ppl);
    put(b, "<path d='M%.1f %.1f l8 8 l-8 8 l-8 -8 z' fill='#d62728' stroke='#000'/>", x, y - 8);
    put(b, "<text x='%.1f' y='%.1f' font-size='12' font-weight='bold' fill='#d62728'>mixed %.4f bpw, PPL %.4f</text>\n",
        x + 10, y + 16, mix->bpw, mix->ppl);
}

// ---- 2. the sensitivity ---------------------------------------------------------------------

// The measured KL of unit u with its cheapest item (0 if none).
static double unit_kl(const pq_mix_table *t, int u) {
    int best = -1;
    for (int k = 0; k < t->n_opts; k++) {
        size_t i = (size_t)u * t->n_opts + k;
        if (!t->opt[k].dense && !isnan(t->kl[i]) &&
            (best < 0 || t->bits[i] < t->bits[(size_t)u * t->n_opts + best]))
            best = k;
    }
    return best < 0 ? 0 : t->kl[(size_t)u * t->n_opts + best];
}

static int n_layers(const pq_mix_table *t) { return t->n_units / PQ_NGROUPS; }

static void plot_sensitivity(sbuf *b, const pq_report_input *in, double y0) {
    const pq_mix_table *t = in->t;
    int L = n_layers(t);
    frame f = {80, y0 + 36, W - 120, 220, -0.5, L - 0.5, INFINITY, 0, 1};
    for (int u = 0; u < t->n_units; u++) {
        double v = unit_kl(t, u);
        if (v > 0) f.ymin = fmin(f.ymin, v), f.ymax = fmax(f.ymax, v);
    }
    if (!isfinite(f.ymin)) f.ymin = 1e-6, f.ymax = 1;
    f.ymin = pow(10, floor(log10(f.ymin))), f.ymax = pow(10, ceil(log10(f.ymax) + 1e-9));
    if (f.ymax <= f.ymin) f.ymax = f.ymin * 10;
    title(b, 20, y0 + 20, "Sensitivity: KL when only this group is quantized with the cheapest item");
    axes(b, &f, "layer", "mean KL per token", 0);
    double slot = f.w / L, bw = slot * 0.8 / PQ_NGROUPS;
    for (int l = 0; l < L; l++) {
        if (L <= 40 || l % 5 == 0)
            put(b, "<text x='%.1f' y='%.1f' font-size='11' text-anchor='middle'>%d</text>", fx(&f, l),
                f.y0 + f.h + 14, l);
        for (int g = 0; g < PQ_NGROUPS; g++) {
            double v = unit_kl(t, l * PQ_NGROUPS + g);
            if (!(v > 0)) continue;
            double x = fx(&f, l) - slot * 0.4 + g * bw, y = fy(&f, v);
            put(b, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='%s'><title>layer %d %s: KL %.4g</title>"
                "</rect>\n", x, y, bw, f.y0 + f.h - y, GROUP_COLOR[g], l, PQ_INPUT_GROUPS[g].name, v);
        }
    }
    for (int g = 0; g < PQ_NGROUPS; g++) {
        double x = f.x0 + 10 + g * 110;
        put(b, "<rect x='%.1f' y='%.1f' width='12' height='12' fill='%s'/><text x='%.1f' y='%.1f' font-size='11'>%s"
            "</text>\n", x, f.y0 + 6, GROUP_COLOR[g], x + 16, f.y0 + 16, PQ_INPUT_GROUPS[g].name);
    }
}

// ---- 3. the choice ---------------------------------------------------------------------------

// Item k's colour: light yellow (the fewest bits of the menu) to dark blue
// (the most) by its rank in bits; fp16 grey.
static void item_color(const pq_mix_table *t, int k, char *out) {
    if (t->opt[k].dense) return (void)snprintf(out, 16, "#8c8c8c");
    int rank = 0, n = 0;
    for (int j = 0; j < t->n_opts; j++) {
        if (t->opt[j].dense) continue;
        n++;
        rank += t->bits[j] < t->bits[k] || (t->bits[j] == t->bits[k] && j < k); // unit 0's bits rank them
    }
    double a = n > 1 ? (double)rank / (n - 1) : 0.5;
    int r = (int)(255 + a * (8 - 255)), g = (int)(237 + a * (48 - 237)), bl = (int)(160 + a * (107 - 160));
    snprintf(out, 16, "#%02x%02x%02x", r, g, bl);
}

static double item_bpw(const pq_mix_table *t, int u, int k) {
    return t->bits[(size_t)u * t->n_opts + k] / (double)t->weights[u];
}

static void plot_choice(sbuf *b, const pq_report_input *in, double y0) {
    const pq_mix_table *t = in->t;
    int L = n_layers(t);
    double x0 = 80, cw = (W - 120) / L, ch = 26;
    title(b, 20, y0 + 20, "The choice: the item of every group of linears (colour: its bits, light few, dark many)");
    for (int g = 0; g < PQ_NGROUPS; g++) {
        double y = y0 + 36 + g * ch;
        put(b, "<text x='%.1f' y='%.1f' font-size='11' text-anchor='end'>%s</text>\n", x0 - 6, y + ch / 2 + 4,
            PQ_INPUT_GROUPS[g].name);
        for (int l = 0; l < L; l++) {
            int u = l * PQ_NGROUPS + g, k = in->choice[u];
            char col[16];
            item_color(t, k, col);
            int dark = col[1] < '8' || col[3] < '8'; // white text on the dark end
            put(b, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='%s' stroke='#fff'><title>layer %d %s: %s"
                " (%.3f bits per weight)</title></rect>", x0 + l * cw, y, cw, ch, col, l, PQ_INPUT_GROUPS[g].name,
                t->opt[k].name, item_bpw(t, u, k));
            if (cw >= 34) {
                put(b, "<text x='%.1f' y='%.1f' font-size='%d' text-anchor='middle' fill='%s'>", x0 + (l + 0.5) * cw,
                    y + ch / 2 + 4, cw >= 52 ? 11 : 9, dark ? "#fff" : "#000");
                text(b, t->opt[k].name);
                put(b, "</text>");
            }
            put(b, "\n");
        }
    }
    double ly = y0 + 36 + PQ_NGROUPS * ch + 8;
    for (int l = 0; l < L; l++)
        if (L <= 40 || l % 5 == 0)
            put(b, "<text x='%.1f' y='%.1f' font-size='11' text-anchor='middle'>%d</text>", x0 + (l + 0.5) * cw,
                ly + 6, l);
    put(b, "<text x='%.1f' y='%.1f' font-size='12' text-anchor='middle'>layer</text>\n", x0 + (W - 120) / 2, ly + 22);
    for (int k = 0; k < t->n_opts; k++) { // the legend
        char col[16];
        item_color(t, k, col);
        double x = x0 + k * 100;
        put(b, "<rect x='%.1f' y='%.1f' width='14' height='14' fill='%s' stroke='#999'/><text x='%.1f' y='%.1f' "
            "font-size='11'>", x, ly + 32, col, x + 18, ly + 43);
        text(b, t->opt[k].name);
        put(b, "</text>\n");
    }
}

// ---- the document ---------------------------------------------------------------------------

#define H_PARETO 420.0
#define H_SENS 300.0

static double choice_height(void) { return 36 + PQ_NGROUPS * 26 + 8 + 60; }

static void svg(sbuf *b, const pq_report_input *in, int standalone) {
    double h = H_PARETO + H_SENS + choice_height();
    put(b, "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' viewBox='0 0 %.0f %.0f' "
        "font-family='sans-serif'>\n", W, h, W, h);
    if (standalone) put(b, "<rect width='100%%' height='100%%' fill='#fff'/>\n");
    plot_pareto(b, in, 0);
    plot_sensitivity(b, in, H_PARETO);
    plot_choice(b, in, H_PARETO + H_SENS);
    put(b, "</svg>\n");
}

static void row(sbuf *b, const char *k, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void row(sbuf *b, const char *k, const char *fmt, ...) {
    char v[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v, sizeof v, fmt, ap);
    va_end(ap);
    put(b, "<tr><th>");
    text(b, k);
    put(b, "</th><td>");
    text(b, v);
    put(b, "</td></tr>\n");
}

static void html(sbuf *b, const pq_report_input *in) {
    const pq_mix_table *t = in->t;
    const pq_report_point *mix = &in->pts[in->n_pts - 1];
    put(b, "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>pq --target-bpw report</title>\n"
        "<style>body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin:12px 0}"
        "th,td{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:left}th{background:#f3f3f3}"
        "td.n{text-align:right;font-variant-numeric:tabular-nums}</style></head><body>\n"
        "<h1>pq quantize --target-bpw</h1>\n<table>\n");
    row(b, "model", "%s", in->model);
    row(b, "method", "%s%s%s", in->method, in->rotation ? ", rotated: " : "", in->rotation ? in->rotation : "");
    row(b, "menu", "%s", in->menu);
    row(b, "target", "%g bits per weight", in->target_bpw);
    row(b, "plan", "%.4f bits per weight planned, %.4f in the written checkpoint", in->plan_bpw, in->written_bpw);
    row(b, "KL (plan)", "predicted %.4g, measured %.4g (mean per token)", in->plan_loss, mix->kl);
    row(b, "PPL (plan)", "%.4f, unquantized %.4f", mix->ppl, in->pts[0].ppl);
    row(b, "measured on", "%d calibration windows of %d tokens", in->kl_windows, in->kl_len);
    put(b, "</table>\n");
    svg(b, in, 0);
    put(b, "<h2>Uniform items and the plan</h2>\n<table><tr><th>plan</th><th>bits per weight</th><th>KL</th>"
        "<th>PPL</th></tr>\n");
    for (int i = 0; i < in->n_pts; i++) {
        put(b, "<tr><td>");
        text(b, in->pts[i].name);
        put(b, "</td><td class='n'>%.4f</td><td class='n'>%.4g</td><td class='n'>%.4f</td></tr>\n", in->pts[i].bpw,
            in->pts[i].kl, in->pts[i].ppl);
    }
    put(b, "</table>\n<h2>Every group</h2>\n<table><tr><th>layer</th><th>group</th><th>weights</th><th>choice</th>"
        "<th>its bits per weight</th><th>its predicted KL</th><th>KL, cheapest item</th></tr>\n");
    for (int u = 0; u < t->n_units; u++) {
        int k = in->choice[u];
        put(b, "<tr><td class='n'>%d</td><td>%s</td><td class='n'>%lld</td><td>", t->unit[u].layer,
            PQ_INPUT_GROUPS[t->unit[u].group].name, t->weights[u]);
        text(b, t->opt[k].name);
        put(b, "</td><td class='n'>%.4f</td><td class='n'>%.4g</td><td class='n'>%.4g</td></tr>\n", item_bpw(t, u, k),
            t->loss[(size_t)u * t->n_opts + k], unit_kl(t, u));
    }
    put(b, "</table>\n<p>Written by pq. KL: mean over tokens of KL(unquantized || quantized) of the next-token "
        "distribution; each group's items other than the cheapest are predicted from its output error "
        "(quant/sensitivity.h) unless every item was measured.</p>\n</body></html>\n");
}

pq_status pq_report_write(const char *path, const pq_report_input *in) {
    PQ_FAIL_IF(in->n_pts < 2 || !in->t || !in->choice, PQ_ERR_ARG, "%s: nothing to report", path);
    sbuf b = {0};
    size_t n = strlen(path);
    if (n >= 4 && !strcmp(path + n - 4, ".svg")) {
        put(&b, "<?xml version='1.0' encoding='UTF-8'?>\n");
        svg(&b, in, 1);
    } else {
        html(&b, in);
    }
    if (b.oom) {
        free(b.s);
        return PQ_FAIL(PQ_ERR_NOMEM, "%s: out of memory", path);
    }
    pq_status s = pq_file_write_atomic(path, b.s, b.n);
    free(b.s);
    return s;
}
