/* SPDX-License-Identifier: BSD-2-Clause */
/* Built without libsystemd: there is no service manager to tell. */
#include "notify.h"

void svc_notify(const char *state)
{
}
