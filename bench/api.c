/* SPDX-License-Identifier: Apache-2.0 */
/* Benchmark client of the daemon API (issue #3): a small HTTP/1.1 client over warrend's unix
 * socket (no key needed there), keep-alive, responses parsed by llhttp and JSON by jansson. It is
 * run by bench/run-api.sh; every mode prints medians and p99s, and the client's own CPU time per
 * operation (getrusage), so its overhead can be told apart from the daemon's.
 *
 * usage: api_bench SOCKET MODE [ARGS]
 *   health N        GET /v1/health N times on one connection (round-trip floor of the API)
 *   cycle N         N × { POST /v1/sandboxes → POST exec mode=stream ["echo","hi"] → first stdout
 *                   event → (rest of the stream) → DELETE }, one after the other
 *   exec N          one sandbox; N × POST exec mode=wait ["true"] on one connection
 *   files MiB HASH  one sandbox; PUT a MiB-sized file then GET it back, MiB/s each way; the
 *                   content is zeros (HASH=0, byte count and content checked) or pseudo-random
 *                   (HASH=1, SHA-256 of both directions compared)
 *   conc C SECS     C processes, each looping create → exec ["true"] (wait) → delete for SECS
 *   spawn N PROG    N × posix_spawn PROG true + waitpid on the host (floor of starting a process)
 *   reap            delete every sandbox the daemon lists (cleanup)
 * cycle and conc also print how busy the host's CPUs were (/proc/stat, every process counted).
 * WARREN_BENCH_CREATE, if set, is the body of the creates of cycle, exec and conc. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <llhttp.h>
#include <openssl/evp.h>

#include "bench.h"

#define RBUF (1u << 20)

static const char *sock_path;

static uint64_t cpu_ns(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
}

static void report(const char *what, uint64_t *v, size_t n)
{
    if (n == 0) {
        printf("  %-34s no samples\n", what);
        return;
    }
    qsort(v, n, sizeof(*v), cmp_u64);
    printf("  %-34s median %8.3f ms  p99 %8.3f ms  min %7.3f  max %8.3f  (n=%zu)\n", what,
           pct(v, n, 0.5), pct(v, n, 0.99), (double)v[0] / 1e6, (double)v[n - 1] / 1e6, n);
}

static void die(const char *msg)
{
    fprintf(stderr, "api_bench: %s\n", msg);
    exit(1);
}

/* ---- the HTTP client ------------------------------------------------------------------------ */

typedef void body_fn(void *ctx, const char *at, size_t len);

struct conn {
    int fd;
    llhttp_t p;
    llhttp_settings_t s;
    char *rbuf;
    int status;
    bool done, keep;
    body_fn *on_body; /* NULL: collect into body */
    void *ctx;
    char *body;
    size_t blen, bcap;
};

static int cb_headers(llhttp_t *p)
{
    struct conn *c = p->data;
    c->status = llhttp_get_status_code(p);
    return 0;
}

static int cb_body(llhttp_t *p, const char *at, size_t len)
{
    struct conn *c = p->data;
    if (c->on_body) {
        c->on_body(c->ctx, at, len);
        return 0;
    }
    if (c->blen + len + 1 > c->bcap) {
        c->bcap = (c->blen + len + 1) * 2;
        c->body = realloc(c->body, c->bcap);
        if (c->body == NULL)
            die("out of memory");
    }
    memcpy(c->body + c->blen, at, len);
    c->blen += len;
    c->body[c->blen] = 0;
    return 0;
}

static int cb_done(llhttp_t *p)
{
    struct conn *c = p->data;
    c->done = true;
    c->keep = llhttp_should_keep_alive(p);
    return HPE_PAUSED; /* stop at the message's end; nothing is pipelined */
}

static void conn_open(struct conn *c)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};

    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        die("socket");
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock_path);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        perror(sock_path);
        exit(1);
    }
    llhttp_init(&c->p, HTTP_RESPONSE, &c->s);
    c->p.data = c;
}

static void conn_init(struct conn *c)
{
    memset(c, 0, sizeof(*c));
    llhttp_settings_init(&c->s);
    c->s.on_headers_complete = cb_headers;
    c->s.on_body = cb_body;
    c->s.on_message_complete = cb_done;
    c->rbuf = malloc(RBUF);
    if (c->rbuf == NULL)
        die("out of memory");
    conn_open(c);
}

