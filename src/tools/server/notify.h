/* SPDX-License-Identifier: BSD-2-Clause */
/* Tell the service manager how qpgate-server is doing (sd_notify(3) when
 * built with libsystemd; otherwise nothing). STATE is e.g. "READY=1". */
#ifndef QPG_NOTIFY_H
#define QPG_NOTIFY_H

void svc_notify(const char *state);

#endif
