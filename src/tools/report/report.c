/* SPDX-License-Identifier: BSD-2-Clause */
#include "report.h"
#include "jsondoc.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The original team's published capacity runs (rep->seeds, from their
 * data file: seeds.c), kept beside ours so a reader can compare like with
 * like. Their largest N at or above 99% success. */
static int seed_p99(const struct seed_runs *s)
{
	int best = 0;
	for (int i = 0; i < s->n; i++)
		if (100 * s->run[i].connected >= 99 * s->run[i].clients && s->run[i].clients > best)
			best = s->run[i].clients;
	return best;
}

static double seed_rate(const struct seed_runs *s, int clients)
{
	for (int i = 0; i < s->n; i++)
		if (s->run[i].clients == clients)
			return 100.0 * s->run[i].connected / s->run[i].clients;
	return -1;
}

const char *sweep_stage_name(enum sweep_stage s)
{
	static const char *const names[] = {"step", "search-100", "search-99"};
	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

static json_t *num_or_null(double v)
{
	return v < 0 ? json_null() : json_real(v);
}

static json_t *bound_json(const struct sweep_bound *b)
{
	return json_pack("{s:i, s:o, s:b}", "clients", b->n, "first_failure_at",
			 b->fail_at ? json_integer(b->fail_at) : json_null(), "lower_bound_only",
			 b->fail_at == 0);
}

static json_t *exhausted_json(const struct exhausted *e)
{
	if (e->what == EXH_NONE)
		return json_null();
	return json_pack("{s:s, s:s, s:s}", "resource", exhausted_name(e->what), "value", e->value,
			 "evidence", e->evidence);
}

/* The run at the smallest N that missed 100%: what ran out there. */
static const struct sweep_point *breaking_point(const struct sweep_report *rep)
{
	for (int i = 0; rep->full.fail_at && i < rep->npoints; i++)
		if (rep->points[i].clients == rep->full.fail_at)
			return &rep->points[i];
	return NULL;
}

static int write_json(const struct sweep_report *rep, const char *path)
{
	json_t *pts = json_array();
	for (int i = 0; i < rep->npoints; i++) {
		const struct sweep_point *p = &rep->points[i];
		json_array_append_new(
		    pts, json_pack("{s:i, s:s, s:i, s:i, s:f, s:b, s:o, s:o, s:o, s:o, s:o, s:o, "
				   "s:I, s:I, s:o, s:f, s:b, s:b, s:f, s:s, s:O}",
				   "clients", p->clients, "stage", sweep_stage_name(p->stage),
				   "connected", p->connected, "failed", p->failed, "success_rate",
				   p->success, "all_verified", p->all_verified, "connect_p50_ms",
				   num_or_null(p->connect_p50_ms), "connect_p99_ms",
				   num_or_null(p->connect_p99_ms), "server_kb_per_client",
				   num_or_null(p->kb_per_client), "msgs_per_s",
				   num_or_null(p->msgs_per_s), "latency_p50_us",
				   num_or_null(p->lat_p50_us), "latency_p99_us",
				   num_or_null(p->lat_p99_us), "verified", (json_int_t)p->verified,
				   "mismatches", (json_int_t)p->mismatches, "device_qps_per_client",
				   num_or_null(p->dev_qps_per_client), "wall_s", p->wall_s,
				   "settled", p->settled, "server_exit_ok", p->server_exit_ok,
				   "settle_s", p->settle_s, "failures", p->failures, "perf",
				   p->perf ? p->perf : json_null()));
		json_object_set_new(json_array_get(pts, json_array_size(pts) - 1), "exhausted",
				    exhausted_json(&p->exh));
	}
	json_t *results = json_pack("{s:f, s:o, s:o, s:o}", "total_s", rep->total_s,
				    "largest_at_100", bound_json(&rep->full), "largest_at_99",
				    bound_json(&rep->p99), "points", pts);
	const struct sweep_point *bp = breaking_point(rep);
	json_t *bpj = json_null();
	if (bp) {
		bpj = exhausted_json(&bp->exh);
		if (json_is_object(bpj))
			json_object_set_new(bpj, "clients", json_integer(bp->clients));
	}
	json_object_set_new(results, "breaking_point", bpj);
	if (results && rep->seeds) {
		json_t *seeds = json_array();
		const struct seed_runs *sr = rep->seeds;
		for (int i = 0; i < sr->n; i++)
			json_array_append_new(
			    seeds,
			    json_pack("{s:i, s:i, s:f}", "clients", sr->run[i].clients,
				      "connected", sr->run[i].connected, "success_rate",
				      (double)sr->run[i].connected / sr->run[i].clients));
		json_object_set_new(
		    results, "seeds",
		    json_pack(
			"{s:s, s:o, s:i, s:i, s:s}", "source", sr->source, "runs", seeds,
			"largest_at_100", sr->largest_at_100, "practical_limit",
			sr->practical_limit, "resources_per_client", sr->resources));
	}
	json_t *root = qpg_json_doc("qpgate-sweep",
				    json_pack("{s:s, s:s, s:s, s:b}", "title", rep->title,
					      "command", rep->command, "transport", rep->transport,
					      "compare_seeds", rep->seeds != NULL),
				    results);
	if (!root)
		return -EINVAL;
	int rc = json_dump_file(root, path, JSON_INDENT(2)) ? -EIO : 0;
	json_decref(root);
	return rc;
}

/* V with DECIMALS places, or "-" when unknown (negative). */
static void fmt_or_dash(char *buf, size_t len, int decimals, double v)
{
	if (v < 0)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.*f", decimals, v);
}

static void bound_text(char *buf, size_t len, const struct sweep_bound *b)
{
	if (b->n == 0)
		snprintf(buf, len, "none (the smallest run missed it)");
	else if (b->fail_at)
		snprintf(buf, len, "%d (first miss at %d)", b->n, b->fail_at);
	else
		snprintf(buf, len, "at least %d (nothing failed)", b->n);
}

/* A run's measured figures as table cells ("-" where it measured none). */
struct point_cells {
	char c50[32], c99[32], kb[32], qps[32], rate[32], l50[32], l99[32];
};

static void point_cells(const struct sweep_point *p, struct point_cells *t)
{
	fmt_or_dash(t->c50, sizeof(t->c50), 1, p->connect_p50_ms);
	fmt_or_dash(t->c99, sizeof(t->c99), 1, p->connect_p99_ms);
	fmt_or_dash(t->kb, sizeof(t->kb), 1, p->kb_per_client);
	fmt_or_dash(t->qps, sizeof(t->qps), 2, p->dev_qps_per_client);
	fmt_or_dash(t->rate, sizeof(t->rate), 0, p->msgs_per_s);
	fmt_or_dash(t->l50, sizeof(t->l50), 0, p->lat_p50_us);
	fmt_or_dash(t->l99, sizeof(t->l99), 0, p->lat_p99_us);
}

static int write_md(const struct sweep_report *rep, const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -errno;
	char full[96], p99[96];
	bound_text(full, sizeof(full), &rep->full);
	bound_text(p99, sizeof(p99), &rep->p99);
	fprintf(f, "# %s\n\n%s, %s transport, %.0f s in all.\n\n`%s`\n\n", rep->title, rep->date,
		rep->transport, rep->total_s, rep->command);
	if (rep->seeds) {
		fprintf(f, "| | qpgate | seed prototype |\n|---|---|---|\n");
		const struct seed_runs *sr = rep->seeds;
		fprintf(f, "| largest N at 100%% success | %s | %d |\n", full, sr->largest_at_100);
		fprintf(f, "| largest N at >= 99%% success | %s | %d (%d at %.0f%%) |\n", p99,
			seed_p99(sr), sr->practical_limit, seed_rate(sr, sr->practical_limit));
		fprintf(f, "| resources per client | 1 QP (server side) | %s |\n\n", sr->resources);
	} else {
		fprintf(f,
			"| | qpgate |\n|---|---|\n| largest N at 100%% success | %s |\n"
			"| largest N at >= 99%% success | %s |\n"
			"| resources per client | 1 QP (server side) |\n\n",
			full, p99);
	}
	const struct sweep_point *bp = breaking_point(rep);
	if (bp && bp->exh.what != EXH_NONE)
		fprintf(f, "**Breaking point:** at %d clients, %s ran out first (%s): %s\n\n",
			bp->clients, exhausted_name(bp->exh.what), bp->exh.value, bp->exh.evidence);
	fprintf(f, "| clients | stage | connected | success | echoes | connect p50 [ms] | "
		   "connect p99 [ms] | server kB/client | msg/s | echo p50 [us] | echo p99 [us] | "
		   "settled | failures |\n");
	fprintf(f, "|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---|\n");
	for (int i = 0; i < rep->npoints; i++) {
		const struct sweep_point *p = &rep->points[i];
		struct point_cells t;
		point_cells(p, &t);
		fprintf(f,
			"| %d | %s | %d | %.2f%% | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			p->clients, sweep_stage_name(p->stage), p->connected, 100 * p->success,
			p->all_verified ? "all verified" : "NOT all verified", t.c50, t.c99, t.kb,
			t.rate, t.l50, t.l99, p->settled ? "yes" : "NO",
			p->failures[0] ? p->failures : "-");
	}
	if (!rep->seeds)
		return fclose(f) ? -errno : 0;
	fprintf(f, "\n## Seed prototype (published, seeds 002/003)\n\n| clients | connected | "
		   "success |\n|---:|---:|---:|\n");
	for (int i = 0; i < rep->seeds->n; i++)
		fprintf(f, "| %d | %d | %.0f%% |\n", rep->seeds->run[i].clients,
			rep->seeds->run[i].connected,
			100.0 * rep->seeds->run[i].connected / rep->seeds->run[i].clients);
	return fclose(f) ? -errno : 0;
}

/* ---- SVG line charts ---------------------------------------------------- */

struct series {
	const char *name;
	const char *color;
	int n;
	const double *x, *y;
	bool dashed;
};

struct chart {
	const char *title, *xlabel, *ylabel;
	double ymax_hint; /* e.g. 100 for percentages; 0: from the data */
	const struct series *s;
	int ns;
};

#define CW 560
#define CH 320
#define ML 64
#define MR 16
#define MT 52
#define MB 48

static double nice_ceil(double v)
{
	if (v <= 0)
		return 1;
	double e = pow(10, floor(log10(v)));
	double m = v / e;
	double n = m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10;
	return n * e;
}

static void svg_escape(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '<')
			fputs("&lt;", f);
		else if (*s == '>')
			fputs("&gt;", f);
		else if (*s == '&')
			fputs("&amp;", f);
		else
			fputc(*s, f);
	}
}