static void conn_close(struct conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Send the head (and a small body) of a request; the connection is reopened if the server had
 * closed it. */
static int send_req(struct conn *c, const char *method, const char *path, const char *body,
                    uint64_t body_len)
{
    char head[1024];
    int n;

    if (c->fd < 0)
        conn_open(c);
    n = snprintf(head, sizeof(head),
                 "%s %s HTTP/1.1\r\nHost: warrend\r\n%s"
                 "Content-Length: %" PRIu64 "\r\n\r\n",
                 method, path, body_len ? "Content-Type: application/json\r\n" : "", body_len);
    if (n < 0 || (size_t)n >= sizeof(head))
        die("request head too long");
    c->status = 0;
    c->done = false;
    c->blen = 0;
    if (c->body)
        c->body[0] = 0;
    if (write_all(c->fd, head, (size_t)n) < 0)
        return -1;
    if (body && body_len && write_all(c->fd, body, body_len) < 0)
        return -1;
    return 0;
}

/* Read and parse until the response is complete. Returns the status, or -1. */
static int recv_resp(struct conn *c)
{
    while (!c->done) {
        ssize_t n = read(c->fd, c->rbuf, RBUF);
        enum llhttp_errno e;

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        e = n == 0 ? llhttp_finish(&c->p) : llhttp_execute(&c->p, c->rbuf, (size_t)n);
        if (e == HPE_PAUSED) {
            llhttp_resume(&c->p);
            break;
        }
        if (e != HPE_OK) {
            fprintf(stderr, "api_bench: bad response: %s\n", llhttp_get_error_reason(&c->p));
            conn_close(c);
            return -1;
        }
        if (n == 0) {
            conn_close(c);
            return c->done ? c->status : -1;
        }
    }
    if (!c->keep)
        conn_close(c);
    return c->status;
}

static int request(struct conn *c, const char *method, const char *path, const char *body)
{
    if (send_req(c, method, path, body, body ? strlen(body) : 0) < 0) {
        conn_close(c);
        return -1;
    }
    return recv_resp(c);
}

/* ---- sandbox helpers ------------------------------------------------------------------------ */

/* POST /v1/sandboxes; the id into id[64]. Returns the status (201 on success). body NULL: the
 * environment's WARREN_BENCH_CREATE (a JSON object, e.g. a network), else "{}". */
static int create_sb(struct conn *c, const char *body, char id[64])
{
    const char *dflt = getenv("WARREN_BENCH_CREATE");
    int st = request(c, "POST", "/v1/sandboxes", body ? body : dflt ? dflt : "{}");
    json_t *j;
    const char *s;

    if (st != 201)
        return st;
    j = json_loadb(c->body, c->blen, 0, NULL);
    s = j ? json_string_value(json_object_get(j, "id")) : NULL;
    if (s == NULL || strlen(s) >= 64) {
        json_decref(j);
        return -1;
    }
    strcpy(id, s);
    json_decref(j);
    return st;
}

static int delete_sb(struct conn *c, const char *id)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
    return request(c, "DELETE", path, NULL);
}

/* exec mode=wait ["true"]: 0 if it answered 200 with exit_code 0. */
static int exec_true(struct conn *c, const char *id)
{
    char path[128];
    json_t *j;
    int st, ok;

    snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
    st = request(c, "POST", path, "{\"cmd\":[\"true\"],\"mode\":\"wait\"}");
    if (st != 200)
        return -1;
    j = json_loadb(c->body, c->blen, 0, NULL);
    ok = j && json_integer_value(json_object_get(j, "exit_code")) == 0 &&
         json_is_integer(json_object_get(j, "exit_code"));
    json_decref(j);
    return ok ? 0 : -1;
}

/* ---- modes ---------------------------------------------------------------------------------- */

static void mode_health(long n)
{
    struct conn c;
    uint64_t *t = calloc((size_t)n, sizeof(*t)), cpu0, w0;

    conn_init(&c);
    for (int i = 0; i < 50; i++)
        if (request(&c, "GET", "/v1/health", NULL) != 200)
            die("health failed");
    cpu0 = cpu_ns();
    w0 = now_ns();
    for (long i = 0; i < n; i++) {
        uint64_t t0 = now_ns();
        if (request(&c, "GET", "/v1/health", NULL) != 200)
            die("health failed");
        t[i] = now_ns() - t0;
    }
    printf("  client CPU per request %.1f us (of %.1f us wall)\n",
           (double)(cpu_ns() - cpu0) / 1e3 / (double)n, (double)(now_ns() - w0) / 1e3 / (double)n);
    report("GET /v1/health round trip", t, (size_t)n);
}

