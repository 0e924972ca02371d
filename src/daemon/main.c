/* SPDX-License-Identifier: Apache-2.0 */
/* warrend: the sandbox daemon. Opens the state (SQLite), the runtime and the sandbox manager
 * (which takes back sandboxes that outlived a previous daemon), then serves the API on a unix
 * socket and a TCP address from one libuv loop. On SIGTERM or SIGINT it stops serving and exits;
 * the sandboxes go on running and the next warrend adopts them. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../api/api.h"
#include "../core/audit.h"
#include "../core/images.h"
#include "../core/manager.h"
#include "../core/netlog.h"
#include "../core/pool.h"
#include "../core/space.h"
#include "../core/webhooks.h"
#include "../gateway/gateway.h"
#include "../runtime/exits.h"
#include "../runtime/runtime.h"
#include "../store/store.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "../util/metrics.h"
#include "../util/parse.h"
#include "../util/xalloc.h"
#include "nofile.h"

#define WARREN_VERSION "0.1.0"

enum role { ROLE_ALL, ROLE_NODE, ROLE_GATEWAY };

struct options {
    /* The role (docs/deploy.md): a whole single host, a node behind gateways, or a gateway. */
    enum role role;
    const char *node_id;         /* --node-id (NULL: the host name) */
    const char *node_token_file; /* --node-token-file: the secret gateways present */
    const char *node_labels;     /* --node-labels k=v,...: a JSON object's text, made here */
    const char *object_store;    /* --object-store URL */
    const char *database;        /* --database DSN (gateway) */
    const char *discovery;       /* --discovery SPEC (gateway) */
    const char *admin_key_file;  /* --admin-key-file (gateway) */
    uint32_t health_interval_ms, node_dead_after_ms;
    const char *state_dir;
    const char *run_dir;
    const char *socket_path;
    const char *listen;
    const char *init_path;
    const char *console_dir; /* --console-dir (NULL: console/ next to warrend) */
    const char *cgroup_mode;
    uint32_t max_sandboxes;
    uint32_t pids_max;
    const char *cdi_spec_dirs; /* --cdi-spec-dirs */
    uint32_t agent_idle_ms;    /* --agent-idle MS (0: the default) */
    bool exits_pidfd;          /* --exits pidfd: a pidfd per sandbox, not the process events */
    uint32_t agent_crowd;      /* from the fd limit (size_fds) */
    uint64_t max_memory;
    double memory_overcommit; /* --memory-overcommit RATIO (0: the default) */
    uint64_t memory_reserve;  /* --memory-reserve SIZE (0: the default) */
    uint32_t default_timeout, max_timeout;
    uint32_t pool;
    uint32_t warm;
    struct wr_warm_pool_cfg warm_pools[WR_WARM_POOLS_MAX]; /* --warm NAME=N */
    size_t n_warm_pools;
    uint64_t disk_reserve;
    /* The HTTP server's (0: its default, or computed from RLIMIT_NOFILE for max_conns). */
    uint32_t header_timeout, body_timeout, keepalive_timeout; /* seconds */
    uint32_t max_conns, max_conns_per_client, max_unauthenticated, max_body_conns;
    /* Networking (docs/networking.md). */
    bool net_off;
    struct wr_cidr4 net_pool;
    bool net_default;
    struct wr_cidr4 net_deny[64];
    size_t n_net_deny;
    const char *dns_upstreams[8];
    size_t n_dns_upstreams;
    const char *domain;
    const char *net_table;
    uint32_t net_max_conns, net_ready;
    uint32_t port_conn_limit;    /* exposed ports: connections to one sandbox (0: 1000) */
    const char *mcp_origins[16]; /* --mcp-origin: Origin values /mcp accepts */
    size_t n_mcp_origins;
    /* Observability (docs/operations.md). */
    const char *metrics_listen;    /* --metrics-listen HOST:PORT, or NULL: no metrics listener */
    uint32_t audit_retention_days; /* --audit-retention-days */
    bool audit_on;                 /* --audit on|off */
    /* Limits (docs/operations.md "Limits"): the region named on every response, each team's
     * buckets and quotas, the create's size presets. */
    const char *region;
    bool limits_on; /* --limits on|off */
    struct wr_api_limits_cfg limits;
    struct wr_api_size sizes[WR_API_SIZES_MAX];
    size_t n_sizes;
    /* The usage ledger (docs/usage.md). */
    const char *billed_seconds; /* --billed-seconds allocated|measured|max */
    bool metering_on;           /* --metering on|off */
    uint32_t usage_interval_ms; /* --usage-interval-ms (test builds) */
    uint32_t storage_period_ms; /* --usage-storage-ms (test builds) */
    /* Budgets (docs/usage.md, "Budgets"). */
    double price_vcpu_second, price_gib_second; /* --price-vcpu-second, --price-gib-second */
    const char *currency;                       /* --currency */
    /* Webhooks (docs/operations.md "Webhooks"). */
    const char *webhook_allow[WR_WEBHOOK_ALLOW_MAX]; /* --webhook-allow CIDR|HOST */
    size_t n_webhook_allow;
    uint32_t webhook_attempts, webhook_backoff_ms, webhook_timeout_s;
    unsigned runtimes;             /* --runtimes: bits 1u << b of the backends allowed */
    enum wr_backend runtime_first; /* and the first it names: the default */
};

