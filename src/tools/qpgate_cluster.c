/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate-cluster: what a cluster looks like from etcd, as `etcdctl member
 * list` or `redis-cli --cluster info` show theirs.
 *   status   one line per member, and the view's revision
 *   watch    each view change as it comes, with its time
 *   spread   how N keys spread over the active members (HRW)
 *   owner    which member owns each KEY given */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etcd_opts.h"
#include "jsondoc.h"
#include "opts.h"
#include "qpgate/cluster.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static unsigned active(const struct qpg_cluster_view *v)
{
	unsigned n = 0;
	for (unsigned i = 0; i < v->n; i++)
		n += v->m[i].state == QPG_MEMBER_ACTIVE;
	return n;
}

static void print_view(FILE *f, const struct qpg_cluster_view *v)
{
	fprintf(f, " %-24s %-28s %-9s %-5s %14s %6s  %s\n", "ID", "ADDRESS (TLS NAME)", "STATE",
		"TRANS", "LOAD", "WEIGHT", "INCARNATION");
	for (unsigned i = 0; i < v->n; i++) {
		const struct qpg_cluster_member *m = &v->m[i];
		char addr[600], load[40];
		snprintf(addr, sizeof(addr), "%s:%u (%s)", m->host, m->port, m->tls_name);
		snprintf(load, sizeof(load), "%u/%u", m->clients, m->max_clients);
		fprintf(f, " %-24s %-28s %-9s %-5s %14s %6u  %016llx\n", m->id, addr,
			qpg_member_state_name(m->state), m->tcp ? "tcp" : "rdma", load, m->weight,
			(unsigned long long)m->incarnation);
	}
	fprintf(f, " view revision %lld: %u member%s, %u active\n", (long long)v->revision, v->n,
		v->n == 1 ? "" : "s", active(v));
}

static json_t *view_json(const struct qpg_cluster_view *v)
{
	json_t *a = json_array();
	for (unsigned i = 0; i < v->n; i++) {
		const struct qpg_cluster_member *m = &v->m[i];
		char inc[17];
		snprintf(inc, sizeof(inc), "%016llx", (unsigned long long)m->incarnation);
		json_array_append_new(
		    a, json_pack("{s:s, s:s, s:i, s:s, s:s, s:s, s:i, s:i, s:i, s:s}", "id", m->id,
				 "host", m->host, "port", (json_int_t)m->port, "tls_name",
				 m->tls_name, "transport", m->tcp ? "tcp" : "rdma", "state",
				 qpg_member_state_name(m->state), "clients", (json_int_t)m->clients,
				 "max_clients", (json_int_t)m->max_clients, "weight",
				 (json_int_t)m->weight, "incarnation", inc));
	}
	return json_pack("{s:I, s:o}", "revision", (json_int_t)v->revision, "members", a);
}

struct watch_ctx {
	unsigned until_active;
	volatile int done;
};

static void on_view(void *user, const struct qpg_cluster_view *old,
		    const struct qpg_cluster_view *now, bool gap)
{
	struct watch_ctx *w = user;
	(void)old;
	printf("%.6f view revision %lld: %u members, %u active%s\n", now_s(),
	       (long long)now->revision, now->n, active(now), gap ? " (after a gap)" : "");
	for (unsigned i = 0; i < now->n; i++)
		printf("%.6f   %s %s %s:%u %016llx\n", now_s(), now->m[i].id,
		       qpg_member_state_name(now->m[i].state), now->m[i].host, now->m[i].port,
		       (unsigned long long)now->m[i].incarnation);
	fflush(stdout);
	if (w->until_active && active(now) == w->until_active)
		w->done = 1;
}

/* status: the view, and with --json FILE, the view as JSON. 0, or 2. */
static int cmd_status(const struct qpg_cluster_view *v, const struct qpg_cluster_opts *co,
		      const char *json_file)
{
	print_view(stdout, v);
	if (!json_file)
		return 0;
	int ret = 0;
	json_t *doc = qpg_json_doc(
	    "qpgate-cluster",
	    json_pack("{s:s, s:s}", "cluster", co->endpoints, "cluster_name", co->name),
	    view_json(v));
	if (!doc || json_dump_file(doc, json_file, JSON_INDENT(2))) {
		fprintf(stderr, "qpgate-cluster: error: cannot write %s\n", json_file);
		ret = 2;
	}
	json_decref(doc);
	return ret;
}

/* watch: the view changes (on_view prints them) for DURATION seconds, or
 * until WC's count of active members is seen. 0, or 1 if it was not. */
static int cmd_watch(struct watch_ctx *wc, double duration)
{
	double end = now_s() + duration;
	while (!wc->done && now_s() < end)
		nanosleep(&(struct timespec){0, 5000000}, NULL);
	if (wc->until_active && !wc->done) {
		fprintf(stderr, "qpgate-cluster: %u active members not seen within %.1f s\n",
			wc->until_active, duration);
		return 1;
	}
	return 0;
}

