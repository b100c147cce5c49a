/*
 * test_sentences.c - the sentence splitter and utterance packer (text/sentences.c).
 *
 * Dataflow: a literal or generated text -> kz_sentences_list (one span per
 *        sentence) or kz_sentences_split (packed under max_bytes) -> spans
 *        compared with hand-written sentence lists; every result also goes
 *        through check_spans: ordered, non-overlapping, trimmed, within the
 *        budget, valid UTF-8, only White_Space left between spans, and the
 *        spans' non-space bytes equal the text's.
 *
 * Covers: English abbreviations, initials, decimals, URLs, ellipses, quotes
 * and brackets after the mark; French and German abbreviations and the French
 * spaced guillemet; Chinese and Japanese without spaces (ASCII marks and
 * quotes too), Korean, Arabic, Urdu, Hindi, Armenian, Ethiopic, Spanish
 * inverted marks; mixed scripts; paragraphs, single newlines and list
 * numbers; empty and blank input; a 6,000-byte multilingual text packed into
 * 400 bytes (ends on sentence ends, greedy); over-long sentences cut at a
 * clause break, a space, a grapheme boundary (combining marks, ZWJ emoji,
 * flags, skin tones) or a code point; max_spans smaller than needed;
 * max_bytes 0; random texts and random bytes; linear time on 512 KiB inputs.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

#include "test.h"
#include "text/sentences.h"

#define MAX_TEST_SPANS 200000

static kz_span spans_buf[MAX_TEST_SPANS];

/* ---- checking spans ------------------------------------------------------ */