static void usage(FILE *f)
{
    fprintf(
        f, "usage: warrend [options]\n\n"
           "  --state-dir DIR        state: database, templates, admin key (/var/lib/warren)\n"
           "  --run-dir DIR          runtime state of sandboxes (/run/warren)\n"
           "  --socket PATH          unix socket of the API (/run/warrend/warrend.sock)\n"
           "  --listen HOST:PORT     TCP address of the API (127.0.0.1:7860; '' for none)\n"
           "  --max-sandboxes N      sandboxes at most (32752, the id pool's ranges)\n"
           "  --pids-max N           each sandbox's tasks at most (4096; on gvisor, gVisor's\n"
           "                         host threads count: about 11 per process inside)\n"
           "  --cdi-spec-dirs DIRS   where the CDI specs of the host's devices are, colon-\n"
           "                         separated, the later winning (/etc/cdi:/var/run/cdi;\n"
           "                         '' for none; docs/devices.md)\n"
           "  --agent-idle MS        close the connection to a sandbox idle this long; the\n"
           "                         next request opens it again (10000)\n"
           "  --exits connector|pidfd  how the end of a sandbox is seen: the kernel's process\n"
           "                         events (no fd per sandbox; the default) or a pidfd each\n"
           "  --max-memory SIZE      memory limits of sandboxes in memory, summed, at most (the\n"
           "                         host's RAM x --memory-overcommit)\n"
           "  --memory-overcommit RATIO  a limit is a cap, not a reservation: the default of\n"
           "                         --max-memory is RAM x RATIO (100)\n"
           "  --memory-reserve SIZE  no sandbox starts while the host's available memory is\n"
           "                         below this (5%% of RAM, 256M to 4G)\n"
           "  --default-timeout SECS a sandbox's timeout when none is asked (300)\n"
           "  --max-timeout SECS     the longest timeout (86400)\n"
           "  --cgroup v1|v2|auto    cgroup interface (auto)\n"
           "  --pool N               sandbox children kept cloned ahead of creates (4; 0: none);\n"
           "                         with --net-default on, as many again in network slots\n"
           "  --warm N               sandboxes of the base template kept started ahead of creates\n"
           "                         (2; 0: none)\n"
           "  --warm NAME=N          the same for template NAME (repeatable; its start command\n"
           "                         run and ready before one is taken)\n"
           "  --disk-reserve SIZE    space on the state filesystem kept for the daemon: no new\n"
           "                         sandbox, snapshot, build or import below it (1G, or 5%%\n"
           "                         of the filesystem if less)\n"
           "  --init PATH            warren-init (next to warrend)\n"
           "  --console-dir DIR      the web console's files, served under /console/\n"
           "                         (console/ next to warrend; docs/console.md)\n"
           "  --runtimes LIST        the isolation backends a create may ask for, of ns and\n"
           "                         gvisor, the first the default of one that names none\n"
           "                         (ns,gvisor; gvisor needs runsc: without it such a create\n"
           "                         answers 501)\n"
           "\nRoles (docs/deploy.md):\n"
           "  --role all|node|gateway  a single host (all), a node behind gateways, or a\n"
           "                         gateway in front of nodes (all)\n"
           "  --node-token-file FILE the secret gateways present to nodes (node, gateway)\n"
           "  --node-id ID           this node's id (the host name)\n"
           "  --node-labels K=V,...  this node's labels, said in /node/info\n"
           "  --object-store URL     file:///DIR or s3://BUCKET[/PREFIX]?endpoint=URL[&region=R]:\n"
           "                         where sandboxes paused to disk are exported (node, gateway)\n"
           "  --database DSN         the gateway's PostgreSQL (libpq; or WARREN_DATABASE_URL)\n"
           "  --discovery SPEC       where the nodes are: static:ID@HOST:PORT,... or\n"
           "                         kubernetes:NAMESPACE/SELECTOR[@PORT] (gateway)\n"
           "  --admin-key-file FILE  the first admin key: read, or made and written (gateway)\n"
           "  --health-interval-ms N how often a gateway asks each node (2000)\n"
           "  --node-dead-after-ms N a node silent this long has its sandboxes lost (10000)\n"
           "\nNetworking (docs/networking.md):\n"
           "  --net-pool CIDR|none   sandbox addresses, two per slot (10.200.0.0/15); none:\n"
           "                         every sandbox has loopback only\n"
           "  --net-default on|off   internet for a create that does not say (on)\n"
           "  --net-deny CIDR[,...]  never reachable from a sandbox, besides private,\n"
           "                         link-local, CGNAT and the host's own (repeatable)\n"
           "  --dns-upstream ADDR[:PORT]  where the sandboxes' DNS goes (repeatable; the\n"
           "                         host's /etc/resolv.conf)\n"
           "  --domain NAME          ports are served as <port>-<id>.NAME (none)\n"
           "  --net-table NAME       nftables table and slot directory (warren)\n"
           "  --net-max-connections N  concurrent egress connections per sandbox (2500)\n"
           "  --net-ready N          network slots kept made ahead of creates (16)\n"
           "  --log-level LEVEL      debug, info, warn, error (info)\n\n"
           "TCP connections (docs/operations.md):\n"
           "  --header-timeout SECS  to send a request line and headers (20)\n"
           "  --body-timeout SECS    a request body that sends nothing this long: 408 (30)\n"
           "  --keepalive-timeout SECS  an idle connection is closed (60)\n"
           "  --max-connections N    at most (what RLIMIT_NOFILE holds beside the sandboxes)\n"
           "  --max-connections-per-client N  from one address or IPv6 /64 (1024; 0: no cap)\n"
           "  --max-unauthenticated N  still sending their request head; the oldest is closed\n"
           "                         (half of --max-connections, at most 4096)\n"
           "  --max-body-connections N  with a request body arriving; beyond: 503\n"
           "                         (half of --max-connections)\n"
           "  --port-conn-limit N    connections to the exposed ports of one sandbox; beyond:\n"
           "                         429 (1000)\n"
           "\nLimits (docs/operations.md):\n"
           "  --region NAME          named in Warren-Region on every response (local)\n"
           "  --limits on|off        check the teams' buckets and quotas below (on; off: none\n"
           "                         is checked, whatever they say, and no RateLimit header)\n"
           "  --team-rate-requests RATE/s:BURST  each team's API requests (100/s:200; off)\n"
           "  --team-rate-creates RATE/s:BURST   each team's creates, a fork of N costs N\n"
           "                         (5/s:20; off)\n"
           "  --team-rate-bytes SIZE/s:SIZE      each team's file bytes up and down\n"
           "                         (64M/s:1G; off)\n"
           "  --team-max-sandboxes N each team's concurrent sandboxes (100; 0: no quota)\n"
           "  --team-max-memory SIZE each team's memory committed to sandboxes (0: no quota)\n"
           "  --size NAME=CPUS:MEMORY  a size preset of creates (repeatable; small=1:512M,\n"
           "                         medium=2:2G, large=4:8G)\n"
           "\nMCP server (docs/mcp.md):\n"
           "  --mcp-origin ORIGIN    an Origin /mcp accepts, e.g. http://localhost:3000\n"
           "                         (repeatable; requests without one are accepted)\n"
           "\nObservability (docs/operations.md):\n"
           "  --metrics-listen HOST:PORT  serve GET /metrics (Prometheus text, no auth) there\n"
           "                         (off; e.g. 127.0.0.1:9464)\n"
           "  --log-format text|json one line per event, key=value or a JSON object (text)\n"
           "  --audit-retention-days N  audit records are kept this long (90)\n"
           "  --audit on|off         keep the audit trail (on; off: GET /v1/audit answers 501)\n"
           "\nWebhooks (docs/operations.md):\n"
           "  --webhook-allow CIDR|HOST  an address range or host name webhook URLs may\n"
           "                         reach besides the public internet (repeatable; loopback,\n"
           "                         private and link-local addresses are refused otherwise)\n"
           "  --webhook-attempts N   attempts per delivery before it is dead (6)\n"
           "  --webhook-backoff-ms MS  wait before the second attempt, doubling (10000)\n"
           "  --webhook-timeout S    seconds an attempt may take (10)\n"
           "\nUsage ledger (docs/usage.md):\n"
           "  --metering on|off      keep the usage ledger (on; off: GET /v1/usage answers 501)\n"
           "  --billed-seconds allocated|measured|max  what GET /v1/usage bills as a\n"
           "                         vCPU-second (allocated)\n"
           "  --price-vcpu-second P  the price of a billed vCPU-second, for budgets in money (0)\n"
           "  --price-gib-second P   the price of a GiB-second of allocated memory (0)\n"
           "  --currency NAME        the prices' currency, as budgets show it (USD)\n"
#ifdef WR_TESTING
           "  --usage-interval-ms MS running intervals close this often (test builds; 60000)\n"
           "  --usage-storage-ms MS  the storage sample's period (test builds; an hour)\n"
#endif
    );
}

/* The path of `name` in the directory of the running warrend (where `make` builds it and the
 * console's files next to it). */
static char *next_to_self(const char *name)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    char *slash;

    if (n <= 0)
        return xasprintf("/usr/local/bin/%s", name);
    self[n] = '\0';
    slash = strrchr(self, '/');
    if (slash != NULL)
        *slash = '\0';
    return xasprintf("%s/%s", self, name);
}

/* An option's on|off into *out. */
static int opt_onoff(const char *arg, bool *out, struct wr_err *err)
{
    if (strcmp(arg, "on") != 0 && strcmp(arg, "off") != 0)
        return wr_err_set(err, WR_EINVAL, 0, "must be on or off");
    *out = strcmp(arg, "on") == 0;
    return 0;
}

/* An option's number, min..max, into *out. */
static int opt_uint(const char *arg, uint64_t min, uint64_t max, uint32_t *out, struct wr_err *err)
{
    uint64_t v;

    if (wr_parse_uint(arg, max, &v, err) < 0)
        return -1;
    if (v < min)
        return wr_err_set(err, WR_EINVAL, 0, "must be at least %llu", (unsigned long long)min);
    *out = (uint32_t)v;
    return 0;
}

/* --runtimes ns,gvisor: the backends allowed, as bits 1u << b, and the first named, the
 * default of a create that names none. */
static int parse_runtimes(const char *arg, unsigned *out, enum wr_backend *first,
                          struct wr_err *err)
{
    _cleanup_free_ char *copy = xstrdup(arg);
    char *save = NULL;
    enum wr_backend b;

    *out = 0;
    for (char *p = strtok_r(copy, ",", &save); p != NULL; p = strtok_r(NULL, ",", &save)) {
        if (wr_backend_parse(p, &b, err) < 0)
            return -1;
        if (*out == 0)
            *first = b;
        *out |= 1u << b;
    }
    if (*out == 0)
        return wr_err_set(err, WR_EINVAL, 0, "names no runtime (ns, gvisor)");
    return 0;
}

