/* SPDX-License-Identifier: BSD-2-Clause */
/* The flags every tool that reads or joins a cluster takes: where etcd is
 * and how to reach it, into a struct qpg_cluster_opts. HELP says what
 * --cluster does for that tool. */
#ifndef QPG_TOOLS_ETCD_OPTS_H
#define QPG_TOOLS_ETCD_OPTS_H

#include "opts.h"
#include "qpgate/cluster.h"

#define QPG_OPTS_ETCD(e, help)                                                                     \
	{"cluster", 0, OPT_STR, &(e)->endpoints, 0, 0, "URL[,URL...]", help},                      \
	    {"cluster-name",                                                                       \
	     0,                                                                                    \
	     OPT_STR,                                                                              \
	     &(e)->name,                                                                           \
	     0,                                                                                    \
	     0,                                                                                    \
	     "NAME",                                                                               \
	     "the cluster's name (its keys under /qpgate/NAME/)"},                                 \
	    {"cluster-ca", 0, OPT_STR, &(e)->ca, 0, 0, "FILE", "CA of etcd's certificate"},        \
	    {"cluster-cert",                                                                       \
	     0,                                                                                    \
	     OPT_STR,                                                                              \
	     &(e)->cert,                                                                           \
	     0,                                                                                    \
	     0,                                                                                    \
	     "FILE",                                                                               \
	     "our client certificate for etcd"},                                                   \
	    {"cluster-key", 0, OPT_STR, &(e)->key, 0, 0, "FILE", "its key"},                       \
	    {"cluster-user", 0, OPT_STR, &(e)->user, 0, 0, "NAME",                                 \
	     "etcd's user to act as (etcd's token auth; clients need read access only)"},          \
	{                                                                                          \
		"cluster-password-file", 0, OPT_STR, &(e)->password_file, 0, 0, "FILE",            \
		    "the file whose first line is that user's password"                            \
	}

#endif