/* Unicode White_Space, written out again so the test does not share the code under test. */
static bool white_space(int32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

static bool combining(int32_t cp) {
    utf8proc_category_t c = utf8proc_category(cp);
    return c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME;
}

/* Decodes the code point at text[i] (valid UTF-8 expected): its length, or -1 if malformed. */
static long next_cp(const char *text, size_t n_bytes, size_t i, int32_t *cp) {
    utf8proc_int32_t c;
    utf8proc_ssize_t len =
        utf8proc_iterate((const uint8_t *)text + i, (utf8proc_ssize_t)(n_bytes - i), &c);
    *cp = c;
    return len > 0 ? (long)len : -1;
}

/* Copies the non-White_Space code points of text[b, e) to out; returns the new length. */
static size_t append_non_space(const char *text, size_t b, size_t e, char *out, size_t n_out) {
    for (size_t i = b; i < e;) {
        int32_t cp;
        long len = next_cp(text, e, i, &cp);
        if (len < 0) {
            return n_out;
        }
        if (!white_space(cp)) {
            memcpy(out + n_out, text + i, (size_t)len);
            n_out += (size_t)len;
        }
        i += (size_t)len;
    }
    return n_out;
}

/* Whether text[b, e) is valid UTF-8 made of White_Space only. */
static bool all_space(const char *text, size_t b, size_t e) {
    for (size_t i = b; i < e;) {
        int32_t cp;
        long len = next_cp(text, e, i, &cp);
        if (len < 0 || !white_space(cp)) {
            return false;
        }
        i += (size_t)len;
    }
    return true;
}

/* Whether text[b, e) is valid UTF-8 and, if max_bytes > 0, fits it or is one code point. */
static bool span_well_formed(const char *text, size_t b, size_t e, size_t max_bytes) {
    size_t n_cps = 0;
    int32_t cp = 0;
    for (size_t i = b; i < e; n_cps++) {
        long len = next_cp(text, e, i, &cp);
        if (len < 0) {
            return false;
        }
        i += (size_t)len;
    }
    return max_bytes == 0 || e - b <= max_bytes || n_cps == 1;
}

/* All invariants of a result on valid UTF-8 (see the header comment). `no_mark_cut` adds: no
 * span ends right before a combining mark. */
static void check_spans(const char *text, size_t n_bytes, size_t max_bytes, const kz_span *spans,
                        size_t n_spans, bool no_mark_cut) {
    char *got = malloc(n_bytes + 1);
    char *want = malloc(n_bytes + 1);
    size_t n_got = 0;
    size_t prev_end = 0;
    bool ok = true;
    for (size_t k = 0; k < n_spans && ok; k++) {
        kz_span s = spans[k];
        ok = s.begin >= prev_end && s.begin < s.end && s.end <= n_bytes;
        CHECK_MSG(ok, "span %zu [%zu, %zu) after %zu in %zu bytes", k, s.begin, s.end, prev_end,
                  n_bytes);
        if (!ok) {
            break;
        }
        int32_t first, last;
        next_cp(text, n_bytes, s.begin, &first);
        size_t j = s.end - 1;
        while (j > s.begin && ((uint8_t)text[j] & 0xC0) == 0x80) {
            j--;
        }
        next_cp(text, n_bytes, j, &last);
        CHECK_MSG(!white_space(first) && !white_space(last), "span %zu not trimmed", k);
        CHECK_MSG(all_space(text, prev_end, s.begin), "non-space text before span %zu", k);
        CHECK_MSG(span_well_formed(text, s.begin, s.end, max_bytes),
                  "span %zu: %zu bytes (max %zu) or bad UTF-8", k, s.end - s.begin, max_bytes);
        if (no_mark_cut && s.end < n_bytes) {
            int32_t after;
            next_cp(text, n_bytes, s.end, &after);
            CHECK_MSG(!combining(after), "span %zu ends before a combining mark", k);
        }
        n_got = append_non_space(text, s.begin, s.end, got, n_got);
        prev_end = s.end;
    }
    if (ok) {
        CHECK_MSG(all_space(text, prev_end, n_bytes), "non-space text after the last span");
        size_t n_want = append_non_space(text, 0, n_bytes, want, 0);
        CHECK_MSG(n_got == n_want && memcmp(got, want, n_got) == 0,
                  "spans' non-space content differs from the text's (%zu vs %zu bytes)", n_got,
                  n_want);
    }
    free(got);
    free(want);
}

/* Runs both functions at several budgets and checks every result. */
static void check_all_budgets(const char *text, size_t n_bytes) {
    static const size_t budgets[] = {0, 1, 2, 3, 4, 5, 7, 12, 18, 25, 40, 64, 100, 400, 5000};
    size_t n = kz_sentences_list(text, n_bytes, spans_buf, MAX_TEST_SPANS);
    CHECK(n <= MAX_TEST_SPANS);
    check_spans(text, n_bytes, 0, spans_buf, n, true);
    for (size_t k = 0; k < sizeof budgets / sizeof budgets[0]; k++) {
        n = kz_sentences_split(text, n_bytes, budgets[k], spans_buf, MAX_TEST_SPANS);
        CHECK(n <= MAX_TEST_SPANS);
        check_spans(text, n_bytes, budgets[k], spans_buf, n, budgets[k] >= 18);
    }
}

/* ---- expected splits ------------------------------------------------------ */

static void print_spans(const char *text, const kz_span *spans, size_t n_spans) {
    for (size_t k = 0; k < n_spans; k++) {
        fprintf(stderr, "    [%zu] \"%.*s\"\n", k, (int)(spans[k].end - spans[k].begin),
                text + spans[k].begin);
    }
}

/* Splits text (max_bytes < 0: kz_sentences_list) and compares the spans' text with `expected`
 * (NULL-terminated). */
static void expect(int line, const char *text, long max_bytes, const char *const *expected) {
    size_t n_bytes = strlen(text);
    size_t n = max_bytes < 0 ? kz_sentences_list(text, n_bytes, spans_buf, MAX_TEST_SPANS)
                             : kz_sentences_split(text, n_bytes, (size_t)max_bytes, spans_buf,
                                                  MAX_TEST_SPANS);
    size_t n_expected = 0;
    bool same = true;
    for (; expected[n_expected] != NULL; n_expected++) {
        const char *e = expected[n_expected];
        same = same && n_expected < n &&
               strlen(e) == spans_buf[n_expected].end - spans_buf[n_expected].begin &&
               memcmp(e, text + spans_buf[n_expected].begin, strlen(e)) == 0;
    }
    same = same && n == n_expected;
    CHECK_MSG(same, "line %d: \"%s\" (max %ld) gave %zu spans, expected %zu", line, text, max_bytes,
              n, n_expected);
    if (!same) {
        print_spans(text, spans_buf, n < 64 ? n : 64);
    }
    check_spans(text, n_bytes, max_bytes < 0 ? 0 : (size_t)max_bytes, spans_buf, n, true);
    check_all_budgets(text, n_bytes);
}

#define EXPECT_LIST(text, ...) expect(__LINE__, text, -1, (const char *const[]){__VA_ARGS__, NULL})
#define EXPECT_SPLIT(text, max, ...)                                                               \
    expect(__LINE__, text, max, (const char *const[]){__VA_ARGS__, NULL})
#define EXPECT_NONE(text, max) expect(__LINE__, text, max, (const char *const[]){NULL})

/* ---- sentence ends ------------------------------------------------------- */

static void test_english(void) {
    EXPECT_LIST("Mr. Smith met Dr. Jones. They talked about J. R. R. Tolkien for approx. 3 "
                "hours. It was fun, e.g. the jokes.",
                "Mr. Smith met Dr. Jones.",
                "They talked about J. R. R. Tolkien for approx. 3 hours.",
                "It was fun, e.g. the jokes.");
    EXPECT_LIST("Mrs. Brown, Ms. White, Prof. Plum and Sr. Green vs. Jr. Black etc. All of "
                "Acme Inc. and Foo Ltd. and Bar Co. were there. See Fig. 2 and No. 5 on St. "
                "Mark's list, i.e. Example Inc.",
                "Mrs. Brown, Ms. White, Prof. Plum and Sr. Green vs. Jr. Black etc. All of Acme "
                "Inc. and Foo Ltd. and Bar Co. were there.",
                "See Fig. 2 and No. 5 on St. Mark's list, i.e. Example Inc.");
    EXPECT_LIST("No. I won't go. See No. 5 on the list.", "No.", "I won't go.",
                "See No. 5 on the list.");
    EXPECT_LIST("So did I. Then we left. I. M. Pei designed it.", "So did I.", "Then we left.",
                "I. M. Pei designed it.");
    EXPECT_LIST("The U.S.A. is big. The U.S. Army is too. It was 5 p.m. and late.",
                "The U.S.A. is big.", "The U.S. Army is too.", "It was 5 p.m. and late.");
    EXPECT_LIST("We met at 10 a.m. He said it takes 5 min. or so.", "We met at 10 a.m.",
                "He said it takes 5 min. or so.");
    EXPECT_LIST("I went home. then I slept.", "I went home.", "then I slept.");
}

static void test_numbers_and_urls(void) {
    EXPECT_LIST("Pi is 3.14159. Visit www.example.com. Or https://example.com/a?b=1. Done.",
                "Pi is 3.14159.", "Visit www.example.com.", "Or https://example.com/a?b=1.",
                "Done.");
    EXPECT_LIST("It costs $1,234.56 today. Version 2.0.1 shipped.", "It costs $1,234.56 today.",
                "Version 2.0.1 shipped.");
    EXPECT_LIST("I counted 42. Then I stopped.", "I counted 42.", "Then I stopped.");
    EXPECT_LIST("1. Buy milk.\n2. Eat it.\nDone. 3. Sleep well.", "1. Buy milk.", "2. Eat it.",
                "Done.", "3. Sleep well.");
    EXPECT_LIST("Chapter one ends here.\nII. The Return", "Chapter one ends here.",
                "II. The Return");
}

static void test_ellipses_and_quotes(void) {
    EXPECT_LIST("Wait... what? I don't know... Maybe tomorrow… or not. End…", "Wait... what?",
                "I don't know...", "Maybe tomorrow… or not.", "End…");
    EXPECT_LIST("\"Hi.\" she said. 'Really?!' he asked. (See above.) Next. He said \"Go!\" "
                "Then left.",
                "\"Hi.\"", "she said.", "'Really?!'", "he asked.", "(See above.)", "Next.",
                "He said \"Go!\"", "Then left.");
    EXPECT_LIST("He asked (why?) and left. (Done.) Next.", "He asked (why?) and left.", "(Done.)",
                "Next.");
    EXPECT_LIST("“Hello.” She smiled. [Note: see below.] OK!?", "“Hello.”", "She smiled.",
                "[Note: see below.]", "OK!?");
    EXPECT_LIST("**Done.** Next one. _Really?_ Yes. Wait . . . what? Why ? ! OK.", "**Done.**",
                "Next one.", "_Really?_", "Yes.", "Wait . . . what?", "Why ? !", "OK.");
}

static void test_french_german_spanish(void) {
    EXPECT_LIST("M. Dupont et Mme. Martin sont là. Voir p. ex. la page 3. Mlle. Roux aussi.",
                "M. Dupont et Mme. Martin sont là.", "Voir p. ex. la page 3.", "Mlle. Roux aussi.");
    EXPECT_LIST("« Bonjour ! » dit-il. Vraiment ? Oui.", "« Bonjour ! »", "dit-il.", "Vraiment ?",
                "Oui.");
    EXPECT_LIST("Das ist z.B. ein Test. Herr Dr. Müller wohnt in Nr. 5, bzw. in Nr. 7. Wir "
                "kommen am 3. Oktober. Das war's.",
                "Das ist z.B. ein Test.", "Herr Dr. Müller wohnt in Nr. 5, bzw. in Nr. 7.",
                "Wir kommen am 3. Oktober.", "Das war's.");
    EXPECT_LIST("„Hallo.“ Er ging. »Wirklich?« Ja, d.h. nein usw. und so weiter.", "„Hallo.“",
                "Er ging.", "»Wirklich?«", "Ja, d.h. nein usw. und so weiter.");
    EXPECT_LIST("¿Cómo estás? ¡Muy bien! La Sra. López llegó.", "¿Cómo estás?", "¡Muy bien!",
                "La Sra. López llegó.");
}

static void test_cjk(void) {
    EXPECT_LIST("你好。今天天气很好！我们去公园吧？", "你好。", "今天天气很好！", "我们去公园吧？");
    EXPECT_LIST("こんにちは。「元気？」と聞いた。はい、元気です！", "こんにちは。",
                "「元気？」と聞いた。", "はい、元気です！");
    EXPECT_LIST("３．１４は円周率です。そうです．", "３．１４は円周率です。", "そうです．");
    EXPECT_LIST("你好!我们走吧.好的", "你好!", "我们走吧.", "好的");
    EXPECT_LIST("他说：“你好。”然后走了。", "他说：“你好。”", "然后走了。");
    EXPECT_LIST("我说了。\"走吧\"他说。", "我说了。", "\"走吧\"他说。");
    EXPECT_LIST("他说：\"你好。\"然后走了。", "他说：\"你好。\"", "然后走了。");
    EXPECT_LIST("他看了3.5本书……我不知道。", "他看了3.5本书……我不知道。");
    EXPECT_LIST("안녕하세요. 저는 학생입니다. 만나서 반갑습니다.", "안녕하세요.",
                "저는 학생입니다.", "만나서 반갑습니다.");
    EXPECT_LIST("네. 알겠습니다!", "네.", "알겠습니다!");
}

static void test_other_scripts(void) {
    EXPECT_LIST("مرحبا. كيف حالك؟ أنا بخير.", "مرحبا.", "كيف حالك؟", "أنا بخير.");
    EXPECT_LIST("یہ کتاب ہے۔ وہ قلم ہے۔", "یہ کتاب ہے۔", "وہ قلم ہے۔");
    EXPECT_LIST("मैं घर जा रहा हूँ। तुम कहाँ हो?", "मैं घर जा रहा हूँ।", "तुम कहाँ हो?");
    EXPECT_LIST("तुम कहाँ हो? ठीक है॥ हाँ।", "तुम कहाँ हो?", "ठीक है॥", "हाँ।");
    EXPECT_LIST("मैं घर जा रहा हूँ।तुम कहाँ हो?", "मैं घर जा रहा हूँ।", "तुम कहाँ हो?");
    EXPECT_LIST("Բարեւ։ Ինչպես ես։", "Բարեւ։", "Ինչպես ես։");
    EXPECT_LIST("ሰላም። እንዴት ነህ፧", "ሰላም።", "እንዴት ነህ፧");
    EXPECT_LIST("Привет. Как дела? Т. е. всё хорошо.", "Привет.", "Как дела?", "Т. е. всё хорошо.");
    EXPECT_LIST("Τι κάνεις; Καλά. Εσύ\u037e Ναι; όχι", "Τι κάνεις;", "Καλά.", "Εσύ\u037e", "Ναι;",
                "όχι");
    EXPECT_LIST("Note; not an end. 3;4", "Note; not an end.", "3;4");
}

static void test_mixed_and_lines(void) {
    EXPECT_LIST("Hello world. 你好世界。Bonjour le monde ! مرحبا بالعالم. नमस्ते दुनिया।",
                "Hello world.", "你好世界。", "Bonjour le monde !", "مرحبا بالعالم.",
                "नमस्ते दुनिया।");
    EXPECT_LIST("Title\nFirst line\n\nSecond paragraph. Two sentences.\r\n- item one\n"
                "- item two\u2029Last",
                "Title", "First line", "Second paragraph.", "Two sentences.", "- item one",
                "- item two", "Last");
    EXPECT_LIST("  \t Leading and trailing.  \n\n ", "Leading and trailing.");
    EXPECT_NONE("", -1);
    EXPECT_NONE("   \n\t  \u3000 \r\n\u00a0", -1);
    EXPECT_NONE("", 0);
    EXPECT_NONE(" \n ", 0);
    EXPECT_NONE("\u2028\u2029 ", 400);
    CHECK_EQ_INT(kz_sentences_split(NULL, 0, 10, NULL, 0), 0);
    CHECK_EQ_INT(kz_sentences_list(NULL, 0, NULL, 0), 0);
}

/* ---- packing and cutting --------------------------------------------------- */

static void test_packing(void) {
    EXPECT_SPLIT("  Hello. World.  \n\n Again.  ", 0, "Hello. World.  \n\n Again.");
    EXPECT_SPLIT("One. Two. Three. Four.", 10, "One. Two.", "Three.", "Four.");
    EXPECT_SPLIT("One. Two. Three. Four.", 16, "One. Two. Three.", "Four.");
    EXPECT_SPLIT("One. Two.\n\nThree.", 100, "One. Two.\n\nThree.");
    // The remainder of a cut sentence shares a span with the next sentence.
    EXPECT_SPLIT("Short. A rather long sentence here. End.", 20, "Short.", "A rather long",
                 "sentence here. End.");
}

static void test_cuts(void) {
    EXPECT_SPLIT("One two three, four five six, seven eight nine, ten eleven twelve.", 30,
                 "One two three, four five six,", "seven eight nine,", "ten eleven twelve.");
    EXPECT_SPLIT("It costs 1,000,000 dollars at 10:30 today.", 20, "It costs 1,000,000",
                 "dollars at 10:30", "today.");
    EXPECT_SPLIT("He said \"yes,\" and then \"no,\" and left.", 20, "He said \"yes,\"",
                 "and then \"no,\"", "and left.");
    EXPECT_SPLIT("alpha beta gamma delta epsilon", 12, "alpha beta", "gamma delta", "epsilon");
    EXPECT_SPLIT("我们今天去公园，然后去吃饭，最后回家休息。", 30, "我们今天去公园，",
                 "然后去吃饭，", "最后回家休息。");
    EXPECT_SPLIT("éééééééééé", 5, "éé", "éé", "éé", "éé", "éé");
    EXPECT_SPLIT("e\u0301e\u0301e\u0301e\u0301e\u0301e\u0301", 7, "e\u0301e\u0301",
                 "e\u0301e\u0301", "e\u0301e\u0301");
    EXPECT_SPLIT("一二三四五六七八九十", 10, "一二三", "四五六", "七八九", "十");
    EXPECT_SPLIT("👨‍👩‍👧👨‍👩‍👧👨‍👩‍👧", 20, "👨‍👩‍👧",
                 "👨‍👩‍👧", "👨‍👩‍👧");
    EXPECT_SPLIT("🇫🇷🇩🇪🇯🇵", 12, "🇫🇷", "🇩🇪", "🇯🇵");
    EXPECT_SPLIT("👍🏽👍🏽👍🏽", 10, "👍🏽", "👍🏽", "👍🏽");
    EXPECT_SPLIT("你好", 2, "你", "好");
    EXPECT_SPLIT("word—word—word", 12, "word—", "word—word");
}

/* A grapheme cluster longer than the budget (one letter, ten marks) falls back to code points. */
static void test_zalgo(void) {
    char text[64];
    size_t n_bytes = 0;
    text[n_bytes++] = 'a';
    for (int k = 0; k < 10; k++) {
        text[n_bytes++] = (char)0xCC; // U+0300
        text[n_bytes++] = (char)0x80;
    }
    size_t n = kz_sentences_split(text, n_bytes, 8, spans_buf, MAX_TEST_SPANS);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(spans_buf[0].end - spans_buf[0].begin, 7);
    check_spans(text, n_bytes, 8, spans_buf, n, false);
}

static void test_max_spans(void) {
    const char *text = "One. Two. Three. Four. Five.";
    kz_span spans[3] = {{0, 0}, {0, 0}, {777, 777}};
    CHECK_EQ_INT(kz_sentences_list(text, strlen(text), spans, 2), 5);
    CHECK_EQ_INT(spans[0].begin, 0);
    CHECK_EQ_INT(spans[0].end, 4);
    CHECK_EQ_INT(spans[1].begin, 5);
    CHECK_EQ_INT(spans[1].end, 9);
    CHECK_EQ_INT(spans[2].begin, 777);
    CHECK_EQ_INT(kz_sentences_split(text, strlen(text), 6, spans, 2), 5);
    CHECK_EQ_INT(spans[2].end, 777);
    CHECK_EQ_INT(kz_sentences_split(text, strlen(text), 6, NULL, 0), 5);
    CHECK_EQ_INT(kz_sentences_split(text, strlen(text), 6, NULL, 9), 5);
    CHECK_EQ_INT(kz_sentences_list(text, strlen(text), NULL, 0), 5);
}

/* ---- a long multilingual text ------------------------------------------------ */

static uint32_t rng_state = 12345;

static uint32_t rng_next(void) {
    rng_state = rng_state * 1664525u + 1013904223u;
    return rng_state >> 8;
}

static const char *const POOL[] = {
    "Mr. Smith went to Washington on Jan. 5 with Dr. Jones.",
    "The price rose by 3.5% to $1,234.56, i.e. a record.",
    "Visit www.example.com for details!",
    "你好。",
    "今天天气很好！我们去公园吧？",
    "こんにちは、世界。「元気？」と聞いた。",
    "안녕하세요. 저는 학생입니다.",
    "Das ist z.B. ein Test, oder?",
    "M. Dupont arrive à 10 h. Il est en retard.",
    "مرحبا، كيف حالك؟",
    "मैं घर जा रहा हूँ।",
    "\"Really?\" she asked.",
    "Wait... what?",
    "Héllo wörld — naïve café, crème brûlée and piña colada are on the menu today.",
    "J. R. R. Tolkien wrote a long book; it has many chapters, maps, songs and appendices.",
};

static size_t build_long_text(char *text, size_t capacity, size_t min_bytes) {
    size_t n_bytes = 0;
    while (n_bytes < min_bytes) {
        const char *s = POOL[rng_next() % (sizeof POOL / sizeof POOL[0])];
        uint32_t gap = rng_next() % 16;
        const char *sep = gap == 0 ? "\n\n" : gap == 1 ? "\n" : " ";
        size_t n = strlen(s);
        if (n_bytes + n + 2 >= capacity) {
            break;
        }
        memcpy(text + n_bytes, s, n);
        n_bytes += n;
        memcpy(text + n_bytes, sep, strlen(sep));
        n_bytes += strlen(sep);
    }
    return n_bytes;
}

/* Whether some sentence span starts (want_begin) or ends at byte `at`. */
static bool is_sentence_edge(const kz_span *sentences, size_t n, size_t at, bool want_begin) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        size_t v = want_begin ? sentences[mid].begin : sentences[mid].end;
        if (v == at) {
            return true;
        }
        if (v < at) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return false;
}