/* --warm NAME=N: a pool for template NAME (a later one for the same name replaces it). */
static int parse_warm_pool(char *arg, struct options *o, struct wr_err *err)
{
    char *eq = strchr(arg, '=');
    struct wr_warm_pool_cfg *p = NULL;
    uint32_t n;

    *eq = '\0';
    if (!wr_images_name_valid(arg))
        return wr_err_set(err, WR_EINVAL, 0, "`%s` is not a template name", arg);
    if (opt_uint(eq + 1, 0, 64, &n, err) < 0)
        return -1;
    for (size_t i = 0; i < o->n_warm_pools; i++)
        if (strcmp(o->warm_pools[i].template_name, arg) == 0)
            p = &o->warm_pools[i];
    if (p == NULL) {
        if (o->n_warm_pools >= WR_WARM_POOLS_MAX)
            return wr_err_set(err, WR_EINVAL, 0, "at most %d templates have warm pools",
                              WR_WARM_POOLS_MAX);
        p = &o->warm_pools[o->n_warm_pools++];
    }
    p->template_name = arg;
    p->target = n;
    return 0;
}

/* A node's id: 1..63 of [A-Za-z0-9._-] (as discovery's, gateway/discover.h). */
static bool node_id_valid(const char *id)
{
    size_t n = strlen(id);

    return n > 0 && n < 64 &&
           strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                      "0123456789._-") == n;
}

/* --node-labels k=v[,k=v...] into a JSON object's text (*out, kept for the process). */
static int parse_labels(const char *s, const char **out, struct wr_err *err)
{
    _cleanup_free_ char *copy = xstrdup(s);
    json_t *o = json_object();
    char *save = NULL;

    for (char *kv = strtok_r(copy, ",", &save); kv != NULL; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (eq != NULL)
            *eq = '\0';
        json_t *v = eq != NULL && eq[1] != '\0' && node_id_valid(kv) ? json_string(eq + 1) : NULL;
        if (v == NULL) {
            json_decref(o);
            return wr_err_set(err, WR_EINVAL, 0, "`%s` is not a label (KEY=VALUE)", kv);
        }
        json_object_set_new(o, kv, v);
    }
    *out = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return 0;
}

