/* SPDX-License-Identifier: BSD-2-Clause */
/* The KV cache over a cluster of qpgate servers, found in etcd: N values
 * stored and read back through one target (qpgate/kv_target.h), then
 * what each member served.
 *   kv_cluster ETCD_URL CLUSTER_NAME CA [N]
 * Build: cc kv_cluster.c $(pkg-config --cflags --libs qpgate-cluster) */
#include <qpgate/kv_call.h>
#include <qpgate/kv_cluster.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: kv_cluster ETCD_URL CLUSTER_NAME CA [N]\n");
		return 2;
	}
	int n = argc > 4 ? atoi(argv[4]) : 100;
	signal(SIGPIPE, SIG_IGN);
	struct qpg_kv_cluster_opts o;
	qpg_kv_cluster_opts_default(&o);
	o.etcd.endpoints = argv[1];
	o.etcd.name = argv[2];
	o.etcd.quiet = 1;
	o.pool.client.ca = argv[3];
	struct qpg_kv_cluster *c;
	char err[256];
	if (qpg_kv_cluster_create(&c, &o, err, sizeof(err))) {
		fprintf(stderr, "kv_cluster: %s\n", err);
		return 1;
	}
	struct qpg_kv_target *t = qpg_kv_cluster_target(c);
	int bad = 0;
	for (int i = 0; i < n; i++) {
		char key[32], val[64], got[64];
		int kl = snprintf(key, sizeof(key), "example/%d", i);
		int vl = snprintf(val, sizeof(val), "value %d of %d", i, n);
		uint32_t len = 0;
		int st = qpg_kv_call_wait(t, QPG_KV_PUT, key, (uint16_t)kl, val, (uint32_t)vl, NULL,
					  0, NULL, NULL);
		if (st == QPG_KV_OK)
			st = qpg_kv_call_wait(t, QPG_KV_GET, key, (uint16_t)kl, NULL, 0, got,
					      sizeof(got), &len, NULL);
		if (st != QPG_KV_OK || len != (uint32_t)vl || memcmp(got, val, len) != 0) {
			fprintf(stderr, "kv_cluster: %s: %s\n", key,
				st < 0 ? strerror(-st) : qpg_kv_status_name((uint8_t)st));
			bad++;
		}
	}
	struct qpg_kv_target_stats s;
	if (qpg_kv_target_stats(t, &s) == 0) {
		printf("view revision %lld, %u members\n", (long long)s.revision, s.n);
		for (unsigned i = 0; i < s.n; i++)
			printf("  %-12s %s ops %llu\n", s.m[i].id, s.m[i].up ? "up  " : "down",
			       (unsigned long long)s.m[i].ops);
		qpg_kv_target_stats_free(&s);
	}
	printf("%d of %d values stored and read back\n", n - bad, n);
	qpg_kv_target_destroy(t);
	return bad ? 1 : 0;
}