static void test_long_text(void) {
    static char text[8192];
    static kz_span sentences[4096];
    size_t n_bytes = build_long_text(text, sizeof text, 6000);
    CHECK(n_bytes >= 6000);
    size_t n_sentences = kz_sentences_list(text, n_bytes, sentences, 4096);
    CHECK(n_sentences > 100 && n_sentences < 4096);
    size_t n = kz_sentences_split(text, n_bytes, 400, spans_buf, MAX_TEST_SPANS);
    CHECK(n >= n_bytes / 400 && n < n_sentences / 4);
    check_spans(text, n_bytes, 400, spans_buf, n, true);
    for (size_t k = 0; k < n; k++) {
        CHECK_MSG(is_sentence_edge(sentences, n_sentences, spans_buf[k].begin, true) &&
                      is_sentence_edge(sentences, n_sentences, spans_buf[k].end, false),
                  "span %zu [%zu, %zu) does not start and end on sentence edges", k,
                  spans_buf[k].begin, spans_buf[k].end);
    }
    // Greedy: the next span's first sentence would not have fit into this span.
    size_t s = 0;
    for (size_t k = 0; k + 1 < n; k++) {
        while (s < n_sentences && sentences[s].begin < spans_buf[k + 1].begin) {
            s++;
        }
        CHECK_MSG(s < n_sentences && sentences[s].end - spans_buf[k].begin > 400,
                  "span %zu could have taken the next sentence", k);
    }
    check_all_budgets(text, n_bytes);
}