static int parse_options(int argc, char **argv, struct options *o)
{
    enum {
        O_STATE = 256,
        O_RUN,
        O_SOCKET,
        O_LISTEN,
        O_MAXSB,
        O_PIDSMAX,
        O_CDIDIRS,
        O_AGENTIDLE,
        O_EXITS,
        O_MAXMEM,
        O_DEFTO,
        O_MAXTO,
        O_CGROUP,
        O_INIT,
        O_LOG,
        O_POOL,
        O_WARM,
        O_RESERVE,
        O_HEADTO,
        O_BODYTO,
        O_KEEPTO,
        O_MAXCONN,
        O_MAXPEER,
        O_MAXUNAUTH,
        O_MAXBODY,
        O_NETPOOL,
        O_NETDEFAULT,
        O_NETDENY,
        O_DNSUP,
        O_DOMAIN,
        O_NETTABLE,
        O_NETMAXCONN,
        O_NETREADY,
        O_PORTCONN,
        O_MCPORIGIN,
        O_METRICS,
        O_LOGFMT,
        O_AUDITDAYS,
        O_REGION,
        O_RATEREQ,
        O_RATECREATE,
        O_RATEBYTES,
        O_TEAMMAXSB,
        O_TEAMMAXMEM,
        O_SIZE,
        O_TESTCLOCK,
        O_BILLED,
        O_USAGEMS,
        O_STORAGEMS,
        O_PRICEVCPU,
        O_PRICEGIB,
        O_CURRENCY,
        O_LIMITS,
        O_OVERCOMMIT,
        O_MEMRESERVE,
        O_AUDIT,
        O_METERING,
        O_WHALLOW,
        O_WHATTEMPTS,
        O_WHBACKOFF,
        O_WHTIMEOUT,
        O_RUNTIMES,
        O_CONSOLEDIR,
        O_ROLE,
        O_NODEID,
        O_NODETOKEN,
        O_NODELABELS,
        O_OBJSTORE,
        O_DATABASE,
        O_DISCOVERY,
        O_ADMINKEYFILE,
        O_HEALTHMS,
        O_DEADMS,
    };
    static const struct option longopts[] = {
        {"state-dir", required_argument, NULL, O_STATE},
        {"run-dir", required_argument, NULL, O_RUN},
        {"socket", required_argument, NULL, O_SOCKET},
        {"listen", required_argument, NULL, O_LISTEN},
        {"max-sandboxes", required_argument, NULL, O_MAXSB},
        {"pids-max", required_argument, NULL, O_PIDSMAX},
        {"cdi-spec-dirs", required_argument, NULL, O_CDIDIRS},
        {"agent-idle", required_argument, NULL, O_AGENTIDLE},
        {"exits", required_argument, NULL, O_EXITS},
        {"max-memory", required_argument, NULL, O_MAXMEM},
        {"default-timeout", required_argument, NULL, O_DEFTO},
        {"max-timeout", required_argument, NULL, O_MAXTO},
        {"cgroup", required_argument, NULL, O_CGROUP},
        {"init", required_argument, NULL, O_INIT},
        {"log-level", required_argument, NULL, O_LOG},
        {"pool", required_argument, NULL, O_POOL},
        {"warm", required_argument, NULL, O_WARM},
        {"disk-reserve", required_argument, NULL, O_RESERVE},
        {"header-timeout", required_argument, NULL, O_HEADTO},
        {"body-timeout", required_argument, NULL, O_BODYTO},
        {"keepalive-timeout", required_argument, NULL, O_KEEPTO},
        {"max-connections", required_argument, NULL, O_MAXCONN},
        {"max-connections-per-client", required_argument, NULL, O_MAXPEER},
        {"max-unauthenticated", required_argument, NULL, O_MAXUNAUTH},
        {"max-body-connections", required_argument, NULL, O_MAXBODY},
        {"net-pool", required_argument, NULL, O_NETPOOL},
        {"net-default", required_argument, NULL, O_NETDEFAULT},
        {"net-deny", required_argument, NULL, O_NETDENY},
        {"dns-upstream", required_argument, NULL, O_DNSUP},
        {"domain", required_argument, NULL, O_DOMAIN},
        {"net-table", required_argument, NULL, O_NETTABLE},
        {"net-max-connections", required_argument, NULL, O_NETMAXCONN},
        {"net-ready", required_argument, NULL, O_NETREADY},
        {"port-conn-limit", required_argument, NULL, O_PORTCONN},
        {"mcp-origin", required_argument, NULL, O_MCPORIGIN},
        {"metrics-listen", required_argument, NULL, O_METRICS},
        {"log-format", required_argument, NULL, O_LOGFMT},
        {"audit-retention-days", required_argument, NULL, O_AUDITDAYS},
        {"region", required_argument, NULL, O_REGION},
        {"team-rate-requests", required_argument, NULL, O_RATEREQ},
        {"team-rate-creates", required_argument, NULL, O_RATECREATE},
        {"team-rate-bytes", required_argument, NULL, O_RATEBYTES},
        {"team-max-sandboxes", required_argument, NULL, O_TEAMMAXSB},
        {"team-max-memory", required_argument, NULL, O_TEAMMAXMEM},
        {"size", required_argument, NULL, O_SIZE},
        {"billed-seconds", required_argument, NULL, O_BILLED},
        {"price-vcpu-second", required_argument, NULL, O_PRICEVCPU},
        {"price-gib-second", required_argument, NULL, O_PRICEGIB},
        {"currency", required_argument, NULL, O_CURRENCY},
        {"limits", required_argument, NULL, O_LIMITS},
        {"memory-overcommit", required_argument, NULL, O_OVERCOMMIT},
        {"memory-reserve", required_argument, NULL, O_MEMRESERVE},
        {"audit", required_argument, NULL, O_AUDIT},
        {"metering", required_argument, NULL, O_METERING},
        {"webhook-allow", required_argument, NULL, O_WHALLOW},
        {"webhook-attempts", required_argument, NULL, O_WHATTEMPTS},
        {"webhook-backoff-ms", required_argument, NULL, O_WHBACKOFF},
        {"webhook-timeout", required_argument, NULL, O_WHTIMEOUT},
        {"runtimes", required_argument, NULL, O_RUNTIMES},
        {"console-dir", required_argument, NULL, O_CONSOLEDIR},
        {"role", required_argument, NULL, O_ROLE},
        {"node-id", required_argument, NULL, O_NODEID},
        {"node-token-file", required_argument, NULL, O_NODETOKEN},
        {"node-labels", required_argument, NULL, O_NODELABELS},
        {"object-store", required_argument, NULL, O_OBJSTORE},
        {"database", required_argument, NULL, O_DATABASE},
        {"discovery", required_argument, NULL, O_DISCOVERY},
        {"admin-key-file", required_argument, NULL, O_ADMINKEYFILE},
        {"health-interval-ms", required_argument, NULL, O_HEALTHMS},
        {"node-dead-after-ms", required_argument, NULL, O_DEADMS},
#ifdef WR_TESTING
        {"test-clock", required_argument, NULL, O_TESTCLOCK},
        {"usage-interval-ms", required_argument, NULL, O_USAGEMS},
        {"usage-storage-ms", required_argument, NULL, O_STORAGEMS},
#endif
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct wr_err err;
    int c;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case O_STATE:
            o->state_dir = optarg;
            break;
        case O_RUN:
            o->run_dir = optarg;
            break;
        case O_SOCKET:
            o->socket_path = optarg;
            break;
        case O_LISTEN:
            o->listen = optarg;
            break;
        case O_MAXSB:
            if (opt_uint(optarg, 1, 1000000, &o->max_sandboxes, &err) < 0)
                goto bad;
            break;
        case O_PIDSMAX:
            if (opt_uint(optarg, 64, 4194304, &o->pids_max, &err) < 0)
                goto bad;
            break;
        case O_CDIDIRS:
            o->cdi_spec_dirs = optarg;
            break;
        case O_AGENTIDLE:
            if (opt_uint(optarg, 1, 86400000, &o->agent_idle_ms, &err) < 0)
                goto bad;
            break;
        case O_EXITS:
            if (strcmp(optarg, "connector") != 0 && strcmp(optarg, "pidfd") != 0) {
                wr_err_set(&err, WR_EINVAL, 0, "--exits: `%s` is not connector or pidfd", optarg);
                goto bad;
            }
            o->exits_pidfd = strcmp(optarg, "pidfd") == 0;
            break;
        case O_MAXMEM:
            if (wr_parse_size(optarg, &o->max_memory, &err) < 0)
                goto bad;
            break;
        case O_DEFTO:
            if (opt_uint(optarg, 1, 86400 * 365, &o->default_timeout, &err) < 0)
                goto bad;
            break;
        case O_MAXTO:
            if (opt_uint(optarg, 1, 86400 * 365, &o->max_timeout, &err) < 0)
                goto bad;
            break;
        case O_CGROUP:
            o->cgroup_mode = optarg;
            break;
        case O_INIT:
            o->init_path = optarg;
            break;
        case O_LOG:
            wr_log_set_level(optarg);
            break;
        case O_POOL:
            if (opt_uint(optarg, 0, 64, &o->pool, &err) < 0)
                goto bad;
            break;
        case O_WARM:
            if (strchr(optarg, '=') != NULL) {
                if (parse_warm_pool(optarg, o, &err) < 0)
                    goto bad;
            } else if (opt_uint(optarg, 0, 64, &o->warm, &err) < 0) {
                goto bad;
            }
            break;
        case O_HEADTO:
            if (opt_uint(optarg, 1, 86400, &o->header_timeout, &err) < 0)
                goto bad;
            break;
        case O_BODYTO:
            if (opt_uint(optarg, 1, 86400, &o->body_timeout, &err) < 0)
                goto bad;
            break;
        case O_KEEPTO:
            if (opt_uint(optarg, 1, 86400, &o->keepalive_timeout, &err) < 0)
                goto bad;
            break;
        case O_PORTCONN:
            if (opt_uint(optarg, 1, UINT32_MAX - 1, &o->port_conn_limit, &err) < 0)
                goto bad;
            break;
        case O_MAXCONN:
            if (opt_uint(optarg, 1, UINT32_MAX - 1, &o->max_conns, &err) < 0)
                goto bad;
            break;
        case O_MAXPEER:
            if (opt_uint(optarg, 0, UINT32_MAX - 1, &o->max_conns_per_client, &err) < 0)
                goto bad;
            if (o->max_conns_per_client == 0)
                o->max_conns_per_client = WR_HTTP_UNLIMITED;
            break;
        case O_MAXUNAUTH:
            if (opt_uint(optarg, 1, UINT32_MAX - 1, &o->max_unauthenticated, &err) < 0)
                goto bad;
            break;
        case O_MAXBODY:
            if (opt_uint(optarg, 1, UINT32_MAX - 1, &o->max_body_conns, &err) < 0)
                goto bad;
            break;
        case O_RESERVE:
            if (wr_parse_size(optarg, &o->disk_reserve, &err) < 0)
                goto bad;
            break;
        case O_NETPOOL:
            o->net_off = strcmp(optarg, "none") == 0;
            if (!o->net_off && (wr_cidr4_parse(optarg, false, &o->net_pool, &err) < 0 ||
                                (o->net_pool.len > 30 &&
                                 wr_err_set(&err, WR_EINVAL, 0, "a pool needs /30 or more") < 0)))
                goto bad;
            break;
        case O_NETDEFAULT:
            if (opt_onoff(optarg, &o->net_default, &err) < 0)
                goto bad;
            break;
        case O_NETDENY: {
            _cleanup_free_ char *list = xstrdup(optarg);
            char *save = NULL;
            for (char *t = strtok_r(list, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
                if (o->n_net_deny == sizeof(o->net_deny) / sizeof(o->net_deny[0])) {
                    wr_err_set(&err, WR_EINVAL, 0, "at most 64 blocks");
                    goto bad;
                }
                if (wr_cidr4_parse(t, false, &o->net_deny[o->n_net_deny++], &err) < 0)
                    goto bad;
            }
            break;
        }
        case O_DNSUP:
            if (o->n_dns_upstreams == sizeof(o->dns_upstreams) / sizeof(o->dns_upstreams[0])) {
                wr_err_set(&err, WR_EINVAL, 0, "at most 8 upstreams");
                goto bad;
            }
            o->dns_upstreams[o->n_dns_upstreams++] = optarg;
            break;
        case O_DOMAIN:
            o->domain = optarg[0] ? optarg : NULL;
            break;
        case O_NETTABLE:
            if (optarg[0] == '\0' || strlen(optarg) > 32 ||
                strspn(optarg, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(optarg)) {
                wr_err_set(&err, WR_EINVAL, 0, "must be 1 to 32 of [a-z0-9_]");
                goto bad;
            }
            o->net_table = optarg;
            break;
        case O_NETMAXCONN:
            if (opt_uint(optarg, 1, 1000000, &o->net_max_conns, &err) < 0)
                goto bad;
            break;
        case O_NETREADY:
            if (opt_uint(optarg, 0, 4096, &o->net_ready, &err) < 0)
                goto bad;
            break;
        case O_MCPORIGIN:
            if (o->n_mcp_origins == sizeof(o->mcp_origins) / sizeof(o->mcp_origins[0])) {
                wr_err_set(&err, WR_EINVAL, 0, "at most 16 origins");
                goto bad;
            }
            o->mcp_origins[o->n_mcp_origins++] = optarg;
            break;
        case O_METRICS:
            o->metrics_listen = optarg[0] ? optarg : NULL;
            break;
        case O_LOGFMT:
            if (wr_log_set_format(optarg) < 0) {
                wr_err_set(&err, WR_EINVAL, 0, "must be text or json");
                goto bad;
            }
            break;
        case O_AUDITDAYS:
            if (opt_uint(optarg, 1, 36500, &o->audit_retention_days, &err) < 0)
                goto bad;
            break;
        case O_REGION:
            if (*optarg == '\0' || strlen(optarg) > 64 || strpbrk(optarg, " \t\r\n,;\"") != NULL) {
                wr_err_set(&err, WR_EINVAL, 0, "a region is 1 to 64 bytes, no spaces");
                goto bad;
            }
            o->region = optarg;
            break;
        case O_RATEREQ:
        case O_RATECREATE:
        case O_RATEBYTES: {
            enum wr_api_policy p = c == O_RATEREQ      ? WR_POL_REQUESTS
                                   : c == O_RATECREATE ? WR_POL_CREATES
                                                       : WR_POL_BYTES;
            if (wr_api_rate_parse(optarg, p == WR_POL_BYTES, &o->limits.rate[p], &err) < 0)
                goto bad;
            break;
        }
        case O_TEAMMAXSB:
            if (opt_uint(optarg, 0, 1000000, &o->limits.max_sandboxes, &err) < 0)
                goto bad;
            break;
        case O_TEAMMAXMEM:
            if (strcmp(optarg, "0") == 0)
                o->limits.max_memory_bytes = 0;
            else if (wr_parse_size(optarg, &o->limits.max_memory_bytes, &err) < 0)
                goto bad;
            break;
        case O_SIZE: {
            struct wr_api_size sz;
            size_t i;
            if (wr_api_size_parse(optarg, &sz, &err) < 0)
                goto bad;
            for (i = 0; i < o->n_sizes && strcmp(o->sizes[i].name, sz.name) != 0; i++)
                ;
            if (i == WR_API_SIZES_MAX) {
                wr_err_set(&err, WR_EINVAL, 0, "at most %d sizes", WR_API_SIZES_MAX);
                goto bad;
            }
            o->sizes[i] = sz;
            if (i == o->n_sizes)
                o->n_sizes++;
            break;
        }
#ifdef WR_TESTING
        case O_TESTCLOCK:
            o->limits.clock_path = optarg;
            break;
#endif
        case O_BILLED:
            if (strcmp(optarg, "allocated") != 0 && strcmp(optarg, "measured") != 0 &&
                strcmp(optarg, "max") != 0) {
                wr_err_set(&err, WR_EINVAL, 0, "must be allocated, measured or max");
                goto bad;
            }
            o->billed_seconds = optarg;
            break;
        case O_PRICEVCPU:
        case O_PRICEGIB: {
            char *end;
            double p;
            errno = 0;
            p = strtod(optarg, &end);
            if (errno != 0 || end == optarg || *end != '\0' || !(p >= 0) || p > 1e9) {
                wr_err_set(&err, WR_EINVAL, 0, "must be a price from 0 to 1e9");
                goto bad;
            }
            *(c == O_PRICEVCPU ? &o->price_vcpu_second : &o->price_gib_second) = p;
            break;
        }
        case O_CURRENCY:
            if (*optarg == '\0' || strlen(optarg) > 16) {
                wr_err_set(&err, WR_EINVAL, 0, "must be 1 to 16 bytes, e.g. USD");
                goto bad;
            }
            o->currency = optarg;
            break;
        case O_OVERCOMMIT: {
            char *end;
            errno = 0;
            o->memory_overcommit = strtod(optarg, &end);
            if (errno != 0 || end == optarg || *end != '\0' || !(o->memory_overcommit >= 0.01) ||
                o->memory_overcommit > 100000) {
                wr_err_set(&err, WR_EINVAL, 0, "must be a ratio from 0.01 to 100000");
                goto bad;
            }
            break;
        }
        case O_MEMRESERVE:
            if (wr_parse_size(optarg, &o->memory_reserve, &err) < 0)
                goto bad;
            break;
        case O_LIMITS:
            if (opt_onoff(optarg, &o->limits_on, &err) < 0)
                goto bad;
            break;
        case O_AUDIT:
            if (opt_onoff(optarg, &o->audit_on, &err) < 0)
                goto bad;
            break;
        case O_METERING:
            if (opt_onoff(optarg, &o->metering_on, &err) < 0)
                goto bad;
            break;
        case O_USAGEMS:
            if (opt_uint(optarg, 100, 3600000, &o->usage_interval_ms, &err) < 0)
                goto bad;
            break;
        case O_STORAGEMS:
            if (opt_uint(optarg, 100, 86400000, &o->storage_period_ms, &err) < 0)
                goto bad;
            break;
        case O_WHALLOW:
            if (o->n_webhook_allow == WR_WEBHOOK_ALLOW_MAX) {
                wr_err_set(&err, WR_EINVAL, 0, "at most %d", WR_WEBHOOK_ALLOW_MAX);
                goto bad;
            }
            if (wr_webhooks_allow_check(optarg, &err) < 0)
                goto bad;
            o->webhook_allow[o->n_webhook_allow++] = optarg;
            break;
        case O_WHATTEMPTS:
            if (opt_uint(optarg, 1, 100, &o->webhook_attempts, &err) < 0)
                goto bad;
            break;
        case O_WHBACKOFF:
            if (opt_uint(optarg, 10, 3600000, &o->webhook_backoff_ms, &err) < 0)
                goto bad;
            break;
        case O_WHTIMEOUT:
            if (opt_uint(optarg, 1, 300, &o->webhook_timeout_s, &err) < 0)
                goto bad;
            break;
        case O_RUNTIMES:
            if (parse_runtimes(optarg, &o->runtimes, &o->runtime_first, &err) < 0)
                goto bad;
            break;
        case O_CONSOLEDIR:
            o->console_dir = optarg;
            break;
        case O_ROLE:
            if (strcmp(optarg, "all") == 0)
                o->role = ROLE_ALL;
            else if (strcmp(optarg, "node") == 0)
                o->role = ROLE_NODE;
            else if (strcmp(optarg, "gateway") == 0)
                o->role = ROLE_GATEWAY;
            else {
                wr_err_set(&err, WR_EINVAL, 0, "`%s` is not a role (all, node or gateway)", optarg);
                goto bad;
            }
            break;
        case O_NODEID:
            if (!node_id_valid(optarg)) {
                wr_err_set(&err, WR_EINVAL, 0, "a node id is 1 to 63 of [A-Za-z0-9._-]");
                goto bad;
            }
            o->node_id = optarg;
            break;
        case O_NODETOKEN:
            o->node_token_file = optarg;
            break;
        case O_NODELABELS:
            if (parse_labels(optarg, &o->node_labels, &err) < 0)
                goto bad;
            break;
        case O_OBJSTORE:
            o->object_store = optarg;
            break;
        case O_DATABASE:
            o->database = optarg;
            break;
        case O_DISCOVERY:
            o->discovery = optarg;
            break;
        case O_ADMINKEYFILE:
            o->admin_key_file = optarg;
            break;
        case O_HEALTHMS:
            if (opt_uint(optarg, 50, 600000, &o->health_interval_ms, &err) < 0)
                goto bad;
            break;
        case O_DEADMS:
            if (opt_uint(optarg, 100, 3600000, &o->node_dead_after_ms, &err) < 0)
                goto bad;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            fprintf(stderr, "warrend: unknown option `%s` (see warrend --help)\n",
                    argv[optind - 1]);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "warrend: unexpected argument `%s`\n", argv[optind]);
        return -1;
    }
    return 0;
bad:
    fprintf(stderr, "warrend: %s: %s\n", argv[optind - 1], err.msg);
    return -1;
}

/* --node-token-file's secret: one line of at least 16 token characters. */
static int read_node_token(const struct options *o, char **out)
{
    char buf[512];
    struct wr_err err;
    ssize_t n;

    if (o->node_token_file == NULL) {
        fprintf(stderr, "warrend: --role %s needs --node-token-file\n",
                o->role == ROLE_NODE ? "node" : "gateway");
        return -1;
    }
    n = wr_read_fileat(AT_FDCWD, o->node_token_file, buf, sizeof(buf), &err);
    if (n < 0) {
        fprintf(stderr, "warrend: --node-token-file: %s\n", err.msg);
        return -1;
    }
    buf[strcspn(buf, "\r\n")] = '\0';
    if (strlen(buf) < 16 || strspn(buf, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                        "0123456789._~+/=-") != strlen(buf)) {
        fprintf(stderr, "warrend: --node-token-file: the token must be one line of at least 16 "
                        "letters, digits or ._~+/=-\n");
        return -1;
    }
    *out = xstrdup(buf);
    return 0;
}

/* size-1 random hex digits and a NUL. */
static void random_hex(char *out, size_t size)
{
    unsigned char b[32];
    size_t n = (size - 1) / 2;

    if (n > sizeof(b) || getrandom(b, n, 0) != (ssize_t)n)
        abort();
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}

/* --role gateway: no sandboxes here, so no root, state directory or runtime. */
static int run_gateway(const struct options *o, const char *node_token)
{
    struct wr_gateway_config g = {
        .version = WARREN_VERSION,
        .database = o->database ? o->database : getenv("WARREN_DATABASE_URL"),
        .discovery = o->discovery,
        .node_token = node_token,
        .admin_key_file = o->admin_key_file,
        .domain = o->domain,
        .object_store = o->object_store,
        .region = o->region,
        .health_interval_ms = o->health_interval_ms,
        .node_dead_after_ms = o->node_dead_after_ms,
    };
    const char *colon = strrchr(o->listen, ':');
    _cleanup_free_ char *host = NULL;
    struct wr_err err;
    uint64_t p;

    if (g.database == NULL || g.discovery == NULL || g.admin_key_file == NULL) {
        fprintf(stderr, "warrend: --role gateway needs --database (or WARREN_DATABASE_URL), "
                        "--discovery and --admin-key-file\n");
        return 2;
    }
    if (colon == NULL || wr_parse_uint(colon + 1, 65535, &p, &err) < 0) {
        fprintf(stderr, "warrend: --listen `%s` must be HOST:PORT\n", o->listen);
        return 2;
    }
    host = xstrndup(o->listen, (size_t)(colon - o->listen));
    g.listen_host = host;
    g.listen_port = (int)p;
    return wr_gateway_main(&g);
}

/* The first start makes an admin key and leaves it, readable by root only, in the state
 * directory: the one way to get the first key without the unix socket. */
static int bootstrap_admin(struct wr_store *store, const char *state_dir, struct wr_err *err)
{
    _cleanup_free_ char *path = xasprintf("%s/admin.key", state_dir);
    _cleanup_close_ int fd = -1;
    struct wr_key_info ki;
    char *secret = NULL;
    int64_t n = 0;

    if (wr_store_key_count(store, &n, err) < 0)
        return -1;
    if (n > 0)
        return 0;
    if (wr_store_key_create(store, "admin", "first admin key", true, &secret, &ki, err) < 0)
        return -1;
    wr_key_info_fini(&ki);
    (void)unlink(path);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || wr_write_all(fd, secret, strlen(secret)) < 0 || wr_write_all(fd, "\n", 1) < 0) {
        free(secret);
        return wr_err_sys(err, "write `%s`", path);
    }
    free(secret);
    log_info("first start: the admin API key is in %s (mode 0600)", path);
    return 0;
}

