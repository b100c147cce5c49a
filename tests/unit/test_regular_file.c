/*
 * test_regular_file.c - model files must be regular files (src/io/regular_file.c and its
 * users: the mappings, the text file reader, JSON files, the tokenizer's files).
 *
 * Dataflow: a mkdtemp directory with a regular file, a FIFO nobody writes to, a directory,
 * symlinks to each, and /dev/null -> kz_regular_file_open, kz_map_open, kz_text_file_read,
 * kz_json_load -> KZ_OK for the regular file (blocking reads, its size), else KZ_STATUS_IO
 * with "PATH: not a regular file (a FIFO)" and the like. Then a byte-level tokenizer
 * directory whose vocab.json, merges.txt or tokenizer_config.json is a FIFO ->
 * kz_tokenizer_load names that file. A FIFO that was waited on would hang: an alarm turns
 * that into a failure.
 */
#define _DEFAULT_SOURCE

#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "io/json.h"
#include "io/mapped_file.h"
#include "io/regular_file.h"
#include "io/text_file.h"
#include "runtime/error.h"
#include "test.h"
#include "text/tokenizer.h"

static char dir[] = "/tmp/kz_test_regular_XXXXXX";

static void path_of(char *out, size_t n, const char *name) {
    snprintf(out, n, "%s/%s", dir, name);
}

