/*
 * test_auth.c - tools/kztts/serve/auth.c: the key file (comments, blanks, CRLF, no key,
 * unreadable), which Authorization headers pass (the scheme in any case, blanks around
 * the token) and which do not (other keys, prefixes and extensions of a key, other
 * schemes, nothing), and no file accepting everything.
 */
#define _DEFAULT_SOURCE /* mkdtemp */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "serve/auth.h"
#include "test.h"

static char dir[] = "/tmp/kz_test_auth_XXXXXX";

/* A key file with text; its path (static). */
static const char *key_file(const char *name, const char *text) {
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return path;
}

static void test_keys(void) {
    char err[256] = "";
    auth *a = auth_load(key_file("keys", "# operators\n\nsk-first\n  sk-second  \r\n"
                                         "#sk-commented\nsk-third"),
                        err, sizeof err);
    CHECK_MSG(a != NULL, "auth_load: %s", err);
    if (!a) {
        return;
    }
    CHECK(auth_ok(a, "Bearer sk-first"));
    CHECK(auth_ok(a, "Bearer sk-second"));
    CHECK(auth_ok(a, "Bearer sk-third")); // the last line has no newline
    CHECK(auth_ok(a, "bearer sk-first"));
    CHECK(auth_ok(a, "BEARER   sk-first  "));
    CHECK(!auth_ok(a, NULL));
    CHECK(!auth_ok(a, ""));
    CHECK(!auth_ok(a, "Bearer"));
    CHECK(!auth_ok(a, "Bearer "));
    CHECK(!auth_ok(a, "sk-first"));
    CHECK(!auth_ok(a, "Basic sk-first"));
    CHECK(!auth_ok(a, "Bearersk-first"));
    CHECK(!auth_ok(a, "Bearer sk-firs"));
    CHECK(!auth_ok(a, "Bearer sk-first2"));
    CHECK(!auth_ok(a, "Bearer sk-FIRST"));
    CHECK(!auth_ok(a, "Bearer sk-commented"));
    CHECK(!auth_ok(a, "Bearer #sk-commented"));
    CHECK(!auth_ok(a, "Bearer operators"));
    CHECK(!auth_ok(a, "Bearer sk-first sk-second"));
    auth_free(a);
}

static void test_refused_files(void) {
    char buf[256] = "";
    const char *err = buf;
    CHECK(auth_load(key_file("empty", ""), buf, sizeof buf) == NULL);
    CHECK_STR_CONTAINS(err, "holds no key");
    buf[0] = '\0';
    CHECK(auth_load(key_file("comments", "# none yet\n\n   \n"), buf, sizeof buf) == NULL);
    CHECK_STR_CONTAINS(err, "holds no key");
    char missing[300];
    snprintf(missing, sizeof missing, "%s/missing", dir);
    buf[0] = '\0';
    CHECK(auth_load(missing, buf, sizeof buf) == NULL);
    CHECK_STR_CONTAINS(err, "cannot read");
    CHECK_STR_CONTAINS(err, "missing");
}

static void test_no_file(void) {
    CHECK(auth_ok(NULL, NULL));
    CHECK(auth_ok(NULL, "Bearer anything"));
    auth_free(NULL);
}

int main(void) {
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_keys();
    test_refused_files();
    test_no_file();
    const char *names[] = {"keys", "empty", "comments"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[300];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
    return test_main_result("test_auth");
}