/* Raise RLIMIT_NOFILE (after the zygote is forked: sandboxes keep the inherited limit), and
 * size the TCP connection cap so that the sandboxes and the reserve keep their fds. Says so when
 * the limit cannot hold --max-sandboxes. */
static void size_fds(struct options *o, bool exits)
{
    uint64_t sandboxes = (uint64_t)o->max_sandboxes + o->warm + o->pool;

    for (size_t i = 0; i < o->n_warm_pools; i++)
        sandboxes += o->warm_pools[i].target;
    uint64_t fit;
    struct wr_nofile nf = {.soft = 1024, .hard = 1024};

    if (wr_nofile_raise(&nf) < 0)
        log_warn("fds: cannot raise RLIMIT_NOFILE: %s", strerror(errno));
    else if (nf.soft != nf.soft_was || nf.hard != nf.hard_was)
        log_info("fds: RLIMIT_NOFILE raised from %llu:%llu to %llu:%llu",
                 (unsigned long long)nf.soft_was, (unsigned long long)nf.hard_was,
                 (unsigned long long)nf.soft, (unsigned long long)nf.hard);
    if (exits) {
        /* An idle sandbox holds none of the daemon's fds: a quarter of them go to the
         * connections of busy ones (beyond that, quiet ones close theirs at once), half of the
         * rest to TCP connections. */
        uint64_t past = nf.soft > WR_FDS_RESERVED ? nf.soft - WR_FDS_RESERVED : 0;
        o->agent_crowd = (uint32_t)(past / 4 < UINT32_MAX ? past / 4 : UINT32_MAX);
        if (o->max_conns == 0)
            o->max_conns = (uint32_t)((past - o->agent_crowd) / 2 / WR_FDS_PER_CONN);
        log_info("fds: limit %llu; TCP connections at most %u; idle sandboxes hold none, and "
                 "at most about %u connections to busy ones stay open",
                 (unsigned long long)nf.soft, o->max_conns, o->agent_crowd);
        return;
    }
    if (o->max_conns == 0)
        o->max_conns = wr_nofile_tcp_conns(nf.soft, sandboxes);
    fit = wr_nofile_sandboxes(nf.soft, o->max_conns);
    if (fit < sandboxes)
        log_warn("fds: RLIMIT_NOFILE %llu holds about %llu sandboxes at %d fds each beside %u TCP "
                 "connections, fewer than --max-sandboxes %u (+ warm and pool); raise the hard "
                 "limit (LimitNOFILE= in a systemd unit) or lower --max-sandboxes",
                 (unsigned long long)nf.soft, (unsigned long long)fit, WR_FDS_PER_SANDBOX,
                 o->max_conns, o->max_sandboxes);
    log_info("fds: limit %llu; TCP connections at most %u; room for %llu sandboxes",
             (unsigned long long)nf.soft, o->max_conns, (unsigned long long)fit);
}

