/* SPDX-License-Identifier: BSD-2-Clause */
/* qpgate-kv's command words, parsed: put, get, del, exists (its keys run to
 * the next command word), and with --synthetic the tests' generated values
 * and bad. */
#include <string.h>

#include "cli.h"
#include "kv_cmd.h"
#include "qpgate/kv.h"

int kv_cmds_parse(int argc, char **argv, bool synthetic, struct cmd *out)
{
	int n = 0;
	for (int i = 0; i < argc;) {
		struct cmd c = {0};
		const char *w = argv[i++];
		if (!synthetic && i < argc && !strcmp(w, "put")) {
			c.op = CMD_PUT;
			c.key = argv[i++];
			if (i >= argc || strlen(c.key) == 0 || strlen(c.key) > QPG_KV_MAX_KEY)
				return -1;
			c.file = argv[i++];
		} else if (!synthetic && i < argc && !strcmp(w, "get")) {
			c.op = CMD_GET;
			c.key = argv[i++];
			if (strlen(c.key) == 0 || strlen(c.key) > QPG_KV_MAX_KEY)
				return -1;
			if (i + 1 < argc && !strcmp(argv[i], "-o")) {
				c.file = argv[i + 1];
				i += 2;
			}
		} else if (i < argc && !strcmp(w, "exists")) {
			/* KEY...: up to the next command word; each key 1..250
			 * bytes, 256 at most */
			static const char *const words[] = {"put", "get", "del", "exists", "bad"};
			c.op = CMD_EXISTS;
			c.keys = &argv[i];
			c.key = argv[i];
			for (; i < argc; i++) {
				bool word = false;
				for (size_t j = 0; j < sizeof(words) / sizeof(words[0]); j++)
					word |= !strcmp(argv[i], words[j]);
				if (word)
					break;
				size_t len = strlen(argv[i]);
				if (len == 0 || len > QPG_KV_MAX_KEY ||
				    ++c.nkeys > QPG_KV_EXISTS_MAX)
					return -1;
			}
			if (c.nkeys == 0)
				return -1;
		} else if (!synthetic && !strcmp(w, "bad")) {
			return -1;
		} else if (!strcmp(w, "bad")) {
			c.op = CMD_BAD;
			c.key = "k";
		} else if (i < argc &&
			   (!strcmp(w, "put") || !strcmp(w, "get") || !strcmp(w, "del"))) {
			c.op = w[0] == 'p' ? CMD_PUT : w[0] == 'g' ? CMD_GET : CMD_DEL;
			c.key = argv[i++];
			if (strlen(c.key) == 0 || strlen(c.key) > QPG_KV_MAX_KEY)
				return -1;
			bool sized = c.op == CMD_PUT || (c.op == CMD_GET && i + 1 < argc &&
							 argv[i][0] >= '0' && argv[i][0] <= '9');
			if (sized) {
				if (i + 1 >= argc)
					return -1;
				c.size =
				    (uint32_t)qpg_cli_size(argv[i++], 0, QPG_KV_MAX_VALUE, "SIZE");
				c.seed = (uint32_t)qpg_cli_int(argv[i++], 0, UINT32_MAX, "SEED");
				c.verify = c.op == CMD_GET;
			}
		} else {
			return -1;
		}
		out[n++] = c;
	}
	return n;
}
