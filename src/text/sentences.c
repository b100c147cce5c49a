/*
 * sentences.c - sentence ends in many scripts, and packing sentences into
 * utterances of at most max_bytes bytes.
 *
 *   text --scanner_next: walk code points--> raw sentence [begin, end)
 *     a line break (LF, VT, FF, CR, NEL, LS, PS) always ends a sentence
 *     an end mark starts a run: marks, closers, combining marks ("?!", ".)",
 *     "。」", "...\"") --run_ends_sentence--> end after the run, or go on
 *   raw sentence --trim White_Space--> sentence (dropped when empty)
 *   sentences --packer_add: join while <= max_bytes; cut longer ones
 *     (find_cut)--> spans
 *
 * End marks. Strong marks end a sentence with or without a following space:
 * CJK 。｡！？．, Arabic ؟ ۔, Devanagari । ॥, Armenian ։, Ethiopic ። ፧,
 * Myanmar ။, Khmer ។ (a full-width ． between digits is a decimal point).
 * Latin marks . … ! ? ‼ ⁇ ⁈ ⁉ ‽ end one only when the run is followed by a
 * space, a line break or the end of text, so 3.14, e.g.x, www.example.com and
 * U.S.A. inside a token never split; or when the run sits between CJK
 * characters ("你好!我们"), as Chinese text often uses ASCII marks unspaced.
 * A ';' (or U+037E) after a Greek letter is the Greek question mark; other
 * semicolons and Spanish ¿ ¡ are not end marks. When spaces separate two
 * Latin marks (". . .", "? !") the last one decides. Thai and other scripts
 * without end marks have no sentence ends: long runs are cut at spaces.
 *
 * Closers. After a mark the run takes ) ] } 」 』 ） » ” ’ and every other
 * Pe/Pf character, ASCII '"' and '\'', Pi quotes (German “, French «) and
 * Markdown emphasis * _, so '"Hi." she said' gives '"Hi."' and 'she said',
 * and "**Done.** Next" splits. After a strong mark a Pi quote, '\'', * or _
 * is taken only when no letter or digit follows it (else it
 * opens the next sentence), and an ASCII '"' only when one is open on this
 * line (counted by parity), since CJK text uses '"' both ways without spaces.
 * A Pe/Pf closer after a space is taken when no letter follows it, for the
 * French « Bonjour ! » dit-il. After a strong mark and a closer, Japanese
 * quotative と continues the sentence (「元気？」と聞いた。).
 *
 * A Latin period does not end the sentence when, after the spaces,
 *   - an abbreviation from the table below, a single letter (initials:
 *     J. R. R. Tolkien; "I" only before another initial) or dotted letters
 *     (e.g, i.e, z.B, d.h, U.S.A) is followed by a letter or digit; the
 *     "number" abbreviations (No. Nr. Fig. Jan. ...) only by a digit, so
 *     "No. I won't." splits; units and times (a.m. p.m. min. hrs. pct. ...)
 *     only by a lower-case letter, so "at 10 a.m. He said" splits;
 *   - "...", "…" or a lone " ." is followed by a lower-case letter ("Wait...
 *     what?", "Wait . . . what?");
 *   - the token is the sentence's first and a list number ("1." "2.3."
 *     "IV."): a list item stays whole with its number, "Done. 2. Next" gives
 *     "Done." and "2. Next"; a number later in the sentence ends it ("I
 *     counted 42. Then");
 *   - a number of up to 4 digits is followed by a German month name or
 *     Jahrhundert (the ordinal in "am 3. Oktober"). Other German ordinals
 *     ("der 5. Platz") do split: no lexicon here.
 * Any other period before a lower-case letter ends the sentence. Any Latin
 * run that ends in a closing bracket does not end it before a lower-case
 * letter ("He asked (why?) and left."); one that ends in a quote does.
 *
 * Cutting a sentence longer than max_bytes: the last clause break within the
 * budget (, ; : followed by a space, so 1,000 and 10:30 are not breaks; — ;
 * – followed by a space; CJK ，、；：｡､; Arabic ، ؛; Ethiopic ፣ ፤; Armenian ՝;
 * with any closers after it), else the last space, else the last extended
 * grapheme cluster boundary (utf8proc, UAX #29: combining marks, ZWJ emoji,
 * flags, Hangul jamo stay whole), else the last code point boundary that is
 * not before a combining mark, ZWJ or emoji modifier, else the last code point
 * boundary. The remainder may share a span with the next sentences.
 *
 * Linear time: each code point is decoded a bounded number of times (look-back
 * for abbreviations stops after MAX_TOKEN_BYTES; each cut window is rescanned
 * at most twice because the next cut lies beyond the previous window).
 */