/* ---- random input --------------------------------------------------------------- */

static const char *const PIECES[] = {
    "a",  "B",      "é",  "e\u0301", " ",    "  ", "\n", ".",
    "!",  "?",      "…",  "。",      "「",   "」", "\"", "'",
    "(",  ")",      "，", ",",       "Mr",   "3",  "你", "👨‍👩‍👧",
    "🇫🇷", "\u3000", "؟",  "।",       "z.B",  "と", "»",  "«",
    "—",  "．",     "１", ":",       "\r\n", "I",  "No", "ok",
    "Τ",  ";",      "*",  " . ",     "a.m",  "ü",
};

static void test_random_texts(void) {
    static char text[4096];
    for (int round = 0; round < 400; round++) {
        size_t n_bytes = 0;
        size_t n_pieces = rng_next() % 120;
        for (size_t k = 0; k < n_pieces; k++) {
            const char *p = PIECES[rng_next() % (sizeof PIECES / sizeof PIECES[0])];
            memcpy(text + n_bytes, p, strlen(p));
            n_bytes += strlen(p);
        }
        check_all_budgets(text, n_bytes);
    }
}

/* Malformed UTF-8 must still give ordered, non-empty spans inside the text. */
static void test_random_bytes(void) {
    static char text[512];
    static const size_t budgets[] = {0, 1, 3, 7, 50};
    for (int round = 0; round < 2000; round++) {
        size_t n_bytes = rng_next() % sizeof text;
        for (size_t k = 0; k < n_bytes; k++) {
            uint32_t r = rng_next();
            const char *special = " .!?\n\xe3\x80\x82\xcc\x81";
            text[k] = r % 4 == 0 ? special[r % 10] : (char)(r & 0xFF);
        }
        for (size_t b = 0; b < sizeof budgets / sizeof budgets[0]; b++) {
            size_t n = kz_sentences_split(text, n_bytes, budgets[b], spans_buf, MAX_TEST_SPANS);
            size_t prev_end = 0;
            bool ok = n <= MAX_TEST_SPANS;
            for (size_t k = 0; k < n && ok; k++) {
                ok = spans_buf[k].begin >= prev_end && spans_buf[k].begin < spans_buf[k].end &&
                     spans_buf[k].end <= n_bytes;
                prev_end = spans_buf[k].end;
            }
            CHECK(ok);
        }
    }
}

