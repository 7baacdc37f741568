/*
 * routechain_plugin.h: the C ABI of routechain router plugins, version 1.
 *
 * Written by hand to match plugins/abi/src/ffi.rs field for field (a test compiles a C
 * plugin against this header and loads it). A plugin is a shared library exporting:
 *
 *   uint32_t routechain_plugin_abi_version(void);     -> ROUTECHAIN_PLUGIN_ABI_VERSION
 *   const rc_plugin_v1 *routechain_plugin_v1(void);   -> a static table
 *
 * The host calls routechain_plugin_abi_version() first and refuses the library unless it
 * returns ROUTECHAIN_PLUGIN_ABI_VERSION; then it checks the table (size, no NULL function,
 * at least one router name).
 *
 * Lifecycle:
 *   create(name, config_json)           per chain entry      -> rc_router *
 *   prepare(router, snapshot)           per provider snapshot -> rc_prepared *
 *                                       (several may be alive at once: an old snapshot keeps
 *                                       serving calls while a new one prepares)
 *   route(prepared, request, words, n)  per call, CONCURRENTLY from many threads on one
 *                                       prepared handle: must be thread-safe, should not
 *                                       allocate or lock
 *   release_prepared(prepared)          every prepared handle, before its router
 *   release_router(router)
 *
 * Strings (rc_str) are borrowed UTF-8 bytes, NOT NUL-terminated; ptr == NULL means "absent".
 * Strings the host hands over are valid only during the call that hands them over: copy
 * what you keep. Buffers (rc_buf) belong to the host: write at most cap bytes at ptr and set
 * len. Nothing may unwind across these functions: return RC_PANIC instead.
 */
#ifndef ROUTECHAIN_PLUGIN_H
#define ROUTECHAIN_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ROUTECHAIN_PLUGIN_ABI_VERSION 1u

/* Status codes. */
#define RC_OK 0             /* success */
#define RC_ERROR 1          /* failed; message in err */
#define RC_PANIC 2          /* internal fault (a caught panic); message in err */
#define RC_UNKNOWN_ROUTER 3 /* create: the library exports no router of that name */
#define RC_BAD_CONFIG 4     /* create: the config was refused; message in err */
#define RC_BAD_ARGUMENT 5   /* a NULL pointer, or a view smaller than the plugin needs */

/* A borrowed string: len bytes of UTF-8 at ptr; ptr == NULL means absent. */
typedef struct rc_str {
    const char *ptr;
    size_t len;
} rc_str;

/* A host buffer: write at most cap bytes at ptr, then set len (truncate what does not fit). */
typedef struct rc_buf {
    char *ptr;
    size_t cap;
    size_t len;
} rc_buf;

/* Opaque handles: the plugin defines these structs as it likes. */
typedef struct rc_router rc_router;
typedef struct rc_prepared rc_prepared;

/* Lookups write the value to *out and return true when present. */
typedef bool (*rc_lookup_fn)(const void *ctx, rc_str key, rc_str *out);
typedef bool (*rc_provider_lookup_fn)(const void *ctx, size_t index, rc_str key, rc_str *out);
typedef size_t (*rc_param_count_fn)(const void *ctx, size_t index);
typedef bool (*rc_param_at_fn)(const void *ctx, size_t index, size_t n, rc_str *key,
                               rc_str *value);

/* The provider snapshot, valid during prepare. */
typedef struct rc_snapshot_view {
    size_t size;            /* sizeof as the host built it; check it is >= what you read */
    const void *ctx;        /* pass back to the callbacks */
    uint64_t generation;
    size_t provider_count;  /* providers 0..provider_count-1 */
    rc_str service;         /* the chain's service, or absent */
    /* A query parameter or derived key (protocol, host, port, path, address) of provider i. */
    rc_provider_lookup_fn provider_get;
    rc_param_count_fn provider_param_count;   /* number of query parameters of provider i */
    rc_param_at_fn provider_param_at;         /* parameter n (sorted by key) of provider i */
    rc_lookup_fn consumer_get;                /* the chain's consumer URL */
} rc_snapshot_view;

/* One call's request, valid during route. Lookups allocate nothing. */
typedef struct rc_request_view {
    size_t size;            /* sizeof as the host built it */
    const void *ctx;        /* pass back to the callbacks */
    rc_str method;          /* absent when the call has no method */
    rc_str service;         /* absent when the caller names none */
    rc_lookup_fn attachment;   /* attachments (sent to the provider) */
    rc_lookup_fn attribute;    /* attributes (local to the caller) */
    rc_lookup_fn consumer_get; /* this call's consumer URL */
    bool consumer_is_prepared; /* the call's consumer is the one prepare saw */
} rc_request_view;

/* name: absent when the chain entry names none (use your first router). */
typedef int32_t (*rc_create_fn)(rc_str name, rc_str config_json, rc_router **out, rc_buf *err);
typedef int32_t (*rc_prepare_fn)(const rc_router *router, const rc_snapshot_view *snapshot,
                                 rc_prepared **out, rc_buf *err);
/* Clear the bits of the providers the call must not use: bit (i % 64) of words[i / 64] is
 * provider i. Bits you set are ignored. explain is NULL unless the host records a trace. */
typedef int32_t (*rc_route_fn)(const rc_prepared *prepared, const rc_request_view *request,
                               uint64_t *words, size_t word_count, rc_buf *explain,
                               rc_buf *err);
typedef void (*rc_release_prepared_fn)(rc_prepared *prepared);
typedef void (*rc_release_router_fn)(rc_router *router);

/* The table routechain_plugin_v1() returns; static, valid while the library is loaded. */
typedef struct rc_plugin_v1 {
    size_t size;                 /* sizeof(rc_plugin_v1) as the plugin was built */
    uint32_t abi_version;        /* ROUTECHAIN_PLUGIN_ABI_VERSION */
    const rc_str *router_names;  /* at least one; the first is the default */
    size_t router_count;
    rc_create_fn create;
    rc_prepare_fn prepare;
    rc_route_fn route;
    rc_release_prepared_fn release_prepared;
    rc_release_router_fn release_router;
} rc_plugin_v1;

uint32_t routechain_plugin_abi_version(void);
const rc_plugin_v1 *routechain_plugin_v1(void);

#ifdef __cplusplus
}
#endif

#endif /* ROUTECHAIN_PLUGIN_H */
