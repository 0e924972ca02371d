/* SPDX-License-Identifier: Apache-2.0 */
/* `warren`: dispatch to a verb. */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/log.h"

struct verb {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
};

static const struct verb verbs[] = {
    {"run", cmd_run, "run a command in a throwaway sandbox (no daemon)"},
    {"create", cmd_create, "start a sandbox on warrend and print its id"},
    {"ls", cmd_ls, "list sandboxes"},
    {"info", cmd_info, "show a sandbox"},
    {"rm", cmd_rm, "kill and delete sandboxes"},
    {"timeout", cmd_timeout, "set a sandbox's deadline"},
    {"pause", cmd_pause, "pause a sandbox in memory, or to disk (its clock stops)"},
    {"resume", cmd_resume, "resume a paused sandbox"},
    {"exec", cmd_exec, "run a command in a sandbox"},
    {"services", cmd_services, "list the services of a sandbox made from a Compose file"},
    {"logs", cmd_logs, "print the log of one of a sandbox's Compose services"},
    {"run-code", cmd_run_code, "run a cell in a sandbox's code interpreter (code-interpreter-v1)"},
    {"shell", cmd_shell, "an interactive shell in a sandbox"},
    {"cp", cmd_cp, "copy a file into or out of a sandbox"},
    {"ports", cmd_ports, "list the TCP ports listening in a sandbox"},
    {"port-forward", cmd_port_forward, "relay a local port (or stdin/stdout) to a sandbox's port"},
    {"ssh", cmd_ssh, "ssh into a sandbox (sshd started on demand, key made and installed)"},
    {"snapshot", cmd_snapshot, "capture a sandbox's files; list and delete snapshots"},
    {"fork", cmd_fork, "copy a running sandbox into N new ones"},
    {"net-log", cmd_net_log, "show a sandbox's egress log (connections, DNS, denials)"},
    {"audit", cmd_audit, "show the team's audit trail (who changed what, from where)"},
    {"webhook", cmd_webhook, "the team's webhooks: add, list, rm, deliveries, redeliver"},
    {"diff", cmd_diff, "show what a sandbox changed in its files, or one file's diff"},
    {"template", cmd_template, "build, list, show, delete, import and pull templates"},
    {"volume", cmd_volume, "create, list, show and delete named volumes"},
    {"devices", cmd_devices, "list the host's devices (CDI) and whether each is in use"},
    {"network", cmd_network, "show or replace a sandbox's egress policy"},
    {"config", cmd_config, "set or show the endpoint and API key"},
    {"login", cmd_login, "check and save the endpoint and API key"},
    {"mcp", cmd_mcp, "serve MCP on stdin/stdout (for agents), forwarding to warrend's /mcp"},
    {"usage", cmd_usage, "show the team's usage: per sandbox, template or day, and storage"},
    {"limits", cmd_limits, "show a team's rate limits and quotas; set them (admin keys)"},
    {"budget", cmd_budget, "show or set a team's or a sandbox's budget (spend cap)"},
};

void cli_errorf(const char *fmt, ...)
{
    va_list ap;

    fputs("warren: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: warren <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
        fprintf(f, "  %-12s %s\n", verbs[i].name, verbs[i].help);
    fprintf(f, "\nRun `warren <command> --help` for a command's options.\n");
}

int main(int argc, char **argv)
{
    wr_log_set_level(getenv("WARREN_LOG"));
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
        if (strcmp(argv[1], verbs[i].name) == 0)
            return verbs[i].fn(argc - 1, argv + 1);
    cli_errorf("unknown command `%s` (see `warren --help`)", argv[1]);
    return 2;
}