/* The NDJSON stream of exec mode=stream: split into lines, note the first stdout event. */
struct stream {
    char line[4096];
    size_t len;
    uint64_t first_out; /* when the first stdout event was parsed */
    char out[64];
    size_t outlen;
    int exit_code;
    bool bad;
};

static void stream_line(struct stream *s)
{
    json_t *j = json_loadb(s->line, s->len, 0, NULL);
    const char *type = j ? json_string_value(json_object_get(j, "type")) : NULL;

    if (type == NULL) {
        s->bad = true;
    } else if (strcmp(type, "stdout") == 0) {
        const char *d = json_string_value(json_object_get(j, "data"));
        if (s->first_out == 0)
            s->first_out = now_ns();
        if (d) {
            size_t l = strlen(d);
            if (s->outlen + l < sizeof(s->out)) {
                memcpy(s->out + s->outlen, d, l);
                s->outlen += l;
            }
        }
    } else if (strcmp(type, "exit") == 0) {
        json_t *ec = json_object_get(j, "exit_code");
        s->exit_code = json_is_integer(ec) ? (int)json_integer_value(ec) : -1;
    } else if (strcmp(type, "error") == 0) {
        s->bad = true;
    }
    json_decref(j);
}

static void stream_body(void *ctx, const char *at, size_t len)
{
    struct stream *s = ctx;
    for (size_t i = 0; i < len; i++) {
        if (at[i] == '\n') {
            stream_line(s);
            s->len = 0;
        } else if (s->len < sizeof(s->line)) {
            s->line[s->len++] = at[i];
        } else {
            s->bad = true;
        }
    }
}

static void mode_cycle(long n)
{
    struct conn c;
    uint64_t *t_create = calloc((size_t)n, 8), *t_first = calloc((size_t)n, 8),
             *t_cycle = calloc((size_t)n, 8), *t_exec = calloc((size_t)n, 8),
             *t_del = calloc((size_t)n, 8), cpu0, w0;
    long warm = 10;
    uint64_t hb0 = 0, ht0 = 0;

    conn_init(&c);
    cpu0 = cpu_ns();
    w0 = now_ns();
    for (long i = -warm; i < n; i++) {
        char id[64], path[128];
        struct stream s = {.exit_code = -1};
        uint64_t t0, t1, t2, t3, t4;

        if (i == 0) {
            cpu0 = cpu_ns();
            w0 = now_ns();
            host_cpu(&hb0, &ht0);
        }
        t0 = now_ns();
        if (create_sb(&c, NULL, id) != 201)
            die("create failed");
        t1 = now_ns();
        snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
        c.on_body = stream_body;
        c.ctx = &s;
        if (request(&c, "POST", path, "{\"cmd\":[\"echo\",\"hi\"],\"mode\":\"stream\"}") != 200)
            die("exec stream failed");
        c.on_body = NULL;
        t2 = now_ns();
        if (s.bad || s.first_out == 0 || s.outlen != 3 || memcmp(s.out, "hi\n", 3) != 0 ||
            s.exit_code != 0)
            die("exec stream: unexpected events");
        t3 = now_ns();
        if (delete_sb(&c, id) != 204)
            die("delete failed");
        t4 = now_ns();
        if (i >= 0) {
            t_create[i] = t1 - t0;
            t_first[i] = s.first_out - t0;
            t_exec[i] = s.first_out - t1;
            t_cycle[i] = t4 - t0;
            t_del[i] = t4 - t3;
        }
        (void)t2;
    }
    printf("  client CPU per cycle %.1f us (of %.1f us wall)\n",
           (double)(cpu_ns() - cpu0) / 1e3 / (double)n, (double)(now_ns() - w0) / 1e3 / (double)n);
    report_host_cpu(hb0, ht0, (uint64_t)n, "cycle");
    report("create (201 received)", t_create, (size_t)n);
    report("exec stream: request → 1st stdout", t_exec, (size_t)n);
    report("create → first stdout", t_first, (size_t)n);
    report("delete (204 received)", t_del, (size_t)n);
    report("whole cycle", t_cycle, (size_t)n);
}

