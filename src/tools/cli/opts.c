/* SPDX-License-Identifier: BSD-2-Clause */
#include "opts.h"

#include <getopt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "qpgate/version.h"

static int count(const struct qpg_opt *const *tables)
{
	int n = 0;
	for (int t = 0; tables[t]; t++)
		for (const struct qpg_opt *o = tables[t]; o->kind != OPT_END; o++)
			n++;
	return n;
}

static void store(const struct qpg_opt *o, const char *arg, const char *flag)
{
	long long lo = (long long)o->min, hi = (long long)o->max;
	switch (o->kind) {
	case OPT_FLAG:
		*(bool *)o->dst = true;
		break;
	case OPT_FLAG_OFF:
		*(bool *)o->dst = false;
		break;
	case OPT_COUNT:
		(*(int *)o->dst)++;
		break;
	case OPT_STR:
		*(const char **)o->dst = arg;
		break;
	case OPT_INT:
		*(int *)o->dst = (int)qpg_cli_int(arg, lo, hi, flag);
		break;
	case OPT_LONG:
		*(long *)o->dst = (long)qpg_cli_int(arg, lo, hi, flag);
		break;
	case OPT_U8:
		*(uint8_t *)o->dst = (uint8_t)qpg_cli_int(arg, lo, hi, flag);
		break;
	case OPT_U16:
		*(uint16_t *)o->dst = (uint16_t)qpg_cli_int(arg, lo, hi, flag);
		break;
	case OPT_U32:
		*(uint32_t *)o->dst = (uint32_t)qpg_cli_int(arg, lo, hi, flag);
		break;
	case OPT_UINT:
		*(unsigned *)o->dst = (unsigned)qpg_cli_int(arg, lo, hi, flag);
		break;
	case OPT_DOUBLE:
		*(double *)o->dst = qpg_cli_double(arg, o->min, o->max, flag);
		break;
	case OPT_SIZE:
		*(size_t *)o->dst = (size_t)qpg_cli_size(arg, (unsigned long long)o->min,
							 (unsigned long long)o->max, flag);
		break;
	case OPT_SIZE32:
		*(uint32_t *)o->dst = (uint32_t)qpg_cli_size(arg, (unsigned long long)o->min,
							     (unsigned long long)o->max, flag);
		break;
	case OPT_TRANSPORT:
		*(int *)o->dst = qpg_cli_transport(arg);
		break;
	case OPT_CALL:
		o->call(arg, o->dst);
		break;
	case OPT_END:
		break;
	}
}

/* The value DST holds now, which at --help time is the tool's default;
 * false for kinds without a number. */
static bool current_value(const struct qpg_opt *o, char *buf, size_t len)
{
	switch (o->kind) {
	case OPT_INT:
		snprintf(buf, len, "%d", *(int *)o->dst);
		return true;
	case OPT_LONG:
		snprintf(buf, len, "%ld", *(long *)o->dst);
		return true;
	case OPT_U8:
		snprintf(buf, len, "%u", *(uint8_t *)o->dst);
		return true;
	case OPT_U16:
		snprintf(buf, len, "%u", *(uint16_t *)o->dst);
		return true;
	case OPT_U32:
	case OPT_SIZE32:
		snprintf(buf, len, "%u", *(uint32_t *)o->dst);
		return true;
	case OPT_UINT:
		snprintf(buf, len, "%u", *(unsigned *)o->dst);
		return true;
	case OPT_SIZE:
		snprintf(buf, len, "%zu", *(size_t *)o->dst);
		return true;
	case OPT_DOUBLE:
		snprintf(buf, len, "%g", *(double *)o->dst);
		return true;
	default:
		return false;
	}
}

