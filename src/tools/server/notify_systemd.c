/* SPDX-License-Identifier: BSD-2-Clause */
#include "notify.h"

#include <systemd/sd-daemon.h>

void svc_notify(const char *state)
{
	sd_notify(0, state); /* a no-op outside systemd (no $NOTIFY_SOCKET) */
}
