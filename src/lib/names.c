/* SPDX-License-Identifier: BSD-2-Clause */
#include <errno.h>
#include <string.h>

#include "common.h"
#include "qpgate/qpgate.h"

static const char *const phase_names[QPG_PHASE_COUNT] = {
    [QPG_PHASE_TCP_CONNECT] = "tcp_connect", [QPG_PHASE_TLS_HANDSHAKE] = "tls_handshake",
    [QPG_PHASE_PSN_GEN] = "psn_gen",	     [QPG_PHASE_QP_CREATE] = "qp_create",
    [QPG_PHASE_QP_INIT] = "qp_init",	     [QPG_PHASE_EXCHANGE] = "exchange",
    [QPG_PHASE_QP_RTR] = "qp_rtr",	     [QPG_PHASE_QP_RTS] = "qp_rts",
    [QPG_PHASE_FIRST_MSG] = "first_msg",
};

const char *qpg_phase_name(enum qpg_phase p)
{
	return (unsigned)p < QPG_PHASE_COUNT ? phase_names[p] : "?";
}

static const struct {
	const char *name;
	const char *hint;
} err_classes[QPG_ERR_COUNT] = {
    [QPG_ERR_NONE] = {"none", ""},
    [QPG_ERR_REFUSED] = {"connection_refused",
			 "is qpgate-server running on that host and port (-p)?"},
    [QPG_ERR_TLS] = {"tls", "check that both sides speak TLS 1.3 and the certificates load"},
    [QPG_ERR_CERT] = {"certificate", "pass the CA that signed the server's certificate with --ca"},
    [QPG_ERR_HOSTNAME] = {"hostname_mismatch",
			  "SERVERNAME must match a name in the server certificate"},
    [QPG_ERR_REJECTED] = {"rejected", "see the server's reason above"},
    [QPG_ERR_SERVER_FULL] = {"server_full", "retry later, or raise the server's --max-clients"},
    [QPG_ERR_VERSION] = {"version_mismatch", "use client and server from the same release"},
    [QPG_ERR_TIMEOUT] = {"timeout",
			 "the server did not answer in time; check it is alive and not overloaded"},
    [QPG_ERR_PROTOCOL] = {"protocol", "the peer sent a malformed message"},
    [QPG_ERR_AUTH] = {"authentication", "a message failed its tag (tcp: its TLS record) or sequence check"},
    [QPG_ERR_QP] = {"qp_error", "the RDMA queue pair failed; check the device and the path"},
    [QPG_ERR_PEER_CLOSED] = {"peer_closed", "the peer closed the connection"},
    [QPG_ERR_LOCAL] = {"local_resource",
		       "a local resource ran out or failed: see the reason above (no RDMA "
		       "device? try scripts/rxe-vm or --transport tcp)"},
};

const char *qpg_err_class_name(enum qpg_err_class e)
{
	return (unsigned)e < QPG_ERR_COUNT ? err_classes[e].name : "?";
}

const char *qpg_err_class_hint(enum qpg_err_class e)
{
	return (unsigned)e < QPG_ERR_COUNT ? err_classes[e].hint : "";
}

int qpg_transport_parse(const char *s)
{
	if (strcmp(s, "rdma") == 0)
		return QPG_KIND_RDMA;
	if (strcmp(s, "tcp") == 0)
		return QPG_KIND_TCP;
	return -EINVAL;
}

const char *qpg_strerror(int err)
{
	if (err == 0)
		return "success";
	if (err == -QPG_EMAPCOUNT || err == QPG_EMAPCOUNT)
		return "Cannot allocate memory: the process is at vm.max_map_count memory mappings "
		       "(each QP maps its queues): raise it, e.g. sysctl -w vm.max_map_count=1048576";
	const char *d = strerrordesc_np(err < 0 ? -err : err);
	return d ? d : "unknown error";
}

const char *qpg_version(void)
{
	return QPG_VERSION;
}
