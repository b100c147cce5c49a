/*
 * speech_refusal.c - the request field a library refusal concerns (speech_refusal.h).
 *
 * message -> every whole word (letters, digits, '_') in order -> the first that is in the
 * table and whose request field a passed on -> that field's name. Whole words, so
 * "cp_top_k" is not "top_k"; fields the request left out are skipped, since a refusal of
 * a default is not the client's to fix.
 */
#include "speech_refusal.h"

#include <stdbool.h>
#include <string.h>

typedef enum { PASSED_TOP_K, PASSED_TOP_P, PASSED_TEMPERATURE, PASSED_PENALTY,
               PASSED_MAX_FRAMES, PASSED_LANGUAGE, PASSED_INSTRUCTIONS, PASSED_VOICE,
               PASSED_INPUT } passed;

/* The library's words (kz_request members and the nouns of its messages) and the
 * request field each stands for. "voice" is resolved to voice or ref_audio by how the
 * request named its voice. */
static const struct {
    const char *word;
    const char *field;
    passed when;
} WORDS[] = {
    {"top_k", "top_k", PASSED_TOP_K},
    {"top_p", "top_p", PASSED_TOP_P},
    {"temperature", "temperature", PASSED_TEMPERATURE},
    {"repetition_penalty", "repetition_penalty", PASSED_PENALTY},
    {"max_frames", "max_new_tokens", PASSED_MAX_FRAMES},
    {"language", "language", PASSED_LANGUAGE},
    {"instruct", "instructions", PASSED_INSTRUCTIONS},
    {"instruction", "instructions", PASSED_INSTRUCTIONS},
    {"speaker", "voice", PASSED_VOICE},
    {"voice", "voice", PASSED_VOICE},
    {"text", "input", PASSED_INPUT},
    {"utterance", "input", PASSED_INPUT},
};

static bool was_passed(const speech_args *a, passed p) {
    switch (p) {
    case PASSED_TOP_K: return a->top_k != 0;
    case PASSED_TOP_P: return a->top_p != 0.0f;
    case PASSED_TEMPERATURE: return a->temperature != 0.0f || a->greedy;
    case PASSED_PENALTY: return a->repetition_penalty != 0.0f;
    case PASSED_MAX_FRAMES: return a->max_frames != 0;
    case PASSED_LANGUAGE: return a->language != NULL;
    case PASSED_INSTRUCTIONS: return a->instructions != NULL;
    case PASSED_VOICE: return a->voice != NULL || a->ref_audio != NULL;
    case PASSED_INPUT: return a->input != NULL;
    }
    return false;
}

static bool word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* The field of the word w[0..n), or NULL. */
static const char *field_of(const speech_args *a, const char *w, size_t n) {
    for (size_t i = 0; i < sizeof WORDS / sizeof *WORDS; i++) {
        if (strlen(WORDS[i].word) == n && strncmp(WORDS[i].word, w, n) == 0 &&
            was_passed(a, WORDS[i].when)) {
            if (WORDS[i].when == PASSED_VOICE && a->ref_audio) {
                return "ref_audio"; // the voice was cloned from the request's audio
            }
            return WORDS[i].field;
        }
    }
    return NULL;
}

const char *speech_refusal_param(const speech_args *a, const char *message) {
    if (!a || !message) {
        return NULL;
    }
    for (const char *c = message; *c;) {
        while (*c && !word_char(*c)) {
            c++;
        }
        const char *w = c;
        while (word_char(*c)) {
            c++;
        }
        const char *field = c > w ? field_of(a, w, (size_t)(c - w)) : NULL;
        if (field) {
            return field;
        }
    }
    return NULL;
}
