/*
 * test_quantize_api.c - kz_quantize (kztts.h) as an embedder calls it, on the tiny
 * checkpoint (argv[1]).
 *
 *   - defaults (and params NULL): a q8_0 GGUF that loads; the progress callback runs on
 *     the caller's thread from (0, n) to (n, n) one tensor at a time, n = the report's
 *     tensor count, the (n, n) call once the file is complete on disk (a cancel there
 *     still keeps the old file); the report names its types and counts the packed codec
 *     weights;
 *   - cancelled from the progress callback after 3 tensors: KZ_STATUS_CANCELLED with a
 *     message, the old output file untouched, the library's temporary file gone, another
 *     writer's "<out>.partial-*" file of the same name kept, the report not filled;
 *   - a zero-initialised params struct with a type: that type is written;
 *   - an optional file (generation_config.json) replaced by a FIFO after the load
 *     validated it (at the load's last log message): KZ_STATUS_IO naming the file, no
 *     hang (an alarm ends the test if the open blocks), nothing written;
 *   - bad arguments (empty paths, a codec_forms that is no kz_precision) are
 *     KZ_STATUS_INVALID_ARGUMENT before anything is read or written.
 */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
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
    const char *dir;      /* the output's folder, or NULL */
    long long final_size; /* bytes of the temporary file at the (n, n) call, or -1 */
} progress_log;

/* Size of the one "*.partial-*" file in dir, or -1. */
static long long partial_size(const char *dir) {
    long long size = -1;
    DIR *d = opendir(dir);
    for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d)) {
        char path[600];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (strstr(e->d_name, ".partial-") && stat(path, &st) == 0) {
            size = (long long)st.st_size;
        }
    }
    if (d) {
        closedir(d);
    }
    return size;
}

static bool on_progress(size_t n_done, size_t n_total, void *user) {
    progress_log *l = user;
    if (l->dir && n_done == n_total) {
        l->final_size = partial_size(l->dir);
    }
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

/* Tensors of the tokenizer's stored BPE tables in a GGUF of a checkpoint with a tokenizer. */
enum { N_TOKENIZER_TABLES = 7 };

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
                      .caller = pthread_self(), .dir = dir, .final_size = -1};
    kz_quantize_params p;
    kz_quantize_default_params(&p);
    p.progress = on_progress;
    p.user = &l;
    p.report = &report;
    CHECK_MSG(kz_quantize(tiny, out, &p) == KZ_OK, "%s", kz_last_error());
    size_t n_tensors = 0;
    for (int i = 0; i < 5; i++) {
        n_tensors += report.types[i].n_tensors;
    }
    CHECK(l.in_order && l.on_caller && l.n_calls == l.total + 1 && l.last_done == l.total);
    // The last call comes with the file complete on disk, only the rename left: a cancel
    // (a signal) up to then keeps the old file, and none comes after the work is done.
    struct stat st;
    CHECK(stat(out, &st) == 0);
    CHECK_MSG(l.final_size == (long long)st.st_size, "at (n, n) the file had %lld of %lld bytes",
              l.final_size, (long long)st.st_size);
    // The writer also writes the tokenizer's stored BPE tables (tokenizer.bpe.*,
    // model/gguf_layout.h), integer tensors the report counts apart from the weights.
    CHECK_MSG(l.total > 0 && l.total == n_tensors + N_TOKENIZER_TABLES, "%zu written, %zu weights",
              l.total, n_tensors);
    CHECK(strcmp(report.tokenizer.type, "tokenizer") == 0);
    CHECK_EQ_INT(report.tokenizer.n_tensors, N_TOKENIZER_TABLES);
    CHECK(report.tokenizer.n_bytes > 256 * 4); // the byte ids alone are 1 KB
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
                            .user = &l, .report = &report};
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

/* Copies text file src to dst, replacing the first `from` with `to`. */
static void copy_replacing(const char *src, const char *dst, const char *from, const char *to) {
    char *text = calloc(1, 1 << 20);
    FILE *f = fopen(src, "rb");
    size_t n = f && text ? fread(text, 1, (1 << 20) - 1, f) : 0;
    if (f) {
        fclose(f);
    }
    char *at = text ? strstr(text, from) : NULL;
    CHECK_MSG(at != NULL, "%s lacks %s", src, from);
    FILE *out = fopen(dst, "wb");
    CHECK(out != NULL);
    if (at && out) {
        fwrite(text, 1, (size_t)(at - text), out);
        fputs(to, out);
        fputs(at + strlen(from), out);
    }
    if (out) {
        fclose(out);
    }
    free(text);
    (void)n;
}