void qpg_opts_usage(FILE *f, const struct qpg_opt *const *tables, const char *synopsis)
{
	fprintf(f, "Usage: %s\n\nOptions:\n", synopsis);
	for (int t = 0; tables[t]; t++)
		for (const struct qpg_opt *o = tables[t]; o->kind != OPT_END; o++) {
			char left[64];
			int n =
			    snprintf(left, sizeof(left), "  %c%c%s--%s%s%s", o->letter ? '-' : ' ',
				     o->letter ? o->letter : ' ', o->letter ? ", " : "  ", o->name,
				     o->arg ? " " : "", o->arg ? o->arg : "");
			/* A help text that does not name its default gets the
			 * tool's own, so rows shared between tools stay true. */
			char def[48] = "";
			char v[32];
			if (!strstr(o->help, "default") && current_value(o, v, sizeof(v)) &&
			    strcmp(v, "0") != 0)
				snprintf(def, sizeof(def), " (default %s)", v);
			fprintf(f, "%s%*s%s%s\n", left, n < 32 ? 32 - n : 1, "", o->help, def);
		}
	fprintf(f, "  -h, --help                    this text\n");
	fprintf(f, "  -V, --version                 the version (%s)\n", qpg_version());
}

int qpg_opts_parse(int argc, char **argv, const struct qpg_opt *const *tables, const char *synopsis,
		   int npos)
{
	int n = count(tables);
	struct option *lo = calloc((size_t)n + 3, sizeof(*lo));
	const struct qpg_opt **by_index = calloc((size_t)n + 1, sizeof(*by_index));
	char shorts[2 * 128 + 3] = "";
	size_t ns = 0;
	if (npos == -1)
		shorts[ns++] = '+'; /* the rest goes to another program: stop at it */
	if (!lo || !by_index) {
		fprintf(stderr, "error: out of memory\n");
		exit(2);
	}
	int i = 0;
	for (int t = 0; tables[t]; t++)
		for (const struct qpg_opt *o = tables[t]; o->kind != OPT_END; o++, i++) {
			bool has_arg =
			    o->kind != OPT_FLAG && o->kind != OPT_FLAG_OFF && o->kind != OPT_COUNT;
			lo[i] = (struct option){o->name, has_arg, NULL, 1000 + i};
			by_index[i] = o;
			if (o->letter && ns + 2 < sizeof(shorts)) {
				shorts[ns++] = (char)o->letter;
				if (has_arg)
					shorts[ns++] = ':';
			}
		}
	lo[i] = (struct option){"help", 0, NULL, 'h'};
	lo[i + 1] = (struct option){"version", 0, NULL, 'V'};
	shorts[ns++] = 'h';
	shorts[ns++] = 'V';
	shorts[ns] = 0;
	int ch;
	while ((ch = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
		if (ch == 'h') {
			qpg_opts_usage(stdout, tables, synopsis);
			exit(0);
		}
		if (ch == 'V') { /* "qpgate-perf (qpgate) 0.1.0", as GNU tools */
			printf("%.*s (qpgate) %s\n", (int)strcspn(synopsis, " "), synopsis,
			       qpg_version());
			exit(0);
		}
		const struct qpg_opt *o = NULL;
		if (ch >= 1000 && ch < 1000 + n)
			o = by_index[ch - 1000];
		for (int k = 0; !o && k < n; k++)
			if (by_index[k]->letter == ch)
				o = by_index[k];
		if (!o) { /* getopt has said what was wrong */
			fprintf(stderr, "usage: %s (--help lists the options)\n", synopsis);
			exit(2);
		}
		char flag[80];
		snprintf(flag, sizeof(flag), "--%s", o->name);
		store(o, optarg, flag);
	}
	free(lo);
	free(by_index);
	if (npos >= 0 && argc - optind != npos) {
		fprintf(stderr, "error: %d argument%s expected after the options, not %d\n", npos,
			npos == 1 ? "" : "s", argc - optind);
		fprintf(stderr, "usage: %s (--help lists the options)\n", synopsis);
		exit(2);
	}
	return optind;
}