/* owner: one line a key, KEY OWNER HOST:PORT REVISION (owner "-": none
 * active). */
static int cmd_owner(const struct qpg_cluster_view *v, char **keys, int n)
{
	for (int i = 0; i < n; i++) {
		int o = qpg_cluster_owner(v, keys[i], strlen(keys[i]));
		if (o < 0)
			printf("%s - - %lld\n", keys[i], (long long)v->revision);
		else
			printf("%s %s %s:%u %lld\n", keys[i], v->m[o].id, v->m[o].host,
			       v->m[o].port, (long long)v->revision);
	}
	return 0;
}

/* spread: how KEYS keys key-0... spread over the active members. */
static int cmd_spread(const struct qpg_cluster_view *v, unsigned keys)
{
	unsigned *count = calloc(v->n + 1, sizeof(*count));
	if (!count) {
		fprintf(stderr, "qpgate-cluster: error: out of memory\n");
		return 3;
	}
	for (unsigned k = 0; k < keys; k++) {
		char key[32];
		int n = snprintf(key, sizeof(key), "key-%u", k);
		int o = qpg_cluster_owner(v, key, (size_t)n);
		count[o < 0 ? v->n : (unsigned)o]++;
	}
	unsigned na = active(v), mx = 0;
	for (unsigned i = 0; i < v->n; i++) {
		if (v->m[i].state != QPG_MEMBER_ACTIVE)
			continue;
		printf(" %-24s %8u keys\n", v->m[i].id, count[i]);
		mx = count[i] > mx ? count[i] : mx;
	}
	if (na)
		printf(" %u keys over %u active members: max/mean %.4f\n", keys, na,
		       (double)mx / ((double)keys / na));
	else
		printf(" no active member: %u keys have no owner\n", keys);
	free(count);
	return 0;
}

/* The command at ARGV[POS] and what follows it are well formed, and etcd
 * is named: 0, or 2 with the error printed. */
static int check_command(int argc, char **argv, int pos, const struct qpg_cluster_opts *co)
{
	if (pos >= argc) {
		fprintf(stderr, "error: say status, watch, spread or owner KEY...\n");
		return 2;
	}
	const char *cmd = argv[pos];
	bool owner = strcmp(cmd, "owner") == 0;
	if (strcmp(cmd, "status") && strcmp(cmd, "watch") && strcmp(cmd, "spread") && !owner) {
		fprintf(stderr, "error: the command is status, watch, spread or owner, not '%s'\n",
			cmd);
		return 2;
	}
	if ((owner && pos + 1 >= argc) || (!owner && pos + 1 < argc)) {
		fprintf(stderr, "error: owner takes KEY..., the other commands nothing more\n");
		return 2;
	}
	if (!co->endpoints || !co->name) {
		fprintf(stderr, "error: --cluster URL and --cluster-name NAME are required\n");
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct qpg_cluster_opts co = {0};
	const char *json_file = NULL;
	double duration = 10;
	unsigned until_active = 0, keys = 30000;
	const struct qpg_opt opts[] = {
	    QPG_OPTS_ETCD(&co, "etcd's endpoints"),
	    {"json", 0, OPT_STR, &json_file, 0, 0, "FILE", "status: also write the view as JSON"},
	    {"duration", 'D', OPT_DOUBLE, &duration, 0.1, 86400, "S",
	     "watch: for S seconds (default 10)"},
	    {"until-active", 0, OPT_UINT, &until_active, 1, 100000, "N",
	     "watch: stop (exit 0) once N members are active; exit 1 if -D ends first"},
	    {"keys", 'n', OPT_UINT, &keys, 1, 100000000, "N", "spread: keys (default 30000)"},
	    QPG_OPT_END};
	const struct qpg_opt *const tables[] = {opts, NULL};
	int pos = qpg_opts_parse(
	    argc, argv, tables,
	    "qpgate-cluster status|watch|spread|owner KEY... --cluster URL --cluster-name NAME",
	    -2);
	int ret = check_command(argc, argv, pos, &co);
	if (ret)
		return ret;
	const char *cmd = argv[pos];
	co.quiet = true;
	struct watch_ctx wc = {.until_active = until_active};
	char err[512];
	struct qpg_cluster_watch *w;
	bool watching = strcmp(cmd, "watch") == 0;
	int rc = qpg_cluster_watch_start(&w, &co, watching ? on_view : NULL, &wc, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "qpgate-cluster: error: %s\n", err);
		return rc == -EINVAL ? 2 : 3;
	}
	const struct qpg_cluster_view *v = qpg_cluster_view_get(w);
	if (strcmp(cmd, "status") == 0)
		ret = cmd_status(v, &co, json_file);
	else if (watching)
		ret = cmd_watch(&wc, duration);
	else if (strcmp(cmd, "owner") == 0)
		ret = cmd_owner(v, argv + pos + 1, argc - pos - 1);
	else
		ret = cmd_spread(v, keys);
	qpg_cluster_view_put(v);
	qpg_cluster_watch_stop(w);
	return ret;
}