static void mode_exec(long n)
{
    struct conn c;
    char id[64];
    uint64_t *t = calloc((size_t)n, 8), cpu0, w0, hb0, ht0;

    conn_init(&c);
    if (create_sb(&c, NULL, id) != 201)
        die("create failed");
    for (int i = 0; i < 20; i++)
        if (exec_true(&c, id) < 0)
            die("exec failed");
    host_cpu(&hb0, &ht0);
    cpu0 = cpu_ns();
    w0 = now_ns();
    for (long i = 0; i < n; i++) {
        uint64_t t0 = now_ns();
        if (exec_true(&c, id) < 0)
            die("exec failed");
        t[i] = now_ns() - t0;
    }
    printf("  client CPU per exec %.1f us (of %.1f us wall)\n",
           (double)(cpu_ns() - cpu0) / 1e3 / (double)n, (double)(now_ns() - w0) / 1e3 / (double)n);
    report_host_cpu(hb0, ht0, (uint64_t)n, "exec");
    report("exec wait [\"true\"] round trip", t, (size_t)n);
    if (delete_sb(&c, id) != 204)
        die("delete failed");
}

/* Deterministic pseudo-random content: chunk k of the file is xorshift64* seeded with k. */
static void fill_random(uint64_t *buf, size_t words, uint64_t k)
{
    uint64_t x = 0x9e3779b97f4a7c15ull ^ (k * 0xbf58476d1ce4e5b9ull + 1);
    for (size_t i = 0; i < words; i++) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        buf[i] = x * 0x2545f4914f6cdd1dull;
    }
}

struct download {
    uint64_t bytes;
    bool nonzero;
    EVP_MD_CTX *md;
};

static void download_body(void *ctx, const char *at, size_t len)
{
    struct download *d = ctx;
    d->bytes += len;
    if (d->md) {
        EVP_DigestUpdate(d->md, at, len);
    } else if (!d->nonzero) {
        /* zeros expected: at[0] == 0 and the rest equal to its predecessor */
        if (len && (at[0] != 0 || memcmp(at, at + 1, len - 1) != 0))
            d->nonzero = true;
    }
}