/* Client counts span decades, so x is log10; y is linear from 0. */
static void svg_chart(FILE *f, const struct chart *c)
{
	double xmin = 1e300, xmax = 0, ymax = c->ymax_hint;
	for (int i = 0; i < c->ns; i++)
		for (int k = 0; k < c->s[i].n; k++) {
			if (c->s[i].y[k] < 0)
				continue;
			xmin = fmin(xmin, c->s[i].x[k]);
			xmax = fmax(xmax, c->s[i].x[k]);
			if (!c->ymax_hint)
				ymax = fmax(ymax, c->s[i].y[k]);
		}
	if (xmax <= 0) {
		xmin = 1;
		xmax = 10;
	}
	double lx0 = floor(log10(xmin)), lx1 = ceil(log10(xmax));
	if (lx1 <= lx0)
		lx1 = lx0 + 1;
	if (!c->ymax_hint)
		ymax = nice_ceil(ymax * 1.05);
	const double pw = CW - ML - MR, ph = CH - MT - MB;
#define PX(v) (ML + (log10(v) - lx0) / (lx1 - lx0) * pw)
#define PY(v) (MT + ph - (v) / ymax * ph)
	fprintf(f,
		"<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\" width=\"%d\" "
		"height=\"%d\" role=\"img\">\n",
		CW, CH, CW, CH);
	fprintf(f, "<text x=\"%d\" y=\"22\" class=\"t\">", ML);
	svg_escape(f, c->title);
	fputs("</text>\n", f);
	for (int k = 0; k <= 4; k++) { /* y grid */
		double v = ymax * k / 4;
		fprintf(f,
			"<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" class=\"g\"/>"
			"<text x=\"%d\" y=\"%.1f\" class=\"yl\">%g</text>\n",
			ML, CW - MR, PY(v), PY(v), ML - 6, PY(v) + 4, v);
	}
	for (double d = lx0; d <= lx1 + 1e-9; d += 1) { /* x decades, 2 and 5 between */
		for (int m = 1; m <= 5; m += (m == 1 ? 1 : 3)) {
			double v = m * pow(10, d);
			if (log10(v) > lx1 + 1e-9)
				break;
			fprintf(f,
				"<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%.1f\" class=\"%s\"/>"
				"<text x=\"%.1f\" y=\"%.1f\" class=\"xl\">%g</text>\n",
				PX(v), PX(v), MT, MT + ph, m == 1 ? "g" : "g2", PX(v), MT + ph + 16,
				v);
		}
	}
	fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"al\">", ML + pw / 2, CH - 8);
	svg_escape(f, c->xlabel);
	fprintf(f, "</text><text transform=\"translate(14 %.1f) rotate(-90)\" class=\"al\">",
		MT + ph / 2);
	svg_escape(f, c->ylabel);
	fputs("</text>\n", f);
	for (int i = 0; i < c->ns; i++) {
		const struct series *s = &c->s[i];
		fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"",
			s->color, s->dashed ? " stroke-dasharray=\"6 4\"" : "");
		for (int k = 0; k < s->n; k++)
			if (s->y[k] >= 0)
				fprintf(f, "%.1f,%.1f ", PX(s->x[k]), PY(s->y[k]));
		fputs("\"/>\n", f);
		for (int k = 0; k < s->n; k++)
			if (s->y[k] >= 0)
				fprintf(f,
					"<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\">"
					"<title>%s: %g clients, %.4g</title></circle>\n",
					PX(s->x[k]), PY(s->y[k]), s->color, s->name, s->x[k],
					s->y[k]);
		/* Legend in the top margin, where no data can hide it. */
		double lx = ML + i * 190;
		fprintf(f,
			"<rect x=\"%.1f\" y=\"%d\" width=\"14\" height=\"4\" fill=\"%s\"/>"
			"<text x=\"%.1f\" y=\"%d\" class=\"lg\">",
			lx, MT - 14, s->color, lx + 18, MT - 9);
		svg_escape(f, s->name);
		fputs("</text>\n", f);
	}
	fputs("</svg>\n", f);