#include "text/sentences.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <utf8proc.h>

#define NO_CP (-1)         // "no code point": before the start or past the end
#define REPLACEMENT 0xFFFD // what a malformed byte decodes to
#define MAX_TOKEN_BYTES 32 // look-back limit for the word before a period
#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

typedef struct text_ref {
    const uint8_t *bytes;
    size_t n_bytes;
} text_ref;

/* ---- UTF-8 ------------------------------------------------------------- */

/* Decodes the code point at byte i (< n_bytes) into *cp and returns its length.
 * A byte that does not start a well-formed sequence decodes as U+FFFD of length
 * 1, so malformed input is walked safely. */
static size_t decode(const text_ref *t, size_t i, int32_t *cp) {
    static const int32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    const uint8_t *s = t->bytes + i;
    uint8_t b0 = s[0];
    size_t len = b0 < 0x80             ? 1
                 : (b0 & 0xE0) == 0xC0 ? 2
                 : (b0 & 0xF0) == 0xE0 ? 3
                 : (b0 & 0xF8) == 0xF0 ? 4
                                       : 0;
    int32_t c = len == 1 ? b0 : len == 2 ? (b0 & 0x1F) : len == 3 ? (b0 & 0x0F) : (b0 & 0x07);
    if (len == 0 || len > t->n_bytes - i) {
        *cp = REPLACEMENT;
        return 1;
    }
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80) {
            *cp = REPLACEMENT;
            return 1;
        }
        c = (c << 6) | (s[k] & 0x3F);
    }
    bool bad = c < min_cp[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF);
    *cp = bad ? REPLACEMENT : c;
    return bad ? 1 : len;
}

/* The code point at byte i, or NO_CP at or past the end. */
static int32_t cp_at(const text_ref *t, size_t i) {
    int32_t cp = NO_CP;
    if (i < t->n_bytes) {
        decode(t, i, &cp);
    }
    return cp;
}

/* The code point ending at byte i (NO_CP if i == 0); *start receives its first
 * byte. A malformed tail is taken as one U+FFFD byte, as decode() does. */
static int32_t cp_before(const text_ref *t, size_t i, size_t *start) {
    if (i == 0) {
        *start = 0;
        return NO_CP;
    }
    size_t s = i - 1;
    while (s > 0 && i - s < 4 && (t->bytes[s] & 0xC0) == 0x80) {
        s--;
    }
    int32_t cp;
    if (s + decode(t, s, &cp) != i) {
        s = i - 1;
        cp = REPLACEMENT;
    }
    *start = s;
    return cp;
}

/* ---- character classes ------------------------------------------------- */