static uv_signal_t sigterm, sigint, sighup;
static struct wr_http_server *server;
static struct wr_http_server *metrics_server; /* --metrics-listen, or NULL */
static struct wr_audit *audit;
static struct wr_manager *manager;
static struct wr_netlog *netlog;

static void handle_closed(uv_handle_t *h)
{
}

static void server_stopped(void *arg)
{
    uv_close((uv_handle_t *)&sigterm, handle_closed);
    uv_close((uv_handle_t *)&sigint, handle_closed);
    uv_close((uv_handle_t *)&sighup, handle_closed);
}

static struct wr_api *the_api;
static struct wr_pool *pool;

/* warrend_http_connections: the API server's connections by kind (none once it stops). */
static void read_conns(struct wr_metric_emitter *e, void *ctx)
{
    uint32_t tcp, unix_conns, ws;

    if (server == NULL)
        return;
    wr_http_server_conns(server, &tcp, &unix_conns, &ws);
    wr_metric_emit(e, tcp, (const char *const[]){"tcp"});
    wr_metric_emit(e, unix_conns, (const char *const[]){"unix"});
    wr_metric_emit(e, ws, (const char *const[]){"websocket"});
}

/* warrend_pool_children: the runtime's pre-cloned children, bare and in network slots. */
static void read_pool(struct wr_metric_emitter *e, void *ctx)
{
    wr_metric_emit(e, (double)wr_runtime_pooled(ctx), (const char *const[]){"bare"});
    wr_metric_emit(e, (double)wr_runtime_net_pooled(ctx), (const char *const[]){"slot"});
}

/* The server is gone (no request will be audited): the audit trail goes, then the signals. */
static void audit_close_and_stopped(void *arg)
{
    the_api->audit = NULL;
    wr_audit_close(audit);
    audit = NULL;
    server_stopped(arg);
}

/* SIGHUP: the host's devices are read again from their CDI specs (docs/devices.md). */
static void on_hup(uv_signal_t *s, int signum)
{
    if (manager != NULL)
        wr_manager_reload_devices(manager);
}