#undef PX
#undef PY
}

static int cmp_by_clients(const void *a, const void *b)
{
	const struct sweep_point *x = a, *y = b;
	return (x->clients > y->clients) - (x->clients < y->clients);
}

static const char css[] =
    "body{font:15px/1.5 'DejaVu Sans',system-ui,sans-serif;margin:0;background:#f5f6f8;"
    "color:#1d2330}main{max-width:1180px;margin:0 auto;padding:28px}"
    "h1{font-size:26px;margin:0 0 4px}.sub{color:#5b6475;margin:0 0 22px}"
    ".cards{display:grid;grid-template-columns:repeat(4,1fr);gap:14px;margin-bottom:22px}"
    ".card{background:#fff;border-radius:10px;padding:14px 18px;box-shadow:0 1px 3px #0002}"
    ".card b{display:block;font-size:30px;color:#0b6bcb}.card.seed b{color:#9a5b00}"
    ".card span{color:#5b6475;font-size:13px}"
    ".charts{display:grid;grid-template-columns:1fr 1fr;gap:14px}"
    ".charts figure{margin:0;background:#fff;border-radius:10px;padding:8px;"
    "box-shadow:0 1px 3px #0002}svg{width:100%;height:auto}"
    "svg .t{font-weight:bold;font-size:14px}svg .g{stroke:#d5d9e0}svg .g2{stroke:#eef0f3}"
    "svg .yl{text-anchor:end;font-size:11px;fill:#5b6475}"
    "svg .xl{text-anchor:middle;font-size:11px;fill:#5b6475}"
    "svg .al{text-anchor:middle;font-size:12px;fill:#1d2330}svg .lg{font-size:12px}"
    "table{border-collapse:collapse;width:100%;background:#fff;border-radius:10px;"
    "overflow:hidden;box-shadow:0 1px 3px #0002;margin:14px 0;font-size:13px}"
    "th,td{padding:5px 8px;white-space:nowrap;text-align:right;border-bottom:1px solid #eef0f3}"
    "th{background:#1d2330;color:#fff;font-weight:normal}td.l,th.l{text-align:left}"
    ".bad{color:#b3261e;font-weight:bold}.ok{color:#1b7f3b}code{font-size:12px}";