static bool is_line_break(int32_t cp) {
    return (cp >= 0x0A && cp <= 0x0D) || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

/* Unicode White_Space (the tokenizer's \s). */
static bool is_space(int32_t cp) {
    return cp == 0x09 || cp == 0x20 || is_line_break(cp) || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

static utf8proc_category_t category(int32_t cp) {
    return cp < 0 ? UTF8PROC_CATEGORY_CN : utf8proc_category(cp);
}

static bool is_letter(int32_t cp) {
    utf8proc_category_t c = category(cp);
    return c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO;
}

static bool is_cased(int32_t cp) {
    utf8proc_category_t c = category(cp);
    return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT;
}

static bool is_digit(int32_t cp) {
    return category(cp) == UTF8PROC_CATEGORY_ND;
}

static bool is_ascii_digit(int32_t cp) {
    return cp >= '0' && cp <= '9';
}

/* Never starts a cut: combining marks, ZWJ, emoji skin-tone modifiers. */
static bool is_extend(int32_t cp) {
    utf8proc_category_t c = category(cp);
    return c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME ||
           cp == 0x200D || (cp >= 0x1F3FB && cp <= 0x1F3FF);
}

/* Han, kana and Hangul: scripts written without spaces between sentences. */
static bool is_cjk(int32_t cp) {
    return (cp >= 0x3040 && cp <= 0x30FF) || (cp >= 0x31F0 && cp <= 0x31FF) ||
           (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x4E00 && cp <= 0x9FFF) ||
           (cp >= 0xAC00 && cp <= 0xD7AF) || (cp >= 0xF900 && cp <= 0xFAFF) ||
           (cp >= 0xFF66 && cp <= 0xFF9F) || (cp >= 0x20000 && cp <= 0x3FFFF);
}

static bool is_opener(int32_t cp) {
    utf8proc_category_t c = category(cp);
    return c == UTF8PROC_CATEGORY_PS || c == UTF8PROC_CATEGORY_PI || cp == '"' || cp == '\'' ||
           cp == 0xBF || cp == 0xA1; // ¿ ¡
}

typedef enum mark_kind {
    MARK_NONE,
    MARK_PERIOD,   // .
    MARK_ELLIPSIS, // …
    MARK_LATIN,    // ! ? and friends: need a space after
    MARK_STRONG,   // need nothing after
} mark_kind;

typedef struct end_mark {
    int32_t cp;
    mark_kind kind;
} end_mark;

static const end_mark END_MARKS[] = {
    {'.', MARK_PERIOD},    {0x2026, MARK_ELLIPSIS}, // . …
    {'!', MARK_LATIN},     {'?', MARK_LATIN},       // ! ?
    {0x203C, MARK_LATIN},  {0x203D, MARK_LATIN},    // ‼ ‽
    {0x2047, MARK_LATIN},  {0x2048, MARK_LATIN},    // ⁇ ⁈
    {0x2049, MARK_LATIN},                           // ⁉
    {0x3002, MARK_STRONG}, {0xFF61, MARK_STRONG},   // 。 ｡
    {0xFF01, MARK_STRONG}, {0xFF1F, MARK_STRONG},   // ！ ？
    {0xFF0E, MARK_STRONG},                          // ．
    {0x061F, MARK_STRONG}, {0x06D4, MARK_STRONG},   // ؟ ۔
    {0x0964, MARK_STRONG}, {0x0965, MARK_STRONG},   // । ॥
    {0x0589, MARK_STRONG},                          // ։
    {0x1362, MARK_STRONG}, {0x1367, MARK_STRONG},   // ። ፧
    {0x104B, MARK_STRONG}, {0x17D4, MARK_STRONG},   // ။ ។
};

static const int32_t CLAUSE_BREAKS[] = {
    ',',    ';',    ':',    0x2013, 0x2014, // , ; : – —
    0xFF0C, 0x3001, 0xFF1B, 0xFF1A, 0xFF64, // ， 、 ； ： ､
    0x060C, 0x061B, 0x1363, 0x1364, 0x055D, // ، ؛ ፣ ፤ ՝
};

static mark_kind mark_of(int32_t cp) {
    if (cp < 0x80 && cp != '.' && cp != '!' && cp != '?') {
        return MARK_NONE; // the common case, without the table walk
    }
    for (size_t k = 0; k < COUNT_OF(END_MARKS); k++) {
        if (END_MARKS[k].cp == cp) {
            return END_MARKS[k].kind;
        }
    }
    return MARK_NONE;
}

static bool is_clause_break(int32_t cp) {
    for (size_t k = 0; k < COUNT_OF(CLAUSE_BREAKS); k++) {
        if (CLAUSE_BREAKS[k] == cp) {
            return true;
        }
    }
    return false;
}

/* ---- abbreviations ------------------------------------------------------ */

typedef enum abbr_kind {
    ABBR_NONE,
    ABBR_WORD,   // continues before a letter or a digit
    ABBR_NUMBER, // continues before a digit only ("No. 5", but "No. I won't.")
    ABBR_LOWER,  // continues before a lower-case letter only ("5 p.m. on", "5 p.m. Then")
} abbr_kind;

/* Abbreviations without their period, case-sensitive, by how they behave. */
static const char *const WORD_ABBREVIATIONS[] = {
    "Mr",   "Mrs",  "Ms",   "Dr",  "Prof", "Sr",     "Jr",  "St",   "Mt",  "Gen",  "Col",
    "Capt", "Lt",   "Sgt",  "Rev", "Gov",  "Sen",    "Rep", "Inc",  "Ltd", "Co",   "Corp",
    "Bros", "Dept", "Ave",  "vs",  "etc",  "approx", "cf",  "al",   "esp", "incl", // English
    "Mme",  "Mlle", "Mmes", "MM",  "Pr",   "ex",     "env", "av",   "Ste",         // French
    "bzw",  "usw",  "Hr",   "Hrn", "Fr",   "ca",     "vgl", "evtl", "ggf", "inkl", "bzgl",
    "zzgl", "Str",                 // German
    "Sra",  "Srta", "Ud",   "Uds", // Spanish
};

static const char *const NUMBER_ABBREVIATIONS[] = {
    "No",  "no",  "Nos", "Fig", "fig", "Vol", "vol", "pp",  "Ch",   "ch",  "Sec", "Art",
    "Jan", "Feb", "Mar", "Apr", "Jun", "Jul", "Aug", "Sep", "Sept", "Oct", "Nov", "Dec", // English
    "Nr",  "Abb", "Tel", "Abs",                                                          // German
    "pág", "núm",                                                                        // Spanish
};

static const char *const LOWER_ABBREVIATIONS[] = {
    "a.m", "p.m", "A.M", "P.M", "pct", "min", "max",  "sec", "hr",
    "hrs", "yr",  "yrs", "ft",  "lbs", "oz",  "resp", "sog",
};

/* Words after which "<number>." is a German ordinal, not a sentence end. */
static const char *const GERMAN_ORDINAL_NOUNS[] = {
    "Januar", "Februar",   "März",    "April",    "Mai",      "Juni",        "Juli",
    "August", "September", "Oktober", "November", "Dezember", "Jahrhundert", "Jh",
};

/* Whether text[b, e) is one of `words` (n_words entries). */
static bool token_in(const text_ref *t, size_t b, size_t e, const char *const *words,
                     size_t n_words) {
    for (size_t k = 0; k < n_words; k++) {
        if (strlen(words[k]) == e - b && memcmp(words[k], t->bytes + b, e - b) == 0) {
            return true;
        }
    }
    return false;
}

/* Whether text[b, e) is single letters joined by periods: "e.g", "z.B", "U.S.A". */
static bool is_dotted_letters(const text_ref *t, size_t b, size_t e) {
    size_t n_letters = 0;
    size_t i = b;
    while (i < e) {
        int32_t cp;
        i += decode(t, i, &cp);
        if (!is_cased(cp) || i > e) {
            return false;
        }
        n_letters++;
        if (i < e && t->bytes[i++] != '.') {
            return false;
        }
    }
    return n_letters >= 2 && t->bytes[e - 1] != '.';
}

/* An initial at byte i: an upper-case letter and a period ("M." of "I. M. Pei"). */
static bool initial_at(const text_ref *t, size_t i) {
    int32_t cp = NO_CP;
    size_t len = i < t->n_bytes ? decode(t, i, &cp) : 0;
    return category(cp) == UTF8PROC_CATEGORY_LU && cp_at(t, i + len) == '.';
}

/* How the word text[b, e) before a period behaves; `next` is where the next word starts. */
static abbr_kind abbreviation_kind(const text_ref *t, size_t b, size_t e, size_t next) {
    int32_t cp;
    if (decode(t, b, &cp) == e - b) {
        if (!is_cased(cp)) {
            return ABBR_NONE;
        }
        // "so did I. Then" ends a sentence; "I. M. Pei" does not.
        return cp != 'I' || initial_at(t, next) ? ABBR_WORD : ABBR_NONE;
    }
    if (token_in(t, b, e, WORD_ABBREVIATIONS, COUNT_OF(WORD_ABBREVIATIONS))) {
        return ABBR_WORD;
    }
    if (token_in(t, b, e, NUMBER_ABBREVIATIONS, COUNT_OF(NUMBER_ABBREVIATIONS))) {
        return ABBR_NUMBER;
    }
    if (token_in(t, b, e, LOWER_ABBREVIATIONS, COUNT_OF(LOWER_ABBREVIATIONS))) {
        return ABBR_LOWER; // before the dotted-letters rule, for a.m. and p.m.
    }
    return is_dotted_letters(t, b, e) ? ABBR_WORD : ABBR_NONE;
}

/* A list number: ASCII digits with inner periods ("1", "2.3") or a Roman numeral ("IV"). */
static bool is_list_number(const text_ref *t, size_t b, size_t e) {
    const uint8_t *s = t->bytes + b;
    size_t n_bytes = e - b;
    bool digits = n_bytes <= 9 && is_ascii_digit(s[0]);
    bool roman = n_bytes <= 6;
    for (size_t k = 0; k < n_bytes; k++) {
        digits = digits && (is_ascii_digit(s[k]) || (s[k] == '.' && s[k - 1] != '.'));
        roman = roman && strchr("IVXLCDM", s[k]) != NULL && s[k] != '\0';
    }
    return digits || roman;
}

/* A German ordinal: 1-4 digits, then (after the period and spaces) a month or Jahrhundert. */
static bool is_german_ordinal(const text_ref *t, size_t b, size_t e, size_t next) {
    if (e - b > 4) {
        return false;
    }
    for (size_t i = b; i < e; i++) {
        if (!is_ascii_digit(t->bytes[i])) {
            return false;
        }
    }
    size_t word_end = next;
    while (word_end < t->n_bytes && word_end - next < 16 && is_letter(cp_at(t, word_end))) {
        int32_t cp;
        word_end += decode(t, word_end, &cp);
    }
    return token_in(t, next, word_end, GERMAN_ORDINAL_NOUNS, COUNT_OF(GERMAN_ORDINAL_NOUNS));
}

/* ---- scanning sentences ------------------------------------------------ */

typedef struct scanner {
    text_ref t;
    size_t pos;         // where the next sentence starts
    size_t first_token; // first non-space byte of the current sentence, SIZE_MAX before it
    bool quote_open;    // an ASCII '"' opened on this line is not closed yet
} scanner;

/* A run of end marks, closers and combining marks starting at an end mark. */
typedef struct mark_run {
    size_t end;       // byte after the run
    size_t n_periods; // '.' in the run
    bool ellipsis;    // a '…' in the run
    bool latin;       // a ! ? ‼ ... in the run
    bool strong;      // a mark that needs no space after it
    bool closer;      // a quote or bracket in the run
    bool bracket;     // the last closer is a bracket: ) ] } (Pe)
} mark_run;

static bool is_greek(int32_t cp) {
    return (cp >= 0x0370 && cp <= 0x03FF) || (cp >= 0x1F00 && cp <= 0x1FFF);
}

/* The end mark at byte i in context: ';' after a Greek letter is the Greek question mark (NFC
 * maps U+037E to ';'); a full-width ． between digits is a decimal point. */
static mark_kind mark_at(const text_ref *t, size_t i, size_t len, int32_t cp) {
    size_t start;
    if (cp == ';' || cp == 0x037E) {
        return cp == 0x037E || is_greek(cp_before(t, i, &start)) ? MARK_LATIN : MARK_NONE;
    }
    if (cp == 0xFF0E && is_digit(cp_before(t, i, &start)) && is_digit(cp_at(t, i + len))) {
        return MARK_NONE;
    }
    return mark_of(cp);
}

/* Whether the quote or bracket cp at byte i closes the run (see the header comment). */
static bool run_takes_closer(scanner *s, const mark_run *r, size_t i, size_t len, int32_t cp) {
    if (cp == '"') {
        if (r->strong && !s->quote_open) {
            return false;
        }
        s->quote_open = !s->quote_open;
        return true;
    }
    utf8proc_category_t c = category(cp);
    if (c == UTF8PROC_CATEGORY_PE || c == UTF8PROC_CATEGORY_PF) {
        return true;
    }
    if (cp == '\'' || c == UTF8PROC_CATEGORY_PI || cp == '*' || cp == '_') { // * _: Markdown
        int32_t next = cp_at(&s->t, i + len);
        return !r->strong || !(is_letter(next) || is_digit(next));
    }
    return false;
}

static mark_run read_run(scanner *s, size_t i) {
    mark_run r = {0};
    while (i < s->t.n_bytes) {
        int32_t cp;
        size_t len = decode(&s->t, i, &cp);
        mark_kind m = mark_at(&s->t, i, len, cp);
        if (m == MARK_PERIOD) {
            r.n_periods++;
        } else if (m != MARK_NONE) {
            r.ellipsis |= m == MARK_ELLIPSIS;
            r.latin |= m == MARK_LATIN;
            r.strong |= m == MARK_STRONG;
        } else if (is_extend(cp)) {
            // a combining mark on the end mark stays with it
        } else if (run_takes_closer(s, &r, i, len, cp)) {
            r.closer = true;
            r.bracket = category(cp) == UTF8PROC_CATEGORY_PE;
        } else {
            break;
        }
        i += len;
    }
    r.end = i;
    return r;
}

/* After "! " or ". ": takes a closer standing alone before a space or the end ("Bonjour ! »").
 * Returns the new end of the sentence, or 0 if there is no such closer at `next`. */
static size_t spaced_closer_end(const text_ref *t, size_t next, int32_t next_cp) {
    utf8proc_category_t c = category(next_cp);
    if (c != UTF8PROC_CATEGORY_PE && c != UTF8PROC_CATEGORY_PF) {
        return 0;
    }
    int32_t cp;
    size_t after = next + decode(t, next, &cp);
    int32_t following = cp_at(t, after);
    return following == NO_CP || is_space(following) ? after : 0;
}

/* Whether the single period at `mark` continues the sentence; the next word starts at `next`. */
static bool period_continues(const scanner *s, size_t mark, size_t next, int32_t next_cp) {
    const text_ref *t = &s->t;
    size_t b = mark;
    size_t start;
    while (b > 0 && mark - b <= MAX_TOKEN_BYTES && !is_space(cp_before(t, b, &start))) {
        b = start;
    }
    if (b == mark) { // a lone period: the last dot of ". . ." goes on before lower case
        return category(next_cp) == UTF8PROC_CATEGORY_LL;
    }
    if (mark - b > MAX_TOKEN_BYTES) {
        return false;
    }
    bool first_token = b == s->first_token;
    while (b < mark && is_opener(cp_at(t, b))) {
        int32_t cp;
        b += decode(t, b, &cp);
    }
    if (b == mark) {
        return false;
    }
    abbr_kind kind = abbreviation_kind(t, b, mark, next);
    if ((kind == ABBR_WORD && (is_cased(next_cp) || is_digit(next_cp))) ||
        (kind == ABBR_NUMBER && is_digit(next_cp)) ||
        (kind == ABBR_LOWER && category(next_cp) == UTF8PROC_CATEGORY_LL)) {
        return true;
    }
    return (first_token && is_list_number(t, b, mark)) || is_german_ordinal(t, b, mark, next);
}

/* Latin marks followed by neither space nor end: a sentence end only between CJK characters. */
static bool run_joins_cjk(const scanner *s, size_t mark, const mark_run *r, int32_t next_cp) {
    size_t start;
    int32_t prev = cp_before(&s->t, mark, &start);
    bool next_ok = is_cjk(next_cp) || next_cp == '"' || category(next_cp) == UTF8PROC_CATEGORY_PS ||
                   category(next_cp) == UTF8PROC_CATEGORY_PI;
    return !r->ellipsis && is_cjk(prev) && next_ok;
}

/* Reads the run at the end mark at byte `mark`; *stop receives the byte after the run (or
 * after a spaced closer). Returns whether the sentence ends there. */
static bool run_ends_sentence(scanner *s, size_t mark, size_t *stop) {
    const text_ref *t = &s->t;
    mark_run r = read_run(s, mark);
    *stop = r.end;
    int32_t next_cp = cp_at(t, r.end);
    if (next_cp == NO_CP || is_line_break(next_cp)) {
        return true;
    }
    if (r.strong) {
        return !(r.closer && next_cp == 0x3068); // と
    }
    if (!is_space(next_cp)) {
        return run_joins_cjk(s, mark, &r, next_cp);
    }
    size_t next = r.end;
    while (next < t->n_bytes && is_space(next_cp) && !is_line_break(next_cp)) {
        int32_t cp;
        next += decode(t, next, &cp);
        next_cp = cp_at(t, next);
    }
    if (next_cp == NO_CP || is_line_break(next_cp)) {
        return true;
    }
    if (mark_of(next_cp) != MARK_NONE && mark_of(next_cp) != MARK_STRONG) {
        return false; // ". . ." and "? !": the next mark decides
    }
    size_t closer_end = spaced_closer_end(t, next, next_cp);
    if (closer_end != 0) {
        *stop = closer_end;
        return true;
    }
    bool trailing_off = (r.ellipsis || r.n_periods >= 2) && !r.latin && !r.closer;
    if ((trailing_off || r.bracket) && category(next_cp) == UTF8PROC_CATEGORY_LL) {
        return false;
    }
    bool single_period = r.n_periods == 1 && !r.ellipsis && !r.latin && !r.closer;
    return !(single_period && period_continues(s, mark, next, next_cp));
}

/* The next raw sentence [*begin, *end), untrimmed; false when the text is used up. */
static bool scanner_next(scanner *s, size_t *begin, size_t *end) {
    const text_ref *t = &s->t;
    if (s->pos >= t->n_bytes) {
        return false;
    }
    *begin = s->pos;
    s->first_token = SIZE_MAX;
    size_t i = s->pos;
    while (i < t->n_bytes) {
        int32_t cp;
        size_t len = decode(t, i, &cp);
        if (is_line_break(cp)) {
            s->quote_open = false;
            i += len;
            break;
        }
        if (s->first_token == SIZE_MAX && !is_space(cp)) {
            s->first_token = i;
        }
        if (mark_at(t, i, len, cp) != MARK_NONE) {
            size_t stop;
            bool ends = run_ends_sentence(s, i, &stop);
            i = stop;
            if (ends) {
                break;
            }
            continue;
        }
        if (cp == '"') {
            s->quote_open = !s->quote_open;
        }
        i += len;
    }
    *end = i;
    s->pos = i;
    return true;
}

/* ---- spans ------------------------------------------------------------- */

/* Shrinks [*begin, *end) to exclude White_Space at both ends; returns whether anything is left. */
static bool trim(const text_ref *t, size_t *begin, size_t *end) {
    int32_t cp;
    while (*begin < *end) {
        size_t len = decode(t, *begin, &cp);
        if (!is_space(cp)) {
            break;
        }
        *begin += len;
    }
    while (*end > *begin) {
        size_t start;
        if (!is_space(cp_before(t, *end, &start))) {
            break;
        }
        *end = start;
    }
    return *end > *begin;
}

/* Where the spans go: the first max_spans are stored, all are counted. */
typedef struct span_sink {
    kz_span *spans;
    size_t max_spans;
    size_t n_spans;
} span_sink;

static void sink_put(span_sink *sink, size_t begin, size_t end) {
    if (sink->n_spans < sink->max_spans) {
        sink->spans[sink->n_spans] = (kz_span){begin, end};
    }
    sink->n_spans++;
}

/* ---- cutting an over-long sentence -------------------------------------- */

/* The cut after a clause break ending at byte `after` (closers included), or 0 if the break
 * does not count: ASCII , ; : and – need a space after them (1,000 and 10:30 are no breaks). */
static size_t clause_cut(const text_ref *t, size_t after, size_t end, int32_t brk) {
    size_t p = after;
    while (p < end) {
        int32_t cp;
        size_t len = decode(t, p, &cp);
        utf8proc_category_t c = category(cp);
        if (c != UTF8PROC_CATEGORY_PE && c != UTF8PROC_CATEGORY_PF && cp != '"' && cp != '\'') {
            break;
        }
        p += len;
    }
    int32_t next = p < end ? cp_at(t, p) : NO_CP;
    bool needs_space = brk < 0x80 || brk == 0x2013;
    if ((needs_space && next != NO_CP && !is_space(next)) || is_extend(next)) {
        return 0;
    }
    return p;
}

/* The best cut positions in (begin, limit], 0 where none was seen. */
typedef struct cut_points {
    size_t clause;     // after a clause break
    size_t space;      // at a space
    size_t grapheme;   // at a grapheme cluster boundary
    size_t no_extend;  // at a code point that is not an extender, not after a ZWJ
    size_t code_point; // at any code point boundary
    size_t first_end;  // end of the first code point, the cut of last resort
} cut_points;

/* Where to cut [begin, end) (trimmed, longer than max_bytes) so that [begin, cut) fits. */
static size_t find_cut(const text_ref *t, size_t begin, size_t end, size_t max_bytes) {
    size_t limit = begin + max_bytes;
    cut_points c = {0};
    int32_t prev = NO_CP;
    int32_t grapheme_state = 0;
    size_t i = begin;
    while (i < end && i <= limit) {
        int32_t cp;
        size_t len = decode(t, i, &cp);
        if (i == begin) {
            c.first_end = i + len;
        } else {
            bool boundary = utf8proc_grapheme_break_stateful(prev, cp, &grapheme_state);
            c.grapheme = boundary ? i : c.grapheme;
            c.no_extend = !is_extend(cp) && prev != 0x200D ? i : c.no_extend;
            c.space = is_space(cp) ? i : c.space;
            c.code_point = i;
        }
        if (i + len > limit) {
            break;
        }
        size_t p = is_clause_break(cp) ? clause_cut(t, i + len, end, cp) : 0;
        c.clause = p != 0 && p <= limit ? p : c.clause;
        prev = cp;
        i += len;
    }
    size_t order[] = {c.clause, c.space, c.grapheme, c.no_extend, c.code_point, c.first_end};
    size_t k = 0;
    while (order[k] == 0) {
        k++;
    }
    return order[k];
}

/* ---- packing ----------------------------------------------------------- */

typedef struct packer {
    const text_ref *t;
    size_t max_bytes;
    span_sink *sink;
    bool has_open; // `open` holds sentences not yet written
    kz_span open;
} packer;

/* Adds the trimmed sentence [begin, end): joins the open span if it still fits, else writes
 * the open span and starts a new one, cutting the sentence first if it is too long alone. */
static void packer_add(packer *p, size_t begin, size_t end) {
    if (p->has_open && end - p->open.begin <= p->max_bytes) {
        p->open.end = end;
        return;
    }
    if (p->has_open) {
        sink_put(p->sink, p->open.begin, p->open.end);
    }
    bool left = true;
    while (left && end - begin > p->max_bytes) {
        size_t cut = find_cut(p->t, begin, end, p->max_bytes);
        size_t piece_end = cut;
        trim(p->t, &begin, &piece_end);
        sink_put(p->sink, begin, piece_end);
        begin = cut;
        left = trim(p->t, &begin, &end); // false only when one code point exceeded max_bytes
    }
    p->open = (kz_span){begin, end};
    p->has_open = left;
}

/* ---- entry points ------------------------------------------------------ */

size_t kz_sentences_list(const char *text, size_t n_bytes, kz_span *spans, size_t max_spans) {
    span_sink sink = {spans, spans ? max_spans : 0, 0};
    scanner s = {{(const uint8_t *)text, text ? n_bytes : 0}, 0, SIZE_MAX, false};
    size_t begin, end;
    while (scanner_next(&s, &begin, &end)) {
        if (trim(&s.t, &begin, &end)) {
            sink_put(&sink, begin, end);
        }
    }
    return sink.n_spans;
}

size_t kz_sentences_split(const char *text, size_t n_bytes, size_t max_bytes, kz_span *spans,
                          size_t max_spans) {
    span_sink sink = {spans, spans ? max_spans : 0, 0};
    scanner s = {{(const uint8_t *)text, text ? n_bytes : 0}, 0, SIZE_MAX, false};
    size_t begin = 0;
    size_t end = s.t.n_bytes;
    if (max_bytes == 0) {
        if (trim(&s.t, &begin, &end)) {
            sink_put(&sink, begin, end);
        }
        return sink.n_spans;
    }
    packer p = {&s.t, max_bytes, &sink, false, {0, 0}};
    while (scanner_next(&s, &begin, &end)) {
        if (trim(&s.t, &begin, &end)) {
            packer_add(&p, begin, end);
        }
    }
    if (p.has_open) {
        sink_put(&sink, p.open.begin, p.open.end);
    }
    return sink.n_spans;
}

bool kz_text_is_blank(const char *text, size_t n_bytes) {
    text_ref t = {(const uint8_t *)text, text ? n_bytes : 0};
    size_t begin = 0, end = t.n_bytes;
    return !trim(&t, &begin, &end);
}
