/* SPDX-License-Identifier: BSD-2-Clause */
#include "resources.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void proc_path(pid_t pid, const char *leaf, char *out, size_t len)
{
	if (pid)
		snprintf(out, len, "/proc/%d/%s", (int)pid, leaf);
	else
		snprintf(out, len, "/proc/self/%s", leaf);
}

void proc_sample(pid_t pid, struct proc_sample *s)
{
	char path[64], line[512];
	memset(s, 0, sizeof(*s));
	proc_path(pid, "stat", path, sizeof(path));
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	if (fgets(line, sizeof(line), f)) {
		/* Fields after the ")" of comm: state is 3, utime 14, stime 15. */
		char *p = strrchr(line, ')');
		unsigned long ut = 0, st = 0;
		if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
				&st) == 2)
			s->cpu_s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
	}
	fclose(f);
	proc_path(pid, "status", path, sizeof(path));
	f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "VmRSS: %ld", &s->rss_kb);
		sscanf(line, "VmHWM: %ld", &s->hwm_kb);
		sscanf(line, "Threads: %d", &s->threads);
	}
	fclose(f);
	proc_path(pid, "fd", path, sizeof(path));
	DIR *d = opendir(path);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d)))
			if (e->d_name[0] != '.')
				s->fds++;
		closedir(d);
	}
	s->ok = true;
}

int proc_check_server_pid(pid_t pid)
{
	struct proc_sample ps;
	if (!pid)
		return 0;
	proc_sample(pid, &ps);
	if (ps.ok)
		return 0;
	fprintf(stderr, "error: --server-pid %d: no such process on this machine\n", (int)pid);
	return 2;
}

void dev_counts(const char *dev, struct dev_counts *c)
{
	memset(c, 0, sizeof(*c));
	/* "0: rxe0: pd 3 cq 4 qp 1001 cm_id 0 mr 2 ctx 2 srq 1" */
	FILE *p = popen("rdma res show 2>/dev/null", "r");
	if (!p)
		return;
	char line[512];
	while (fgets(line, sizeof(line), p)) {
		char name[64];
		if (sscanf(line, "%*d: %63[^:]:", name) != 1 || (dev && strcmp(name, dev) != 0))
			continue;
		struct {
			const char *key;
			long *val;
		} keys[] = {{" pd ", &c->pd},	    {" cq ", &c->cq}, {" qp ", &c->qp},
			    {" cm_id ", &c->cm_id}, {" mr ", &c->mr}, {" ctx ", &c->ctx},
			    {" srq ", &c->srq}};
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
			char *at = strstr(line, keys[k].key);
			if (at)
				*keys[k].val = strtol(at + strlen(keys[k].key), NULL, 10);
		}
		c->ok = true;
		break;
	}
	pclose(p);
}