static void html_card(FILE *f, const char *cls, const char *big, const char *what)
{
	fprintf(f, "<div class=\"card %s\"><b>%s</b><span>%s</span></div>\n", cls, big, what);
}

/* The page's head, title line and the summary cards. */
static void html_head(FILE *f, const struct sweep_report *rep)
{
	const struct seed_runs *sr = rep->seeds;
	fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
		   "<title>");
	svg_escape(f, rep->title);
	fprintf(f, "</title><style>%s</style></head><body><main>\n<h1>", css);
	svg_escape(f, rep->title);
	fprintf(f,
		"</h1><p class=\"sub\">%s &middot; %s transport &middot; %d runs in %.0f s "
		"&middot; <code>",
		rep->date, rep->transport, rep->npoints, rep->total_s);
	svg_escape(f, rep->command);
	fputs("</code></p>\n<div class=\"cards\">\n", f);
	char big[64], what[160];
	snprintf(big, sizeof(big), "%s%d", rep->full.fail_at ? "" : "&ge; ", rep->full.n);
	snprintf(what, sizeof(what), "largest N at 100%% success%s",
		 rep->full.fail_at ? "" : " (nothing failed up to here)");
	html_card(f, "", big, what);
	snprintf(big, sizeof(big), "%s%d", rep->p99.fail_at ? "" : "&ge; ", rep->p99.n);
	html_card(f, "", big, "largest N at &ge; 99% success");
	const struct sweep_point *bp = breaking_point(rep);
	if (bp && bp->exh.what != EXH_NONE) {
		char esc[512];
		snprintf(what, sizeof(what), "ran out first at %d clients: %s", bp->clients,
			 bp->exh.value);
		snprintf(esc, sizeof(esc), "%s", exhausted_name(bp->exh.what));
		html_card(f, "", esc, what);
	}
	if (rep->seeds) {
		snprintf(big, sizeof(big), "%d", sr->largest_at_100);
		html_card(f, "seed", big, "seed prototype at 100% (thread per client)");
		snprintf(big, sizeof(big), "%d", sr->practical_limit);
		snprintf(what, sizeof(what), "seed prototype's practical limit (%.0f%%)",
			 seed_rate(sr, sr->practical_limit));
		html_card(f, "seed", big, what);
	}
}