/* ---- linear time -------------------------------------------------------------- */

static void test_linear_time(void) {
    static const char *const UNITS[] = {
        "Mr. ", ".", "!", " ", "\"", "a", "a, ", "e\u0301", "。」", "1. ", "...",
    };
    size_t n_bytes = 512u << 10;
    char *text = malloc(n_bytes);
    clock_t start = clock();
    for (size_t u = 0; u < sizeof UNITS / sizeof UNITS[0]; u++) {
        size_t unit_bytes = strlen(UNITS[u]);
        size_t n = 0;
        while (n + unit_bytes <= n_bytes) {
            memcpy(text + n, UNITS[u], unit_bytes);
            n += unit_bytes;
        }
        // One early comma, then a long run without breaks: the worst case for cutting.
        if (u == 5) {
            text[1] = ',';
            text[2] = ' ';
        }
        size_t n_list = kz_sentences_list(text, n, spans_buf, MAX_TEST_SPANS);
        size_t n_split = kz_sentences_split(text, n, 400, spans_buf, MAX_TEST_SPANS);
        bool blank = UNITS[u][0] == ' ';
        CHECK(blank ? n_list == 0 && n_split == 0 : n_list > 0 && n_split > 0);
    }
    double seconds = (double)(clock() - start) / CLOCKS_PER_SEC;
    printf("linear time: 11 texts of 512 KiB in %.2f s\n", seconds);
    CHECK_MSG(seconds < 20.0, "%.2f s", seconds);
    free(text);
}

int main(void) {
    test_english();
    test_numbers_and_urls();
    test_ellipses_and_quotes();
    test_french_german_spanish();
    test_cjk();
    test_other_scripts();
    test_mixed_and_lines();
    test_packing();
    test_cuts();
    test_zalgo();
    test_max_spans();
    test_long_text();
    test_random_texts();
    test_random_bytes();
    test_linear_time();
    return test_main_result("test_sentences");
}