static void hex(const unsigned char *h, unsigned n, char *out)
{
    for (unsigned i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", h[i]);
}

static void mode_files(long mib, int hash)
{
    const size_t CH = 1u << 20;
    uint64_t size = (uint64_t)mib << 20, t0, t_put, t_get, cpu0, cpu_put, cpu_get;
    struct conn c;
    char id[64], path[256], body[128], up_hex[65], down_hex[65];
    unsigned char dg[EVP_MAX_MD_SIZE];
    unsigned dlen = 0;
    uint64_t *buf = calloc(CH / 8, 8);
    EVP_MD_CTX *md = hash ? EVP_MD_CTX_new() : NULL;
    struct download d = {0};
    json_t *j;
    int st;

    conn_init(&c);
    /* the sandbox's tmpfs and memory limit are memory_mb: room for the file */
    snprintf(body, sizeof(body), "{\"memory_mb\":%ld}", mib * 2 + 512);
    if (create_sb(&c, body, id) != 201)
        die("create failed");
    snprintf(path, sizeof(path), "/v1/sandboxes/%s/files?path=/tmp/blob", id);
    if (md)
        EVP_DigestInit_ex(md, EVP_sha256(), NULL);

    cpu0 = cpu_ns();
    t0 = now_ns();
    if (send_req(&c, "PUT", path, NULL, size) < 0)
        die("PUT: send failed");
    for (uint64_t k = 0; k < size / CH; k++) {
        if (md) {
            fill_random(buf, CH / 8, k);
            EVP_DigestUpdate(md, buf, CH);
        }
        if (write_all(c.fd, buf, CH) < 0)
            die("PUT: send failed (the daemon answered early?)");
    }
    st = recv_resp(&c);
    t_put = now_ns() - t0;
    cpu_put = cpu_ns() - cpu0;
    if (st != 201) {
        fprintf(stderr, "api_bench: PUT answered %d: %s\n", st, c.body ? c.body : "");
        exit(1);
    }
    j = json_loadb(c.body, c.blen, 0, NULL);
    if (!j || (uint64_t)json_integer_value(json_object_get(j, "size")) != size)
        die("PUT: the file's size is not what was sent");
    json_decref(j);
    if (md) {
        EVP_DigestFinal_ex(md, dg, &dlen);
        hex(dg, dlen, up_hex);
        EVP_DigestInit_ex(md, EVP_sha256(), NULL);
    }

    d.md = md;
    c.on_body = download_body;
    c.ctx = &d;
    cpu0 = cpu_ns();
    t0 = now_ns();
    st = request(&c, "GET", path, NULL);
    t_get = now_ns() - t0;
    cpu_get = cpu_ns() - cpu0;
    c.on_body = NULL;
    if (st != 200)
        die("GET failed");
    if (d.bytes != size)
        die("GET: byte count differs");
    if (md) {
        EVP_DigestFinal_ex(md, dg, &dlen);
        hex(dg, dlen, down_hex);
        if (strcmp(up_hex, down_hex) != 0)
            die("GET: SHA-256 differs from what was uploaded");
    } else if (d.nonzero) {
        die("GET: content is not the zeros uploaded");
    }
    printf("  %ld MiB %s: PUT %.2f s = %.0f MiB/s (client CPU %.2f s); GET %.2f s = %.0f MiB/s "
           "(client CPU %.2f s); %" PRIu64 " bytes back, %s\n",
           mib, hash ? "pseudo-random" : "zeros", (double)t_put / 1e9,
           (double)mib / ((double)t_put / 1e9), (double)cpu_put / 1e9, (double)t_get / 1e9,
           (double)mib / ((double)t_get / 1e9), (double)cpu_get / 1e9, d.bytes,
           hash ? "sha256 equal" : "all zero");
    if (hash)
        printf("  sha256 %s\n", up_hex);
    printf("RESULT files mib=%ld hash=%d put_s=%.4f get_s=%.4f\n", mib, hash, (double)t_put / 1e9,
           (double)t_get / 1e9);
    if (delete_sb(&c, id) != 204)
        die("delete failed");
    EVP_MD_CTX_free(md);
}

struct worker_result {
    uint64_t cycles, errors, limit, first_start, last_end;
    uint64_t median_ns, p99_ns;
};

static void worker(int start_fd, int res_fd, uint64_t secs)
{
    struct conn c;
    struct worker_result r = {0};
    size_t cap = 1 << 16, n = 0;
    uint64_t *lat = calloc(cap, 8), deadline;
    char go;

    conn_init(&c);
    if (read(start_fd, &go, 1) != 1)
        exit(1);
    r.first_start = now_ns();
    deadline = r.first_start + secs * 1000000000ull;
    while (now_ns() < deadline) {
        char id[64];
        uint64_t t0 = now_ns();
        int st = create_sb(&c, NULL, id);

        if (st == 503 || st == 429) {
            r.limit++;
            usleep(1000);
            continue;
        }
        if (st != 201) {
            r.errors++;
            continue;
        }
        if (exec_true(&c, id) < 0)
            r.errors++;
        if (delete_sb(&c, id) != 204) {
            r.errors++;
            continue;
        }
        r.cycles++;
        if (n < cap)
            lat[n++] = now_ns() - t0;
    }
    r.last_end = now_ns();
    if (n) {
        qsort(lat, n, 8, cmp_u64);
        r.median_ns = lat[n / 2];
        r.p99_ns = lat[(size_t)(0.99 * (double)(n - 1) + 0.5)];
    }
    if (write(res_fd, &r, sizeof(r)) != sizeof(r))
        exit(1);
    exit(0);
}

static void mode_conc(int nw, uint64_t secs)
{
    int sp[2], rp[2];
    uint64_t cycles = 0, errors = 0, limit = 0, t0 = UINT64_MAX, t1 = 0;
    double med_sum = 0, p99_max = 0;
    uint64_t hb0, ht0;

    if (pipe(sp) < 0 || pipe(rp) < 0)
        die("pipe");
    fflush(stdout);
    for (int i = 0; i < nw; i++) {
        pid_t p = fork();
        if (p < 0)
            die("fork");
        if (p == 0) {
            close(sp[1]);
            close(rp[0]);
            worker(sp[0], rp[1], secs);
        }
    }
    close(sp[0]);
    close(rp[1]);
    usleep(200000); /* let every worker connect */
    host_cpu(&hb0, &ht0);
    for (int i = 0; i < nw; i++)
        if (write(sp[1], "g", 1) != 1)
            die("start");
    for (int i = 0; i < nw; i++) {
        struct worker_result r;
        if (read(rp[0], &r, sizeof(r)) != sizeof(r))
            die("a worker died");
        cycles += r.cycles;
        errors += r.errors;
        limit += r.limit;
        t0 = r.first_start < t0 ? r.first_start : t0;
        t1 = r.last_end > t1 ? r.last_end : t1;
        med_sum += (double)r.median_ns / 1e6;
        if ((double)r.p99_ns / 1e6 > p99_max)
            p99_max = (double)r.p99_ns / 1e6;
    }
    report_host_cpu(hb0, ht0, cycles, "cycle");
    while (wait(NULL) > 0)
        ;
    printf("  C=%d: %" PRIu64 " cycles in %.2f s = %.1f /s; errors %" PRIu64
           ", 503/429 limit %" PRIu64
           "; cycle latency: mean of workers' medians %.2f ms, worst worker p99 %.2f ms\n",
           nw, cycles, (double)(t1 - t0) / 1e9, (double)cycles / ((double)(t1 - t0) / 1e9), errors,
           limit, med_sum / nw, p99_max);
    printf("RESULT conc c=%d cycles=%" PRIu64 " secs=%.3f rate=%.2f errors=%" PRIu64
           " limit=%" PRIu64 "\n",
           nw, cycles, (double)(t1 - t0) / 1e9, (double)cycles / ((double)(t1 - t0) / 1e9), errors,
           limit);
}

static void mode_spawn(long n, const char *prog)
{
    char *argv[] = {"true", NULL};
    extern char **environ;
    uint64_t *t = calloc((size_t)n, 8);

    for (long i = -20; i < n; i++) {
        uint64_t t0 = now_ns();
        pid_t pid;
        int ws;

        if (posix_spawn(&pid, prog, NULL, NULL, argv, environ) != 0)
            die("posix_spawn failed");
        if (waitpid(pid, &ws, 0) != pid || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
            die("spawned program failed");
        if (i >= 0)
            t[i] = now_ns() - t0;
    }
    report("host posix_spawn true + waitpid", t, (size_t)n);
}

static void mode_reap(void)
{
    struct conn c;
    json_t *j, *arr;
    size_t i;
    int n = 0;

    conn_init(&c);
    if (request(&c, "GET", "/v1/sandboxes?limit=1000&state=creating,running,paused,stopped,error",
                NULL) != 200)
        die("list failed");
    j = json_loadb(c.body, c.blen, 0, NULL);
    arr = json_object_get(j, "sandboxes");
    for (i = 0; i < json_array_size(arr); i++) {
        const char *id = json_string_value(json_object_get(json_array_get(arr, i), "id"));
        if (id && delete_sb(&c, id) == 204)
            n++;
    }
    if (n)
        printf("  reaped %d sandbox(es)\n", n);
    json_decref(j);
}

int main(int argc, char **argv)
{
    const char *mode;

    if (argc < 3) {
        fprintf(stderr, "usage: api_bench SOCKET health|cycle|exec N | files MiB HASH | conc C SECS"
                        " | reap\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    sock_path = argv[1];
    mode = argv[2];
    if (strcmp(mode, "reap") == 0) {
        mode_reap();
        return 0;
    }
    if (argc < 4)
        die("missing argument");
    if (strcmp(mode, "health") == 0)
        mode_health(atol(argv[3]));
    else if (strcmp(mode, "cycle") == 0)
        mode_cycle(atol(argv[3]));
    else if (strcmp(mode, "exec") == 0)
        mode_exec(atol(argv[3]));
    else if (strcmp(mode, "files") == 0 && argc >= 5)
        mode_files(atol(argv[3]), atoi(argv[4]));
    else if (strcmp(mode, "spawn") == 0 && argc >= 5)
        mode_spawn(atol(argv[3]), argv[4]);
    else if (strcmp(mode, "conc") == 0 && argc >= 5)
        mode_conc(atoi(argv[3]), (uint64_t)atol(argv[4]));
    else
        die("unknown mode");
    return 0;
}