typedef struct fifo_swap {
    const char *dir; /* the source checkpoint */
    bool done;
} fifo_swap;

/* At the load's warning (its last step, after every file was read): a FIFO in place of
 * generation_config.json. */
static void swap_in_fifo(kz_log_level level, const char *message, void *user) {
    fifo_swap *w = user;
    (void)level;
    if (w->done || !strstr(message, "does not spell")) {
        return;
    }
    char fifo[300], gen[300];
    snprintf(fifo, sizeof fifo, "%s/fifo", w->dir);
    snprintf(gen, sizeof gen, "%s/generation_config.json", w->dir);
    w->done = mkfifo(fifo, 0600) == 0 && rename(fifo, gen) == 0;
}

static void test_fifo_swapped(const char *tiny, const char *dir) {
    char src[300], from[400], to[400], out[300];
    snprintf(src, sizeof src, "%s/src", dir);
    CHECK(mkdir(src, 0700) == 0);
    static const char *const linked[] = {"model.safetensors", "speech_tokenizer",
                                         "generation_config.json", "vocab.json", "merges.txt",
                                         "tokenizer_config.json", "preprocessor_config.json"};
    for (size_t i = 0; i < sizeof linked / sizeof linked[0]; i++) {
        snprintf(from, sizeof from, "%s/%s", tiny, linked[i]);
        snprintf(to, sizeof to, "%s/%s", src, linked[i]);
        CHECK(symlink(from, to) == 0);
    }
    // An assistant id the tokenizer does not spell: the load warns once it is complete.
    snprintf(from, sizeof from, "%s/config.json", tiny);
    snprintf(to, sizeof to, "%s/config.json", src);
    copy_replacing(from, to, "\"assistant_token_id\": 77091", "\"assistant_token_id\": 5");
    snprintf(out, sizeof out, "%s/fifo.gguf", dir);
    fifo_swap w = {.dir = src};
    kz_log_set(swap_in_fifo, KZ_LOG_WARN, &w);
    alarm(120); // a blocking open of the FIFO ends the test here
    const kz_status st = kz_quantize(src, out, NULL);
    alarm(0);
    kz_log_set(NULL, KZ_LOG_WARN, NULL);
    CHECK(w.done);
    CHECK_EQ_INT(st, KZ_STATUS_IO);
    CHECK_STR_CONTAINS(kz_last_error(), "generation_config.json: not a regular file (a FIFO)");
    CHECK(access(out, F_OK) != 0);
    for (size_t i = 0; i < sizeof linked / sizeof linked[0]; i++) {
        snprintf(to, sizeof to, "%s/%s", src, linked[i]);
        unlink(to);
    }
    snprintf(to, sizeof to, "%s/config.json", src);
    unlink(to);
    CHECK_EQ_INT(count_entries(src), 0);
    rmdir(src);
}

static void test_bad_args(const char *tiny, const char *dir) {
    char out[300];
    snprintf(out, sizeof out, "%s/bad.gguf", dir);
    CHECK_EQ_INT(kz_quantize(tiny, "", NULL), KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "empty");
    CHECK_EQ_INT(kz_quantize("", out, NULL), KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "empty");
    const int forms[] = {-1, KZ_PRECISION_WINOGRAD_BF16 + 1};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        kz_quantize_params p = {.codec_forms = (kz_precision)forms[i]};
        CHECK_EQ_INT(kz_quantize(tiny, out, &p), KZ_STATUS_INVALID_ARGUMENT);
        CHECK_STR_CONTAINS(kz_last_error(), "codec_forms");
    }
    CHECK_EQ_INT(count_entries(dir), 0);
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
    test_fifo_swapped(argv[1], dir);
    test_bad_args(argv[1], dir);
    CHECK_EQ_INT(count_entries(dir), 0);
    rmdir(dir);
    return test_main_result("test_quantize_api");
}