static void on_stop_signal(uv_signal_t *s, int signum)
{
    log_info("signal %d: stopping (sandboxes keep running)", signum);
    uv_signal_stop(&sigterm);
    uv_signal_stop(&sigint);
    uv_signal_stop(&sighup);
    wr_pool_stop(pool);
    the_api->stopping = true;
    wr_api_e2b_close(the_api);
    /* What is buffered is written; followers' streams end. */
    wr_manager_set_netlog(manager, NULL);
    wr_netlog_close(netlog);
    netlog = NULL;
    wr_manager_close(manager);
    manager = NULL;
    if (metrics_server != NULL)
        wr_http_server_stop(metrics_server, NULL, NULL);
    metrics_server = NULL;
    wr_http_server_stop(server, audit_close_and_stopped, NULL);
    server = NULL;
}

int main(int argc, char **argv)
{
    struct options o = {
        .state_dir = "/var/lib/warren",
        .socket_path = "/run/warrend/warrend.sock",
        .cdi_spec_dirs = "/etc/cdi:/var/run/cdi",
        .listen = "127.0.0.1:7860",
        .pool = 4,
        .warm = 2,
        .disk_reserve = WR_SPACE_RESERVE_DEFAULT,
        .max_sandboxes = WR_UID_SLOTS, /* as many as there are id ranges: memory decides first */
        .audit_retention_days = WR_AUDIT_RETENTION_DAYS,
        .audit_on = true,
        .limits_on = true,
        .metering_on = true,
        .net_pool = {.addr = 10u << 24 | 200u << 16, .len = 15},
        .net_default = true,
        .net_table = "warren",
        .region = "local",
        .limits =
            {
                .rate = {[WR_POL_REQUESTS] = {100, 200},
                         [WR_POL_CREATES] = {5, 20},
                         [WR_POL_BYTES] = {64.0 * (1 << 20), 1ULL << 30}},
                .max_sandboxes = 100,
            },
        .n_sizes = WR_ARRAY_SIZE(wr_api_default_sizes),
    };
    struct wr_runtime_config rcfg = {0};
    struct wr_runtime *rt = NULL;
    struct wr_exits *exits = NULL;
    struct wr_store *store = NULL;
    struct wr_images *images = NULL;
    struct wr_space *space = NULL;
    struct wr_err err;
    struct wr_api api = {0};
    char *mhost = NULL;
    int mport = 0;
    char *host = NULL, *dbpath = NULL, *templates = NULL, *volumes = NULL, *warm_dir = NULL;
    char *console_dir = NULL;
    _cleanup_free_ char *node_token = NULL;
    char incarnation[33], hostname[64];
    int port = 0, rc = 1;
    uv_loop_t *loop;

    memcpy(o.sizes, wr_api_default_sizes, sizeof(wr_api_default_sizes));
    wr_log_min = WR_LOG_INFO;
    wr_log_set_level(getenv("WARREN_LOG"));
    if (parse_options(argc, argv, &o) < 0)
        return 2;
    if (o.role != ROLE_ALL && read_node_token(&o, &node_token) < 0)
        return 2;
    if (o.role == ROLE_GATEWAY)
        return run_gateway(&o, node_token);
    if (geteuid() != 0) {
        fprintf(stderr, "warrend: must run as root\n");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    /* Creates and destroys run on libuv's worker threads: allow several at once. */
    setenv("UV_THREADPOOL_SIZE", "8", 0);

    if (o.listen[0] != '\0') {
        const char *colon = strrchr(o.listen, ':');
        uint64_t p;
        if (colon == NULL || wr_parse_uint(colon + 1, 65535, &p, &err) < 0) {
            fprintf(stderr, "warrend: --listen `%s` must be HOST:PORT\n", o.listen);
            return 2;
        }
        host = xstrndup(o.listen, (size_t)(colon - o.listen));
        port = (int)p;
    }
    if (o.metrics_listen != NULL) {
        const char *colon = strrchr(o.metrics_listen, ':');
        uint64_t p;
        if (colon == NULL || colon == o.metrics_listen ||
            wr_parse_uint(colon + 1, 65535, &p, &err) < 0) {
            fprintf(stderr, "warrend: --metrics-listen `%s` must be HOST:PORT\n", o.metrics_listen);
            free(host);
            return 2;
        }
        mhost = xstrndup(o.metrics_listen, (size_t)(colon - o.metrics_listen));
        mport = (int)p;
    }
    if (wr_mkdir_p(o.state_dir, 0700, &err) < 0) {
        fprintf(stderr, "warrend: %s\n", err.msg);
        goto out;
    }
    templates = xasprintf("%s/templates", o.state_dir);
    (void)mkdir(templates, 0755);
    /* Volumes' files, with sandbox-side ids: no host user but root may reach them. */
    volumes = xasprintf("%s/volumes", o.state_dir);
    warm_dir = xasprintf("%s/warm", o.state_dir);
    if (mkdir(volumes, 0700) < 0 && errno != EEXIST) {
        fprintf(stderr, "warrend: create `%s`: %s\n", volumes, strerror(errno));
        goto out;
    }
    {
        _cleanup_free_ char *sockdir = xstrdup(o.socket_path);
        char *slash = strrchr(sockdir, '/');
        if (slash != NULL && slash != sockdir) {
            *slash = '\0';
            if (wr_mkdir_p(sockdir, 0755, &err) < 0) {
                fprintf(stderr, "warrend: %s\n", err.msg);
                goto out;
            }
        }
    }
    dbpath = xasprintf("%s/warren.db", o.state_dir);
    if (wr_store_open(dbpath, &store, &err) < 0 || bootstrap_admin(store, o.state_dir, &err) < 0) {
        fprintf(stderr, "warrend: %s\n", err.msg);
        goto out;
    }
    rcfg.run_dir = o.run_dir;
    rcfg.init_path = o.init_path;
    rcfg.cgroup_mode = o.cgroup_mode;
    wr_runtime_config_from_env(&rcfg);
#ifdef WR_TESTING
    rcfg.crash = getenv("WARREN_CRASH"); /* see wr_runtime_config.crash */
#endif
    rcfg.zygote = true; /* before any thread exists: the zygote is forked here */
    loop = uv_default_loop();
    pool = wr_pool_new(loop);
    if (o.pool > 0) {
        rcfg.pool_taken = wr_pool_taken;
        rcfg.pool_taken_arg = pool;
    }
    if (wr_runtime_open(&rcfg, &rt, &err) < 0) {
        fprintf(stderr, "warrend: %s\n", err.msg);
        goto out;
    }
    if (o.runtimes == 0 || (o.runtimes & (1u << WR_BACKEND_GVISOR))) {
        if (wr_runtime_has_backend(rt, WR_BACKEND_GVISOR, &err))
            log_info("runtime gvisor: available");
        else
            log_info("runtime gvisor: %s; its creates answer 501", err.msg);
    }
    wr_metric_set(wr_metric_gauge("warrend_build_info",
                                  "The daemon's version and cgroup interface (always 1).",
                                  (const char *const[]){"version", "cgroup", NULL}),
                  (const char *const[]){WARREN_VERSION, wr_runtime_cgroup_version(rt)}, 1);
    wr_metric_gauge_fn("warrend_pool_children",
                       "Sandbox children cloned ahead of creates (--pool), bare or in a network "
                       "slot.",
                       (const char *const[]){"kind", NULL}, read_pool, rt);
    wr_metric_gauge_fn("warrend_http_connections",
                       "Connections to the API, by kind (tcp, unix; websocket: of either).",
                       (const char *const[]){"kind", NULL}, read_conns, NULL);
    if (!o.exits_pidfd && wr_exits_open(&exits, &err) < 0)
        log_warn("%s: a pidfd per sandbox instead (%d of the daemon's fds each)", err.msg,
                 WR_FDS_PER_SANDBOX);
    size_fds(&o, exits != NULL);
    if (wr_images_open(loop, store, o.state_dir, templates, &images, &err) < 0 ||
        wr_space_open(o.state_dir, o.disk_reserve, &space, &err) < 0) {
        fprintf(stderr, "warrend: %s\n", err.msg);
        goto out;
    }
    {
        struct wr_manager_config mc = {
            .loop = loop,
            .store = store,
            .rt = rt,
            .images = images,
            .space = space,
            .volumes_dir = volumes,
            .warm = o.warm,
            .warm_dir = warm_dir,
            .warm_pools = o.warm_pools,
            .n_warm_pools = o.n_warm_pools,
            .default_timeout_s = o.default_timeout,
            .max_timeout_s = o.max_timeout,
            .max_sandboxes = o.max_sandboxes,
            .pids_max = o.pids_max,
            .cdi_spec_dirs = o.cdi_spec_dirs,
            .exits = exits,
            .agent_idle_ms = o.agent_idle_ms,
            .agent_crowd = o.agent_crowd,
            .max_memory_bytes = o.max_memory,
            .memory_overcommit = o.memory_overcommit,
            .memory_reserve_bytes = o.memory_reserve,
            .usage_interval_ms = o.usage_interval_ms,
            .no_ledger = !o.metering_on,
            .storage_period_ms = o.storage_period_ms,
            .billed_seconds = o.billed_seconds,
            .price_vcpu_second = o.price_vcpu_second,
            .price_gib_second = o.price_gib_second,
            .currency = o.currency ? o.currency : "USD",
            .runtimes = o.runtimes,
            .default_runtime = (unsigned)o.runtime_first,
            .webhooks =
                {
                    .allow = o.webhook_allow,
                    .n_allow = o.n_webhook_allow,
                    .attempts = o.webhook_attempts,
                    .backoff_ms = o.webhook_backoff_ms,
                    .timeout_ms = o.webhook_timeout_s * 1000,
                },
            .net =
                {
                    .enabled = !o.net_off,
                    .pool = o.net_pool,
                    .table = o.net_table,
                    .default_internet = o.net_default,
                    .deny = o.net_deny,
                    .n_deny = o.n_net_deny,
                    .dns_upstreams = o.dns_upstreams,
                    .n_dns_upstreams = o.n_dns_upstreams,
                    .max_connections = o.net_max_conns,
                    .ready = o.net_ready,
                    /* --pool's children sit in slots too when most creates take one */
                    .children = o.net_default ? o.pool : 0,
                    .run_dir = o.run_dir,
                },
        };
        if (wr_manager_open(&mc, &manager, &err) < 0) {
            fprintf(stderr, "warrend: %s\n", err.msg);
            goto out;
        }
    }
    /* The egress log's sink (core/netlog.h): with networking, the kernel's conntrack events of
     * the pool's flows too, each mapped to its sandbox through the slot table. */
    if (!o.net_off && wr_netlog_open(loop, store, &o.net_pool, wr_netlog_manager_lookup, manager,
                                     &netlog, &err) < 0) {
        log_warn("egress log: no connection tracking: %s", err.msg);
        netlog = NULL;
    }
    if (netlog == NULL && wr_netlog_open(loop, store, NULL, NULL, NULL, &netlog, &err) < 0) {
        fprintf(stderr, "warrend: %s\n", err.msg);
        wr_manager_close(manager);
        goto out;
    }
    wr_manager_set_netlog(manager, netlog);
    /* Refused connections, logged by the table's drop rules to its NFLOG group. */
    if (wr_manager_net_log_group(manager) != 0 &&
        wr_netlog_listen_nflog(netlog, wr_manager_net_log_group(manager), &err) < 0)
        log_warn("egress log: no refused connections: %s", err.msg);
    api = (struct wr_api){
        .mgr = manager,
        .images = images,
        .space = space,
        .loop = loop,
        .version = WARREN_VERSION,
        .domain = o.domain,
        .port_conn_limit = o.port_conn_limit,
        .mcp_origins = o.mcp_origins,
        .n_mcp_origins = o.n_mcp_origins,
        .limits = o.limits,
        .n_sizes = o.n_sizes,
    };
    memcpy(api.sizes, o.sizes, sizeof(api.sizes));
    console_dir = o.console_dir ? xstrdup(o.console_dir) : next_to_self("console");
    api.console_dir = console_dir;
    if (o.role == ROLE_NODE) {
        if (o.node_id == NULL) {
            if (gethostname(hostname, sizeof(hostname)) < 0)
                snprintf(hostname, sizeof(hostname), "node");
            hostname[strcspn(hostname, ".")] = '\0';
            o.node_id = hostname;
        }
        random_hex(incarnation, sizeof(incarnation));
        api.node_id = wr_api_node_id = o.node_id;
        api.node_incarnation = incarnation;
        api.node_token = node_token;
        api.node_labels = o.node_labels;
        api.object_store = o.object_store;
        log_info("node %s (incarnation %s)", o.node_id, incarnation);
    }
    the_api = &api;
    wr_api_metrics_register();
    if (o.audit_on &&
        wr_audit_open(loop, store, dbpath, o.audit_retention_days, &audit, &err) < 0) {
        fprintf(stderr, "warrend: %s\n", err.msg);
        wr_manager_close(manager);
        goto out;
    }
    api.audit = audit;
    api.limits_off = !o.limits_on;
    api.billed_seconds = o.billed_seconds;
    if (wr_api_e2b_open(&api, o.state_dir, &err) < 0) {
        fprintf(stderr, "warrend: %s\n", err.msg);
        wr_manager_close(manager);
        goto out;
    }
    {
        struct wr_http_config hc = {
            .loop = loop,
            .unix_path = o.socket_path[0] ? o.socket_path : NULL,
            .tcp_host = host,
            .tcp_port = port,
            .header_timeout_ms = o.header_timeout * 1000,
            .body_timeout_ms = o.body_timeout * 1000,
            .idle_timeout_ms = o.keepalive_timeout * 1000,
            .max_conns = o.max_conns,
            .max_conns_per_client = o.max_conns_per_client,
            .max_unauthenticated = o.max_unauthenticated,
            .max_body_conns = o.max_body_conns,
            .region = o.region,
            .handler = wr_api_handle,
            .ctx = &api,
            .on_finish = wr_api_on_finish,
        };
        if (wr_http_server_start(&hc, &server, &err) < 0) {
            fprintf(stderr, "warrend: %s\n", err.msg);
            wr_manager_close(manager);
            goto out;
        }
    }
    if (mhost != NULL) {
        /* The metrics listener: a server of its own, so that a scrape has no key and the
         * API's port serves no metrics. */
        struct wr_http_config mc = {
            .loop = loop,
            .tcp_host = mhost,
            .tcp_port = mport,
            .max_conns = 64,
            .handler = wr_api_metrics_handle,
        };
        if (wr_http_server_start(&mc, &metrics_server, &err) < 0) {
            fprintf(stderr, "warrend: metrics listener %s: %s\n", o.metrics_listen, err.msg);
            wr_http_server_stop(server, NULL, NULL);
            wr_manager_close(manager);
            goto out;
        }
        log_info("metrics: serving GET /metrics on %s:%d", mhost,
                 wr_http_server_tcp_port(metrics_server));
    }
    uv_signal_init(loop, &sigterm);
    uv_signal_init(loop, &sigint);
    uv_signal_init(loop, &sighup);
    uv_signal_start(&sigterm, on_stop_signal, SIGTERM);
    uv_signal_start(&sigint, on_stop_signal, SIGINT);
    uv_signal_start(&sighup, on_hup, SIGHUP);
    wr_pool_start(pool, rt, o.pool);

    /* The line tests and scripts wait for. */
    printf("warrend ready version=%s cgroup=%s unix=%s tcp=%s:%d", WARREN_VERSION,
           wr_runtime_cgroup_version(rt), o.socket_path, host ? host : "",
           host ? wr_http_server_tcp_port(server) : 0);
    if (metrics_server != NULL)
        printf(" metrics=%s:%d", mhost, wr_http_server_tcp_port(metrics_server));
    printf("\n");
    fflush(stdout);
    log_info("serving: unix %s, tcp %s:%d, cgroup %s", o.socket_path, host ? host : "-",
             host ? wr_http_server_tcp_port(server) : 0, wr_runtime_cgroup_version(rt));

    uv_run(loop, UV_RUN_DEFAULT);
    (void)uv_loop_close(loop);
    wr_api_limits_close(&api);
    rc = 0;
out:
    wr_images_close(images);
    wr_space_free(space);
    wr_runtime_close(rt);
    wr_exits_close(exits);
    wr_store_close(store);
    free(host);
    free(mhost);
    free(dbpath);
    free(templates);
    free(volumes);
    free(warm_dir);
    free(console_dir);
    return rc;
}