/* The four charts, from the points sorted by clients. */
static void html_charts(FILE *f, const struct sweep_report *rep, const struct sweep_point *p, int n,
			double *buf)
{
	double *x = buf, *succ = buf + n, *c50 = buf + 2 * n, *c99 = buf + 3 * n, *kb = buf + 4 * n,
	       *rate = buf + 5 * n, *qps = buf + 6 * n;
	for (int i = 0; i < n; i++) {
		x[i] = p[i].clients;
		succ[i] = 100 * p[i].success;
		c50[i] = p[i].connect_p50_ms;
		c99[i] = p[i].connect_p99_ms;
		kb[i] = p[i].kb_per_client;
		rate[i] = p[i].msgs_per_s;
		qps[i] = p[i].dev_qps_per_client;
	}
	const struct seed_runs *sr = rep->seeds;
	int nseed = sr ? sr->n : 0;
	double sx[SEED_RUNS_MAX], sy[SEED_RUNS_MAX];
	for (int i = 0; i < nseed; i++) {
		sx[i] = sr->run[i].clients;
		sy[i] = 100.0 * sr->run[i].connected / sr->run[i].clients;
	}
	fputs("</div>\n<div class=\"charts\">\n", f);
	struct series s1[] = {{"qpgate", "#0b6bcb", n, x, succ, false},
			      {"seed prototype", "#d98200", nseed, sx, sy, true}};
	struct series s2[] = {{"p50", "#0b6bcb", n, x, c50, false},
			      {"p99", "#b3261e", n, x, c99, false}};
	struct series s3[] = {{"server RSS per client", "#1b7f3b", n, x, kb, false}};
	struct series s4[] = {{"echoes verified per second", "#6b3fa0", n, x, rate, false}};
	struct chart charts[] = {
	    {"Success rate vs clients", "concurrent clients", "connected [%]", 100, s1,
	     rep->seeds ? 2 : 1},
	    {"Connect time (TCP + TLS 1.3 + QP to RTS)", "concurrent clients", "ms", 0, s2, 2},
	    {"Server memory per connected client", "concurrent clients", "kB", 0, s3, 1},
	    {"Throughput vs clients", "concurrent clients", "messages/s", 0, s4, 1},
	};
	for (size_t i = 0; i < sizeof(charts) / sizeof(charts[0]); i++) {
		fputs("<figure>", f);
		svg_chart(f, &charts[i]);
		fputs("</figure>\n", f);
	}
}

