/*
 * text_feed.h - streaming text input for one utterance: pulls UTF-8 pieces
 * from the caller's kz_text_pull_fn and turns them into committed token ids.
 *
 *   pull -> text buffer (16 KB) -> stable prefix (kz_tokenizer_stable_prefix)
 *        -> tokenize "<|im_start|>assistant\n" + prefix, keep the first 3 ids as
 *           the role (as the official model slices them), the rest
 *        -> committed ids (only ever extended)
 * When the text is done, the whole wrapped string is tokenized and sliced as
 * for text given at once, so the role and the ids are exactly those of the
 * complete text (a leading newline of the text merges into the role's).
 */
#ifndef KZ_TEXT_FEED_H
#define KZ_TEXT_FEED_H

#include <stdbool.h>

#include "kztts.h"
#include "text/tokenizer.h"

#define KZ_TEXT_FEED_BYTES (16u << 10)

typedef struct kz_text_feed {
    const kz_tokenizer *tok;
    kz_split_mode split;
    kz_text_pull_fn pull;
    void *user;
    char *text;      /* [KZ_TEXT_FEED_BYTES + 1] */
    size_t n_bytes;
    int32_t role[3]; /* ids[0:3] of the wrapped string, set with the first committed id */
    int32_t *ids;    /* committed ids of the user text */
    size_t n_ids;
    bool done;       /* no more text will come */
} kz_text_feed;

kz_status kz_text_feed_init(kz_text_feed *f, const kz_tokenizer *tok, kz_split_mode split,
                            kz_text_pull_fn pull, void *user);
void kz_text_feed_free(kz_text_feed *f);

/* Pulls until at least `want` ids are committed or the text is done. Errors:
 * cancelled by the pull function, invalid UTF-8, text over 16 KB. */
kz_status kz_text_feed_need(kz_text_feed *f, size_t want);

/* Whether the text pulled so far is empty or only Unicode White_Space (kz_text_is_blank);
 * before the text is done a character cut at the end of the last piece is left out. */
bool kz_text_feed_blank(const kz_text_feed *f);

#endif
