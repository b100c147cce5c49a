/*
 * text_feed.c - streaming text input (see text_feed.h). The wrapping strings are
 * the official wrapper's; the ids come from the model's tokenizer.
 */
#include "synth/text_feed.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "text/sentences.h"

#define ROLE_PREFIX "<|im_start|>assistant\n"
#define ROLE_SUFFIX "<|im_end|>\n<|im_start|>assistant\n"

kz_status kz_text_feed_init(kz_text_feed *f, const kz_tokenizer *tok, kz_split_mode split,
                            kz_text_pull_fn pull, void *user) {
    memset(f, 0, sizeof *f);
    *f = (kz_text_feed){.tok = tok, .split = split, .pull = pull, .user = user};
    size_t room = sizeof ROLE_PREFIX + KZ_TEXT_FEED_BYTES + sizeof ROLE_SUFFIX;
    f->text = malloc(room);
    f->ids = malloc((KZ_TEXT_FEED_BYTES + 16) * sizeof *f->ids);
    if (!f->text || !f->ids) {
        kz_text_feed_free(f);
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory for streaming text");
    }
    memcpy(f->text, ROLE_PREFIX, sizeof ROLE_PREFIX - 1);
    return KZ_OK;
}

void kz_text_feed_free(kz_text_feed *f) {
    free(f->text);
    free(f->ids);
    memset(f, 0, sizeof *f);
}

/* Re-tokenizes the committed part: all of it when done, else the stable prefix. */
static kz_status commit(kz_text_feed *f) {
    size_t pre = sizeof ROLE_PREFIX - 1;
    char *user_text = f->text + pre;
    size_t n = f->n_bytes;
    size_t drop_tail = 0;
    if (f->done) {
        size_t bad = kz_utf8_invalid_at(user_text, n);
        if (bad < n) { // named in the user's text, not in its wrapping
            return kz_error_set(KZ_STATUS_BAD_INPUT,
                                "invalid UTF-8 in the streamed text at byte %zu", bad);
        }
        memcpy(user_text + n, ROLE_SUFFIX, sizeof ROLE_SUFFIX);
        n += sizeof ROLE_SUFFIX - 1;
        drop_tail = 5;
    } else {
        n = kz_tokenizer_stable_prefix(f->tok, user_text, n, f->split);
    }
    int32_t *ids;
    size_t n_ids;
    kz_status st = kz_tokenizer_encode(f->tok, f->text, pre + n, f->split, &ids, &n_ids);
    if (st != KZ_OK) {
        return st;
    }
    size_t n_user = n_ids >= 3 + drop_tail ? n_ids - 3 - drop_tail : 0;
    if (n_user > 0 && f->n_ids == 0) {
        // Final from here on: the stable prefix ends after a complete pre-token, so
        // the piece holding the role's "\n" cannot change.
        memcpy(f->role, ids, sizeof f->role);
    }
    if (n_user > f->n_ids) {
        memcpy(f->ids, ids + 3, n_user * sizeof *ids);
        f->n_ids = n_user;
    }
    free(ids);
    return KZ_OK;
}

kz_status kz_text_feed_need(kz_text_feed *f, size_t want) {
    while (f->n_ids < want && !f->done) {
        size_t pre = sizeof ROLE_PREFIX - 1, got = 0;
        bool done = false;
        if (!f->pull(f->text + pre + f->n_bytes, KZ_TEXT_FEED_BYTES - f->n_bytes, &got, &done,
                     f->user)) {
            return kz_error_set(KZ_STATUS_CANCELLED, "cancelled by the text callback");
        }
        if (got > KZ_TEXT_FEED_BYTES - f->n_bytes || (!done && f->n_bytes + got == KZ_TEXT_FEED_BYTES)) {
            return kz_error_set(KZ_STATUS_BAD_INPUT, "streamed text is longer than %u bytes",
                                KZ_TEXT_FEED_BYTES);
        }
        f->n_bytes += got;
        f->done = done;
        kz_status st = commit(f);
        if (st != KZ_OK) {
            return st;
        }
    }
    return KZ_OK;
}

/* n_bytes of s without a UTF-8 sequence cut off at its end. */
static size_t whole_chars(const char *s, size_t n_bytes) {
    for (size_t back = 1; back <= 4 && back <= n_bytes; back++) {
        unsigned char c = (unsigned char)s[n_bytes - back];
        if ((c & 0xC0) != 0x80) { // the last lead byte: its sequence's length
            size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
            return len > back ? n_bytes - back : n_bytes;
        }
    }
    return n_bytes;
}

bool kz_text_feed_blank(const kz_text_feed *f) {
    const char *user_text = f->text + sizeof ROLE_PREFIX - 1;
    return kz_text_is_blank(user_text, f->done ? f->n_bytes : whole_chars(user_text, f->n_bytes));
}