static void write_text(const char *name, const char *text) {
    char path[256];
    path_of(path, sizeof path, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* Every reader refuses path with a message naming it and `kind`. */
static void check_refused(const char *path, const char *kind) {
    char want[256];
    snprintf(want, sizeof want, "%s: not a regular file (%s)", path, kind);
    int fd = 7;
    uint64_t n_bytes = 7;
    CHECK_EQ_INT(kz_regular_file_open(path, &fd, &n_bytes), KZ_STATUS_IO);
    CHECK(fd == -1 && n_bytes == 0);
    CHECK_STR_CONTAINS(kz_last_error(), want);

    const uint8_t *map = (const uint8_t *)1;
    size_t n_map = 7;
    CHECK_EQ_INT(kz_map_open(path, &map, &n_map), KZ_STATUS_IO);
    CHECK(map == NULL && n_map == 0);
    CHECK_STR_CONTAINS(kz_last_error(), want);

    char *text = (char *)1;
    size_t n_text = 7;
    CHECK_EQ_INT(kz_text_file_read(path, 100, &text, &n_text), KZ_STATUS_IO);
    CHECK(text == NULL && n_text == 0);
    CHECK_STR_CONTAINS(kz_last_error(), want);

    cJSON *root = (cJSON *)1;
    CHECK_EQ_INT(kz_json_load(path, &root), KZ_STATUS_IO);
    CHECK(root == NULL);
    CHECK_STR_CONTAINS(kz_last_error(), want);
}

static void test_regular(void) {
    char path[256], link[256];
    write_text("config.json", "{\"a\": 1}");
    path_of(path, sizeof path, "config.json");
    path_of(link, sizeof link, "link.json");
    CHECK(symlink(path, link) == 0);
    const char *paths[] = {path, link};
    for (int i = 0; i < 2; i++) {
        int fd = -1;
        uint64_t n_bytes = 0;
        CHECK_EQ_INT(kz_regular_file_open(paths[i], &fd, &n_bytes), KZ_OK);
        CHECK(fd >= 0 && n_bytes == 8);
        CHECK_MSG(fd < 0 || (fcntl(fd, F_GETFL) & O_NONBLOCK) == 0, "%s: left non-blocking",
                  paths[i]);
        if (fd >= 0) {
            close(fd);
        }
        cJSON *root = NULL;
        CHECK_EQ_INT(kz_json_load(paths[i], &root), KZ_OK);
        CHECK(cJSON_GetObjectItem(root, "a") != NULL);
        cJSON_Delete(root);
    }
    int fd = 7;
    uint64_t n_bytes = 7;
    path_of(path, sizeof path, "absent.json");
    CHECK_EQ_INT(kz_regular_file_open(path, &fd, &n_bytes), KZ_STATUS_IO);
    CHECK(fd == -1 && n_bytes == 0);
    CHECK_STR_CONTAINS(kz_last_error(), "absent.json: cannot open");
}

static void test_special(void) {
    char fifo[256], link[256], sub[256];
    path_of(fifo, sizeof fifo, "model.safetensors");
    CHECK(mkfifo(fifo, 0600) == 0);
    check_refused(fifo, "a FIFO");
    path_of(link, sizeof link, "fifo_link.gguf");
    CHECK(symlink(fifo, link) == 0);
    check_refused(link, "a FIFO");
    path_of(sub, sizeof sub, "vocab.json");
    CHECK(mkdir(sub, 0700) == 0);
    check_refused(sub, "a directory");
    if (access("/dev/null", R_OK) == 0) {
        check_refused("/dev/null", "a character device");
    }
    unlink(link);
    unlink(fifo);
    rmdir(sub);
}

/* The GPT-2 byte-level spelling of byte b (UTF-8) into out. */
static void byte_token(int b, char *out) {
    int cp = b;
    if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) {
        int k = 0;
        for (int i = 0; i < b; i++) {
            k += !((i >= 33 && i <= 126) || (i >= 161 && i <= 172) || (i >= 174 && i <= 255));
        }
        cp = 256 + k;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = '\0';
    } else {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = '\0';
    }
}

/* A byte-level tokenizer directory, with `fifo_name` a FIFO instead of a file. */
static void test_tokenizer(const char *fifo_name) {
    static char vocab[8192];
    size_t n = 0;
    n += (size_t)snprintf(vocab + n, sizeof vocab - n, "{");
    for (int b = 0; b < 256; b++) {
        char tok[4];
        byte_token(b, tok);
        const char *esc = tok[0] == '"' ? "\\\"" : tok[0] == '\\' ? "\\\\" : tok;
        n += (size_t)snprintf(vocab + n, sizeof vocab - n, "%s\"%s\": %d", b ? ", " : "", esc, b);
    }
    snprintf(vocab + n, sizeof vocab - n, "}");
    const char *names[] = {"vocab.json", "merges.txt", "tokenizer_config.json"};
    const char *texts[] = {vocab, "#version: 0.2\n", "{\"added_tokens_decoder\": {}}"};
    char path[256];
    for (int i = 0; i < 3; i++) {
        path_of(path, sizeof path, names[i]);
        if (strcmp(names[i], fifo_name) == 0) {
            CHECK(mkfifo(path, 0600) == 0);
        } else {
            write_text(names[i], texts[i]);
        }
    }
    kz_tokenizer *t = (kz_tokenizer *)1;
    kz_status st = kz_tokenizer_load(dir, &t);
    CHECK_MSG(st == KZ_STATUS_IO, "%s as a FIFO: status %d (%s)", fifo_name, (int)st,
              kz_last_error());
    CHECK(t == NULL);
    char want[300];
    snprintf(want, sizeof want, "%s: not a regular file (a FIFO)", fifo_name);
    CHECK_STR_CONTAINS(kz_last_error(), want);
    for (int i = 0; i < 3; i++) {
        path_of(path, sizeof path, names[i]);
        unlink(path);
    }
}

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "test_regular_file: hung on a FIFO\n";
    (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
    _exit(1);
}

int main(void) {
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    signal(SIGALRM, on_alarm);
    alarm(60);
    test_regular();
    test_special();
    test_tokenizer("vocab.json");
    test_tokenizer("merges.txt");
    test_tokenizer("tokenizer_config.json");
    char path[256];
    path_of(path, sizeof path, "config.json");
    unlink(path);
    path_of(path, sizeof path, "link.json");
    unlink(path);
    rmdir(dir);
    return test_main_result("test_regular_file");
}