/* Every run, a row each. */
static void html_runs(FILE *f, const struct sweep_point *p, int n)
{
	fputs("</div>\n<h2>Runs</h2>\n<div class=\"tw\"><table><tr><th>clients</th><th "
	      "class=\"l\">stage</th>"
	      "<th>connected</th><th>success</th><th class=\"l\">echoes</th><th>connect p50 "
	      "[ms]</th><th>p99 [ms]</th><th>server kB/client</th><th>device QPs/client</th>"
	      "<th>msg/s</th><th>echo p50 [&micro;s]</th><th>p99 [&micro;s]</th>"
	      "<th class=\"l\">settled</th><th class=\"l\">failures</th></tr>\n",
	      f);
	for (int i = 0; i < n; i++) {
		const struct sweep_point *q = &p[i];
		struct point_cells t;
		point_cells(q, &t);
		fprintf(f,
			"<tr><td>%d</td><td class=\"l\">%s</td><td>%d</td><td class=\"%s\">"
			"%.2f%%</td><td class=\"l %s\">%s</td><td>%s</td><td>%s</td><td>%s</td>"
			"<td>%s</td><td>%s</td><td>%s</td><td>%s</td><td class=\"l %s\">%s</td>"
			"<td class=\"l\">",
			q->clients, sweep_stage_name(q->stage), q->connected,
			q->success >= 1 ? "ok" : "bad", 100 * q->success,
			q->all_verified ? "ok" : "bad",
			q->all_verified ? "all verified" : "NOT all", t.c50, t.c99, t.kb, t.qps,
			t.rate, t.l50, t.l99, q->settled ? "ok" : "bad", q->settled ? "yes" : "NO");
		svg_escape(f, q->failures[0] ? q->failures : "-");
		fputs("</td></tr>\n", f);
	}
	fputs("</table></div>\n", f);
}

/* The seed prototype's published runs, when the report has them. */
static void html_seeds(FILE *f, const struct seed_runs *sr)
{
	if (!sr)
		return;
	fputs("<h2>Seed prototype, as published (seeds 002 and 003)</h2>\n<div "
	      "class=\"tw\"><table><tr>"
	      "<th>clients</th><th>connected</th><th>success</th><th class=\"l\">resources "
	      "per client</th></tr>\n",
	      f);
	for (int i = 0; i < sr->n; i++) {
		double pct = 100.0 * sr->run[i].connected / sr->run[i].clients;
		fprintf(f, "<tr><td>%d</td><td>%d</td><td class=\"%s\">%.0f%%</td><td class=\"l\">",
			sr->run[i].clients, sr->run[i].connected, pct >= 100 ? "ok" : "bad", pct);
		svg_escape(f, sr->resources);
		fputs("</td></tr>\n", f);
	}
	fputs("</table></div>\n", f);
}

static int write_html(const struct sweep_report *rep, const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -errno;
	int n = rep->npoints;
	struct sweep_point *p = malloc(sizeof(*p) * (size_t)(n ? n : 1));
	double *buf = calloc((size_t)(n ? n : 1) * 7, sizeof(double));
	if (!p || !buf) {
		free(p);
		free(buf);
		fclose(f);
		return -ENOMEM;
	}
	memcpy(p, rep->points, sizeof(*p) * (size_t)n);
	qsort(p, (size_t)n, sizeof(*p), cmp_by_clients);
	html_head(f, rep);
	html_charts(f, rep, p, n, buf);
	html_runs(f, p, n);
	html_seeds(f, rep->seeds);
	fputs("<p class=\"sub\">qpgate: one QP per client on the server, sharing "
	      "each "
	      "thread's CQ, SRQ and registered pool; every connection bootstrapped over TLS 1.3 "
	      "with CSPRNG PSNs, every message authenticated. Times measured on this run's "
	      "machine; under qemu TCG absolute times are inflated, compare them as ratios "
	      "(bench/anchors.sh).</p>\n</main></body></html>\n",
	      f);
	free(p);
	free(buf);
	return fclose(f) ? -errno : 0;
}

int report_write(const struct sweep_report *rep, const char *dir, char *err, size_t err_len)
{
	static const char *const names[] = {"report.json", "report.md", "report.html"};
	int (*const writers[])(const struct sweep_report *, const char *) = {write_json, write_md,
									     write_html};
	for (int i = 0; i < 3; i++) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		int rc = writers[i](rep, path);
		if (rc) {
			snprintf(err, err_len, "cannot write %s: %s", path, strerror(-rc));
			return rc;
		}
	}
	return 0;
}
