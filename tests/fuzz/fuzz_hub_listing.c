/*
 * fuzz_hub_listing.c - libFuzzer target for the hub's tree listing and cache manifest
 * parsers (tools/kztts/hub_files.c).
 *
 * Dataflow: input bytes -> a NUL-terminated heap copy
 *   -> hub_listing_add_page twice on the same list (the second page repeats the first, so
 *      every entry must be skipped as already listed)
 *      -> on failure: one line of error text
 *      -> on success: every entry wanted, unique, its size <= 9e15 and its hash well formed
 *   -> hub_manifest_parse of the same bytes (must not crash; entries as above)
 *   -> the listed files printed as a manifest and parsed back: the same list.
 *
 * Seeds: tests/fuzz/corpus/hub_listing/; dictionary: tests/fuzz/hub_listing.dict. Any crash,
 * sanitizer report or abort() below is a bug in the parser.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hub_files.h"

#define REPO "owner/tiny"
#define REVISION "main"

static bool is_hex(const char *s, size_t n) {
    return strlen(s) == n && strspn(s, "0123456789abcdefABCDEF") == n;
}

/* Aborts unless every entry of f is one the parsers may return. */
static void check_files(const hub_files *f) {
    if (f->n < 0 || f->n > HUB_MAX_FILES) {
        abort();
    }
    for (int i = 0; i < f->n; i++) {
        const hub_file *e = &f->items[i];
        if (memchr(e->path, '\0', sizeof e->path) == NULL || !hub_wanted(e->path) ||
            hub_files_find(f, e->path) != e || e->size > (uint64_t)9e15) {
            abort();
        }
        if (e->lfs ? !is_hex(e->oid, 64) : !(e->oid[0] == '\0' || is_hex(e->oid, 40))) {
            abort();
        }
    }
}

static void check_round_trip(const hub_files *f) {
    char *text = hub_manifest_print(f, REPO, REVISION);
    if (!text) {
        return; // out of memory
    }
    hub_files back;
    hub_manifest_parse(text, REPO, REVISION, &back);
    free(text);
    if (back.n != f->n || back.complete != f->complete) {
        abort();
    }
    for (int i = 0; i < f->n; i++) {
        const hub_file *a = &f->items[i], *b = &back.items[i];
        if (strcmp(a->path, b->path) != 0 || a->size != b->size || strcmp(a->oid, b->oid) != 0 ||
            a->lfs != b->lfs) {
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) {
        return 0;
    }
    memcpy(text, data, size);
    text[size] = '\0';
    static hub_files listed, manifest;
    memset(&listed, 0, sizeof listed);
    char err[256];
    if (hub_listing_add_page(&listed, text, size, err, sizeof err) != 0) {
        if (err[0] == '\0' || strchr(err, '\n')) {
            abort(); // failures say why, in one line
        }
    } else {
        int n_first = listed.n;
        if (hub_listing_add_page(&listed, text, size, err, sizeof err) != 0 ||
            listed.n != n_first) {
            abort(); // the same page again adds nothing and cannot fail
        }
    }
    check_files(&listed);
    listed.complete = size % 2 == 1;
    check_round_trip(&listed);
    hub_manifest_parse(text, REPO, REVISION, &manifest);
    check_files(&manifest);
    free(text);
    return 0;
}
