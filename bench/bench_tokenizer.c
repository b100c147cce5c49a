/*
 * bench_tokenizer.c - text tokenizer throughput in MB/s.
 *
 *   bench_tokenizer TOKENIZER_DIR CORPUS [MB] [qwen2|mistral]
 *
 *   TOKENIZER_DIR (vocab.json, merges.txt, tokenizer_config.json; the corpus
 *   tests export one to build/tokenizer) -> kz_tokenizer_load (timed)
 *   CORPUS (e.g. tests/text/corpus.txt: 13 languages, emoji, code, numbers)
 *   repeated to MB megabytes (default 1) -> two measurements, best of 5:
 *     whole: the text in one kz_tokenizer_encode call (word cache on)
 *     lines: one call per corpus line, as a server sees short requests
 *   Times are thread CPU time (see now_s).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/error.h"
#include "text/tokenizer.h"

/* CPU time of this thread: the benchmark is single-threaded, and on a shared
 * machine wall time mostly measures the neighbours. */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static char *read_file(const char *path, size_t *n_bytes) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n > 0 ? malloc((size_t)n) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *n_bytes = buf ? (size_t)n : 0;
    return buf;
}

/* Encodes text[0..n) one '\n'-terminated line per call; returns the id count or -1. */
static long encode_lines(const kz_tokenizer *t, const char *text, size_t n, kz_split_mode mode) {
    long total = 0;
    for (size_t start = 0; start < n;) {
        const char *nl = memchr(text + start, '\n', n - start);
        size_t end = nl ? (size_t)(nl - text) : n;
        int32_t *ids;
        size_t n_ids;
        if (kz_tokenizer_encode(t, text + start, end - start, mode, &ids, &n_ids) != KZ_OK) {
            return -1;
        }
        free(ids);
        total += (long)n_ids;
        start = end + 1;
    }
    return total;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s TOKENIZER_DIR CORPUS [MB] [qwen2|mistral]\n", argv[0]);
        return 2;
    }
    double mb = argc > 3 ? atof(argv[3]) : 1.0;
    kz_split_mode mode =
        argc > 4 && strcmp(argv[4], "mistral") == 0 ? KZ_SPLIT_MISTRAL : KZ_SPLIT_QWEN2;
    double t0 = now_s();
    kz_tokenizer *t;
    if (kz_tokenizer_load(argv[1], &t) != KZ_OK) {
        fprintf(stderr, "load: %s\n", kz_error_get());
        return 1;
    }
    double load_s = now_s() - t0;
    size_t n_corpus;
    char *corpus = read_file(argv[2], &n_corpus);
    if (!corpus || mb <= 0) {
        fprintf(stderr, "cannot read %s\n", argv[2]);
        return 1;
    }
    size_t n_text = (size_t)(mb * 1e6);
    char *text = malloc(n_text);
    for (size_t i = 0; i < n_text; i += n_corpus) {
        memcpy(text + i, corpus, i + n_corpus <= n_text ? n_corpus : n_text - i);
    }
    // Cut at a line end so no UTF-8 character is split.
    while (n_text > 0 && text[n_text - 1] != '\n') {
        n_text--;
    }
    double best_whole = 1e9, best_lines = 1e9;
    size_t n_ids = 0;
    long n_ids_lines = 0;
    for (int rep = 0; rep < 5; rep++) {
        int32_t *ids;
        double s = now_s();
        if (kz_tokenizer_encode(t, text, n_text, mode, &ids, &n_ids) != KZ_OK) {
            fprintf(stderr, "encode: %s\n", kz_error_get());
            return 1;
        }
        double e = now_s() - s;
        free(ids);
        best_whole = e < best_whole ? e : best_whole;
        s = now_s();
        n_ids_lines = encode_lines(t, text, n_text, mode);
        e = now_s() - s;
        best_lines = e < best_lines ? e : best_lines;
    }
    double mbytes = (double)n_text / 1e6;
    printf("tokenizer load: %.0f ms (%zu ids)\n", 1e3 * load_s, kz_tokenizer_size(t));
    printf("text: %.2f MB from %s, split %s\n", mbytes, argv[2],
           mode == KZ_SPLIT_MISTRAL ? "mistral" : "qwen2");
    printf("whole text, one call: %7.1f MB/s  %6.2f M tokens/s  (%zu tokens, %.1f ms)\n",
           mbytes / best_whole, (double)n_ids / best_whole / 1e6, n_ids, 1e3 * best_whole);
    printf("one call per line:    %7.1f MB/s  %6.2f M tokens/s  (%ld tokens, %.1f ms)\n",
           mbytes / best_lines, (double)n_ids_lines / best_lines / 1e6, n_ids_lines,
           1e3 * best_lines);
    free(text);
    free(corpus);
    kz_tokenizer_free(t);
    return 0;
}
