/*
 * A routechain router plugin in C. Build:
 *
 *   cc -shared -fPIC -O2 -I plugins/abi -o libhealthy.so plugins/examples/c/healthy.c
 *
 * It exports two routers:
 *   healthy     (the default) keeps the providers whose param `healthy` is `true`
 *   unhealthy   keeps the others
 * A call with the attachment `x-any-health` is left alone. The config is ignored (any JSON).
 * prepare() precomputes the set as bitset words; route() is one AND per word.
 */
#include <stdlib.h>
#include <string.h>

#include "routechain_plugin.h"

struct rc_router {
    bool want_healthy;
};

struct rc_prepared {
    size_t word_count;
    uint64_t *keep;
};

static const rc_str NAMES[] = {{"healthy", 7}, {"unhealthy", 9}};

static rc_str lit(const char *s) {
    rc_str r = {s, strlen(s)};
    return r;
}

static void put(rc_buf *buf, const char *msg) {
    if (buf == NULL || buf->ptr == NULL) return;
    size_t n = strlen(msg);
    if (n > buf->cap - buf->len) n = buf->cap - buf->len;
    memcpy(buf->ptr + buf->len, msg, n);
    buf->len += n;
}

static bool eq(rc_str a, const char *b) {
    return a.ptr != NULL && a.len == strlen(b) && memcmp(a.ptr, b, a.len) == 0;
}

static int32_t create(rc_str name, rc_str config_json, rc_router **out, rc_buf *err) {
    (void)config_json;
    if (out == NULL) return RC_BAD_ARGUMENT;
    bool want;
    if (name.ptr == NULL || eq(name, "healthy")) {
        want = true;
    } else if (eq(name, "unhealthy")) {
        want = false;
    } else {
        put(err, "this library exports `healthy` and `unhealthy`");
        return RC_UNKNOWN_ROUTER;
    }
    rc_router *r = malloc(sizeof *r);
    if (r == NULL) return RC_ERROR;
    r->want_healthy = want;
    *out = r;
    return RC_OK;
}

static int32_t prepare(const rc_router *router, const rc_snapshot_view *s, rc_prepared **out,
                       rc_buf *err) {
    if (router == NULL || s == NULL || out == NULL) return RC_BAD_ARGUMENT;
    if (s->size < sizeof(rc_snapshot_view)) {
        put(err, "host snapshot view too small");
        return RC_BAD_ARGUMENT;
    }
    rc_prepared *p = malloc(sizeof *p);
    if (p == NULL) return RC_ERROR;
    p->word_count = (s->provider_count + 63) / 64;
    p->keep = calloc(p->word_count ? p->word_count : 1, sizeof(uint64_t));
    if (p->keep == NULL) {
        free(p);
        return RC_ERROR;
    }
    for (size_t i = 0; i < s->provider_count; i++) {
        rc_str v = {NULL, 0};
        bool healthy = s->provider_get(s->ctx, i, lit("healthy"), &v) && eq(v, "true");
        if (healthy == router->want_healthy) p->keep[i / 64] |= (uint64_t)1 << (i % 64);
    }
    *out = p;
    return RC_OK;
}

static int32_t route(const rc_prepared *p, const rc_request_view *req, uint64_t *words,
                     size_t word_count, rc_buf *explain, rc_buf *err) {
    if (p == NULL || req == NULL || (words == NULL && word_count > 0)) return RC_BAD_ARGUMENT;
    if (req->size < sizeof(rc_request_view)) {
        put(err, "host request view too small");
        return RC_BAD_ARGUMENT;
    }
    rc_str any = {NULL, 0};
    if (req->attachment(req->ctx, lit("x-any-health"), &any)) {
        put(explain, "x-any-health: all kept");
        return RC_OK;
    }
    for (size_t w = 0; w < word_count; w++) words[w] &= w < p->word_count ? p->keep[w] : 0;
    put(explain, "kept by health");
    return RC_OK;
}

static void release_prepared(rc_prepared *p) {
    if (p == NULL) return;
    free(p->keep);
    free(p);
}

static void release_router(rc_router *r) { free(r); }

static const rc_plugin_v1 TABLE = {
    sizeof(rc_plugin_v1), ROUTECHAIN_PLUGIN_ABI_VERSION, NAMES, 2,
    create, prepare, route, release_prepared, release_router,
};

uint32_t routechain_plugin_abi_version(void) { return ROUTECHAIN_PLUGIN_ABI_VERSION; }

const rc_plugin_v1 *routechain_plugin_v1(void) { return &TABLE; }
