/*
 * test_quantize_api.c - kz_quantize (kztts.h) as an embedder calls it, on the tiny
 * checkpoint (argv[1]).
 *
 *   - defaults (and params NULL): a q8_0 GGUF that loads; the progress callback runs on
 *     the caller's thread from (0, n) to (n, n) one tensor at a time, n = the report's
 *     tensor count; the report names its types and counts the packed codec weights;
 *   - cancelled from the progress callback after 3 tensors: KZ_STATUS_CANCELLED with a
 *     message, the old output file untouched, the library's temporary file gone, another
 *     writer's "<out>.partial-*" file of the same name kept, the report not filled;
 *   - a zero-initialised params struct with a type: that type is written.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kztts.h"
#include "test.h"

typedef struct progress_log {
    size_t n_calls, last_done, total, cancel_at;
    bool in_order;  /* each call's n_done is the one after the last, n_total fixed */
    bool on_caller; /* every call on the thread that called kz_quantize */
    pthread_t caller;
} progress_log;

static bool on_progress(size_t n_done, size_t n_total, void *user) {
    progress_log *l = user;
    l->in_order = l->in_order && n_done == l->n_calls && (!l->n_calls || n_total == l->total);
    l->on_caller = l->on_caller && pthread_equal(pthread_self(), l->caller);
    l->n_calls++;
    l->last_done = n_done;
    l->total = n_total;
    return n_done < l->cancel_at;
}

/* Entries of dir other than "." and "..". */
static int count_entries(const char *dir) {
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d)) {
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    }
    if (d) {
        closedir(d);
    }
    return n;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static bool holds_text(const char *path, const char *text) {
    char buf[64] = {0};
    FILE *f = fopen(path, "r");
    const size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) {
        fclose(f);
    }
    return n == strlen(text) && memcmp(buf, text, n) == 0;
}

/* Loads path and checks that its description names the recipe `type`. */
static void check_loads(const char *path, const char *type) {
    kz_model *m = NULL;
    CHECK_MSG(kz_model_load(path, NULL, &m) == KZ_OK, "%s: %s", path, kz_last_error());
    char want[32];
    snprintf(want, sizeof want, "recipe %s", type);
    CHECK_STR_CONTAINS(kz_model_describe(m), want);
    kz_model_free(m);
}

static void test_defaults(const char *tiny, const char *dir) {
    char out[300];
    snprintf(out, sizeof out, "%s/default.gguf", dir);
    kz_quantize_report report;
    progress_log l = {.in_order = true, .on_caller = true, .cancel_at = SIZE_MAX,
                      .caller = pthread_self()};
    kz_quantize_params p;
    kz_quantize_default_params(&p);
    p.progress = on_progress;
    p.progress_user = &l;
    p.report = &report;
    CHECK_MSG(kz_quantize(tiny, out, &p) == KZ_OK, "%s", kz_last_error());
    size_t n_tensors = 0;
    for (int i = 0; i < 5; i++) {
        n_tensors += report.types[i].n_tensors;
    }
    CHECK(l.in_order && l.on_caller && l.n_calls == l.total + 1 && l.last_done == l.total);
    CHECK(l.total > 0 && l.total == n_tensors);
    CHECK(strcmp(report.types[0].type, "F32") == 0 && strcmp(report.types[3].type, "Q8_0") == 0);
    CHECK(report.types[3].n_tensors > 0 && report.types[3].n_bytes > 0);
    CHECK(report.types[4].n_tensors == 0 && report.n_packed > 0 && report.seconds >= 0);
    check_loads(out, "q8_0");
    unlink(out);
    CHECK_MSG(kz_quantize(tiny, out, NULL) == KZ_OK, "%s", kz_last_error());
    check_loads(out, "q8_0");
    unlink(out);
}

static void test_cancel(const char *tiny, const char *dir) {
    char out[300], foreign[340];
    snprintf(out, sizeof out, "%s/cancel.gguf", dir);
    snprintf(foreign, sizeof foreign, "%s.partial-other", out);
    write_text(out, "old");
    write_text(foreign, "another writer's");
    kz_quantize_report report = {.n_packed = 77};
    progress_log l = {.in_order = true, .on_caller = true, .cancel_at = 3,
                      .caller = pthread_self()};
    kz_quantize_params p = {.type = KZ_QUANTIZE_Q4_0, .progress = on_progress,
                            .progress_user = &l, .report = &report};
    CHECK_EQ_INT(kz_quantize(tiny, out, &p), KZ_STATUS_CANCELLED);
    CHECK_STR_CONTAINS(kz_last_error(), "cancelled");
    CHECK(l.n_calls == 4 && l.last_done == 3);
    CHECK(holds_text(out, "old") && holds_text(foreign, "another writer's"));
    CHECK_EQ_INT(count_entries(dir), 2);
    CHECK(report.n_packed == 77);
    unlink(out);
    unlink(foreign);
}

static void test_zeroed(const char *tiny, const char *dir) {
    char out[300];
    snprintf(out, sizeof out, "%s/zeroed.gguf", dir);
    kz_quantize_params p = {0};
    p.type = KZ_QUANTIZE_Q4_MLP;
    CHECK_MSG(kz_quantize(tiny, out, &p) == KZ_OK, "%s", kz_last_error());
    check_loads(out, "q4_mlp");
    unlink(out);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_quantize_api TINY_DIR\n");
        return 2;
    }
    char dir[] = "/tmp/kz_test_quantize_api_XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_defaults(argv[1], dir);
    test_cancel(argv[1], dir);
    test_zeroed(argv[1], dir);
    CHECK_EQ_INT(count_entries(dir), 0);
    rmdir(dir);
    return test_main_result("test_quantize_api");
}
