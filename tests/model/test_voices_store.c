/*
 * test_voices_store.c - the voices of `kztts serve` (tools/kztts/serve/voices.c and
 * voices_clone.c) on the tiny Base checkpoints: argv[1] tiny_base, argv[2] tiny_base_1b7,
 * argv[3] a CustomVoice checkpoint (tiny).
 *
 * Dataflow: 2.5 s of seeded speech-like audio -> a WAV file (libsndfile) -> ffmpeg makes
 *   FLAC, Ogg Vorbis, Ogg Opus and MP3 copies, sox a stereo 44.1 kHz one -> each file's
 *   bytes as a data: URI -> voices_from_data_uri == kz_voice_from_file of the same file
 *   (the saved voice files byte for byte); bad URIs and unusable audio -> 400 with the
 *   reason. The store in a temporary folder: create, list, get, delete and their
 *   statuses; names in any case (one voice, stored in lower case); bad names refused
 *   with nothing written; a voice of the other model refused by get; half-made voices
 *   (only the .kzvoice, only the .json) invisible; damaged files; old temporary files
 *   removed at open; a writer creating and deleting a voice while a reader gets and
 *   lists it (only whole voices or none seen); two threads creating one name (one wins,
 *   one 409).
 */
#include <dirent.h>
#include <pthread.h>
#include <sndfile.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "base64.h"
#include "kztts.h"
#include "test.h"
#include "voices.h"

enum { RATE = 24000 };
static const char TEXT[] = "What the reference recording says.";
static char work[] = "/tmp/kztts_voices_test_XXXXXX";

static char *path_in(const char *name) {
    char *p = malloc(strlen(work) + strlen(name) + 2);
    sprintf(p, "%s/%s", work, name);
    return p;
}

static void write_wav(const char *name, const float *x, size_t n, int rate) {
    char *p = path_in(name);
    SF_INFO info = {.samplerate = rate, .channels = 1, .format = SF_FORMAT_WAV | SF_FORMAT_PCM_16};
    SNDFILE *sf = sf_open(p, SFM_WRITE, &info);
    CHECK(sf && sf_writef_float(sf, x, (sf_count_t)n) == (sf_count_t)n);
    sf_close(sf);
    free(p);
}

static void run(const char *cmd) {
    int rc = system(cmd);
    CHECK_MSG(rc == 0, "%s: exit %d", cmd, rc);
}

static uint8_t *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    uint8_t *bytes = NULL;
    *n = 0;
    if (f && fseek(f, 0, SEEK_END) == 0) {
        long size = ftell(f);
        rewind(f);
        bytes = malloc(size > 0 ? (size_t)size : 1);
        *n = fread(bytes, 1, (size_t)size, f);
    }
    if (f) {
        fclose(f);
    }
    return bytes;
}

/* "data:<type>;base64,<the file's bytes>", malloc'ed. */
static char *data_uri(const char *path, const char *type) {
    size_t n;
    uint8_t *bytes = read_file(path, &n);
    char *uri = malloc(strlen(type) + base64_encoded_size(n) + 16);
    int o = sprintf(uri, "data:%s;base64,", type);
    base64_encode(bytes, n, uri + o);
    free(bytes);
    return uri;
}

/* The bytes kz_voice_save writes for v. */
static uint8_t *voice_bytes(const kz_voice *v, size_t *n) {
    char *p = path_in("compare.kzvoice");
    CHECK(kz_voice_save(v, p) == KZ_OK);
    uint8_t *bytes = read_file(p, n);
    unlink(p);
    free(p);
    return bytes;
}

static bool same_voice(const kz_voice *a, const kz_voice *b) {
    size_t na, nb;
    uint8_t *x = voice_bytes(a, &na), *y = voice_bytes(b, &nb);
    bool same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

/* ---- data: URIs ---- */

/* The file in work/name as a data: URI -> the same voice as kz_voice_from_file. */
static void uri_equals_file(voices *store, const kz_model *m, const char *name, const char *type,
                            bool icl) {
    char *p = path_in(name), *uri = data_uri(p, type);
    kz_voice *from_uri = NULL, *from_file = NULL;
    http_error e;
    int rc = voices_from_data_uri(store, uri, icl ? TEXT : NULL, !icl, 2, &from_uri, &e);
    CHECK_MSG(rc == 0 && from_uri, "%s: %d %s", name, rc, rc ? e.message : "");
    kz_voice_params vp;
    kz_voice_default_params(&vp);
    vp.ref_text = icl ? TEXT : NULL;
    vp.xvector_only = !icl;
    vp.n_threads = 1;
    CHECK_MSG(kz_voice_from_file(m, p, &vp, &from_file) == KZ_OK, "%s: %s", name, kz_last_error());
    CHECK_MSG(from_uri && from_file && same_voice(from_uri, from_file), "%s: voices differ", name);
    kz_voice_free(from_uri);
    kz_voice_free(from_file);
    free(uri);
    free(p);
}

/* uri refused with status and a message containing expect; *out stays NULL. */
static void uri_refused(voices *store, const char *uri, const char *ref_text, int status,
                        const char *param, const char *expect) {
    kz_voice *v = (kz_voice *)&v;
    http_error e = {0};
    int rc = voices_from_data_uri(store, uri, ref_text, ref_text == NULL, 1, &v, &e);
    CHECK_MSG(rc == status && e.status == status && v == NULL, "%.40s: %d", uri ? uri : "NULL",
              rc);
    const char *msg = e.message;
    CHECK_STR_CONTAINS(msg, expect);
    CHECK_MSG(e.param && strcmp(e.param, param) == 0, "param %s", e.param ? e.param : "NULL");
}

/* A WAV of x in work/name as a data: URI (malloc'ed). */
static char *wav_uri(const char *name, const float *x, size_t n, int rate) {
    write_wav(name, x, n, rate);
    char *p = path_in(name), *uri = data_uri(p, "audio/wav");
    free(p);
    return uri;
}

static void test_data_uris(const kz_model *base, const kz_model *custom) {
    char err[256];
    voices *store = voices_open(base, NULL, err, sizeof err);
    CHECK(store != NULL && !voices_enabled(store));
    size_t n = (size_t)(2.5 * RATE);
    float *x = test_speech_like(n, RATE, 7);
    write_wav("ref.wav", x, n, RATE);
    char cmd[1024];
    static const char *const CONVERT[][2] = {
        {"ref.flac", "-c:a flac"},           {"ref.ogg", "-c:a libvorbis"},
        {"ref.opus.ogg", "-c:a libopus -f ogg"}, {"ref.mp3", "-c:a libmp3lame"}};
    for (int i = 0; i < 4; i++) {
        snprintf(cmd, sizeof cmd, "ffmpeg -nostdin -loglevel error -y -i %s/ref.wav %s %s/%s", work,
                 CONVERT[i][1], work, CONVERT[i][0]);
        run(cmd);
    }
    snprintf(cmd, sizeof cmd, "sox %s/ref.wav -r 44100 -c 2 %s/ref_stereo.wav", work, work);
    run(cmd);
    uri_equals_file(store, base, "ref.wav", "audio/wav", true);
    uri_equals_file(store, base, "ref.flac", "audio/flac", true);
    uri_equals_file(store, base, "ref.ogg", "audio/ogg", false);
    uri_equals_file(store, base, "ref.opus.ogg", "audio/ogg; codecs=opus", false);
    uri_equals_file(store, base, "ref.mp3", "audio/mpeg", true);
    uri_equals_file(store, base, "ref_stereo.wav", "", false);

    uri_refused(store, NULL, NULL, 400, "ref_audio", "must be a data: URI");
    uri_refused(store, "http://example.com/ref.wav", NULL, 400, "ref_audio", "not fetched");
    uri_refused(store, "file:///etc/passwd", NULL, 400, "ref_audio", "not fetched");
    uri_refused(store, "data:audio/wav,UklGRg==", NULL, 400, "ref_audio", "must be base64");
    uri_refused(store, "data:audio/wav;base64", NULL, 400, "ref_audio", "must be base64");
    uri_refused(store, "data:;base64,UklG@g==", NULL, 400, "ref_audio", "base64 is malformed");
    uri_refused(store, "data:;base64,UklGR", NULL, 400, "ref_audio", "base64 is malformed");
    uri_refused(store, "data:;base64,UklGRg=A", NULL, 400, "ref_audio", "base64 is malformed");
    uri_refused(store, "data:;base64,", NULL, 400, "ref_audio", "empty (0 bytes)");
    uri_refused(store, "data:text/plain;base64,aGVsbG8sIHRoaXMgaXMgbm90IGF1ZGlv", NULL, 400,
                "ref_audio", "not in a format libsndfile reads");
    char *uri = wav_uri("ref.wav", x, n, RATE);
    uri_refused(store, uri, "", 400, "ref_text", "needs ref_text");
    // The WAV cut after its header and a few samples: decoded as far as it goes.
    uri[5 + strlen("audio/wav;base64,") + 64] = '\0';
    uri_refused(store, uri, NULL, 400, "ref_audio", "at least 1 s");
    free(uri);
    uri = wav_uri("short.wav", x, RATE / 2, RATE);
    uri_refused(store, uri, NULL, 400, "ref_audio", "at least 1 s");
    free(uri);
    float *zeros = calloc(2 * RATE, sizeof *zeros);
    uri = wav_uri("silent.wav", zeros, 2 * RATE, RATE);
    uri_refused(store, uri, NULL, 400, "ref_audio", "silent");
    free(uri);
    free(zeros);
    float *longer = test_speech_like(61 * 8000, 8000, 3);
    uri = wav_uri("long.wav", longer, 61 * 8000, 8000);
    uri_refused(store, uri, NULL, 400, "ref_audio", "must be at most 60 s");
    kz_voice *none = NULL;
    http_error e = {0};
    CHECK(voices_from_data_uri(store, uri, NULL, true, 1, &none, &e) == 400 &&
          !strstr(e.message, "--") && !strstr(e.message, "max_seconds")); // no CLI or API advice
    free(uri);
    free(longer);
    voices_free(store);

    store = voices_open(custom, NULL, err, sizeof err);
    uri = wav_uri("ref.wav", x, n, RATE);
    uri_refused(store, uri, TEXT, 400, "ref_audio", "needs a Base model");
    uri_refused(store, uri, TEXT, 400, "ref_audio", "custom_voice");
    free(uri);
    voices_free(store);
    free(x);
}

/* ---- the store ---- */

static kz_voice *make_voice(const kz_model *m, bool icl, uint64_t seed) {
    size_t n = 2 * RATE;
    float *x = test_speech_like(n, RATE, seed);
    kz_voice_params vp;
    kz_voice_default_params(&vp);
    vp.ref_text = icl ? TEXT : NULL;
    vp.xvector_only = !icl;
    vp.n_threads = 1;
    kz_voice *v = NULL;
    CHECK_MSG(kz_voice_from_samples(m, x, n, RATE, 1, &vp, &v) == KZ_OK, "%s", kz_last_error());
    free(x);
    return v;
}

static voice_meta meta_for(const char *name, bool icl) {
    voice_meta m = {.consent = "yes", .icl = icl, .ref_text = icl ? (char *)TEXT : NULL};
    snprintf(m.name, sizeof m.name, "%s", name);
    return m;
}

/* The entries of the store's folder, but for names starting with skip_prefix. */
static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *ent; d && (ent = readdir(d)) != NULL;) {
        n += strcmp(ent->d_name, ".") != 0 && strcmp(ent->d_name, "..") != 0;
    }
    if (d) {
        closedir(d);
    }
    return n;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fputs(text, f) >= 0);
    if (f) {
        fclose(f);
    }
}

static void test_names(void) {
    CHECK(voices_name_ok("alice") && voices_name_ok("A.b-c_9") && voices_name_ok("x."));
    char name[80];
    memset(name, 'a', 64);
    name[64] = '\0';
    CHECK(voices_name_ok(name));
    name[64] = 'a';
    name[65] = '\0';
    CHECK(!voices_name_ok(name));
    static const char *const BAD[] = {"", ".hidden", "../x", "..", ".", "a/b", "a b", "a\\b",
                                      "caf\xc3\xa9", "a\n", "a:b", "~x", "a*"};
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        CHECK_MSG(!voices_name_ok(BAD[i]), "'%s' accepted", BAD[i]);
    }
    CHECK(!voices_name_ok(NULL));
}

/* Uploads off: list empty, get 404, create and delete 400. */
static void test_disabled(const kz_model *m, const kz_voice *v) {
    char err[256];
    voices *store = voices_open(m, NULL, err, sizeof err);
    voice_meta *list = (voice_meta *)&list;
    size_t n = 9;
    http_error e;
    CHECK(voices_list(store, &list, &n, &e) == 0 && list == NULL && n == 0);
    kz_voice *got = NULL;
    CHECK(voices_get(store, "alice", &got, &e) == 404 && got == NULL);
    voice_meta meta = meta_for("alice", true);
    CHECK(voices_create(store, v, &meta, &e) == 400 && strstr(e.message, "--voices-dir"));
    CHECK(voices_delete(store, "alice", &e) == 400);
    CHECK(!voices_exists(store, "alice"));
    voices_free(store);
}

static void test_open(const kz_model *m) {
    char err[256];
    char *nested = path_in("a/b/c");
    voices *store = voices_open(m, nested, err, sizeof err);
    struct stat st;
    CHECK_MSG(store && voices_enabled(store) && stat(nested, &st) == 0 && S_ISDIR(st.st_mode),
              "%s", err);
    voices_free(store);
    char *file = path_in("a/file");
    write_text(file, "x");
    err[0] = '\0';
    CHECK(voices_open(m, file, err, sizeof err) == NULL && strstr(err, file));
    char *under = path_in("a/file/sub");
    CHECK(voices_open(m, under, err, sizeof err) == NULL && strstr(err, "--voices-dir"));
    CHECK(voices_open(m, "", err, sizeof err) == NULL);
    unlink(file);
    free(under);
    free(file);
    free(nested);
}

static void test_life_cycle(const kz_model *m, const kz_voice *icl, const kz_voice *xvec,
                            const char *dir) {
    char err[256];
    voices *store = voices_open(m, dir, err, sizeof err);
    CHECK_MSG(store != NULL, "%s", err);
    http_error e;
    voice_meta a = meta_for("alice", true), b = meta_for("bob", false);
    b.speaker_description = "warm narrator";
    CHECK(voices_create(store, icl, &a, &e) == 0 && a.created_at > 0);
    CHECK(voices_create(store, xvec, &b, &e) == 0);
    CHECK_EQ_INT(count_entries(dir), 4); // two voices, two metadata files, no temporaries
    voice_meta again = meta_for("alice", false);
    CHECK(voices_create(store, xvec, &again, &e) == 409 && strcmp(e.code, "voice_exists") == 0);
    voice_meta *list = NULL;
    size_t n = 0;
    CHECK(voices_list(store, &list, &n, &e) == 0 && n == 2);
    if (n == 2) {
        CHECK(strcmp(list[0].name, "alice") == 0 && list[0].icl &&
              strcmp(list[0].ref_text, TEXT) == 0 && strcmp(list[0].consent, "yes") == 0 &&
              list[0].created_at == a.created_at && list[0].speaker_description == NULL);
        CHECK(strcmp(list[1].name, "bob") == 0 && !list[1].icl && list[1].ref_text == NULL &&
              strcmp(list[1].speaker_description, "warm narrator") == 0);
    }
    for (size_t i = 0; i < n; i++) {
        voice_meta_clear(&list[i]);
    }
    free(list);
    kz_voice *got = NULL;
    CHECK(voices_get(store, "alice", &got, &e) == 0 && got && same_voice(got, icl));
    kz_voice_free(got);
    CHECK(voices_get(store, "carol", &got, &e) == 404 && got == NULL &&
          strcmp(e.code, "voice_not_found") == 0);
    // Bad names: refused, nothing written, nothing read outside the folder.
    static const char *const BAD[] = {"../x", ".hidden", "", "a/b", "x y"};
    for (int i = 0; i < 5; i++) {
        voice_meta bad = meta_for(BAD[i], true);
        CHECK_MSG(voices_create(store, icl, &bad, &e) == 400 && strcmp(e.param, "name") == 0,
                  "'%s'", BAD[i]);
        CHECK(voices_get(store, BAD[i], &got, &e) == 404 && got == NULL);
        CHECK(voices_delete(store, BAD[i], &e) == 404);
    }
    CHECK_EQ_INT(count_entries(dir), 4);
    CHECK(voices_delete(store, "alice", &e) == 0);
    CHECK(voices_get(store, "alice", &got, &e) == 404);
    CHECK(voices_delete(store, "alice", &e) == 404);
    CHECK(voices_delete(store, "bob", &e) == 0);
    CHECK(voices_list(store, &list, &n, &e) == 0 && n == 0);
    free(list);
    CHECK_EQ_INT(count_entries(dir), 0);
    voices_free(store);
}

/* Names are case-insensitive: stored in lower case, found, refused (409) and deleted in
 * any case; a file with upper case in its name is no voice of the store. */
static void test_case(const kz_model *m, const kz_voice *v, const char *dir) {
    char err[256], key[65];
    CHECK(voices_key("A.b-C_9", key) && strcmp(key, "a.b-c_9") == 0);
    CHECK(!voices_key("../X", key) && key[0] == '\0');
    voices *store = voices_open(m, dir, err, sizeof err);
    http_error e;
    voice_meta a = meta_for("Alice", false);
    CHECK(voices_create(store, v, &a, &e) == 0 && strcmp(a.name, "alice") == 0);
    char path[1024];
    struct stat st;
    snprintf(path, sizeof path, "%s/alice.kzvoice", dir);
    CHECK(stat(path, &st) == 0);
    CHECK(voices_exists(store, "ALICE") && voices_exists(store, "alice"));
    kz_voice *got = NULL;
    CHECK(voices_get(store, "aLiCe", &got, &e) == 0 && got && same_voice(got, v));
    kz_voice_free(got);
    static const char *const SAME[] = {"alice", "ALICE", "Alice"};
    for (int i = 0; i < 3; i++) {
        voice_meta again = meta_for(SAME[i], false);
        CHECK_MSG(voices_create(store, v, &again, &e) == 409 && strcmp(e.code, "voice_exists") == 0,
                  "'%s' not refused", SAME[i]);
    }
    voice_meta *list = NULL;
    size_t n = 0;
    CHECK(voices_list(store, &list, &n, &e) == 0 && n == 1 && strcmp(list[0].name, "alice") == 0);
    for (size_t i = 0; i < n; i++) {
        voice_meta_clear(&list[i]);
    }
    free(list);
    // Files named in upper case (not written by the store) are not listed.
    snprintf(path, sizeof path, "%s/Upper.kzvoice", dir);
    CHECK(kz_voice_save(v, path) == KZ_OK);
    snprintf(path, sizeof path, "%s/Upper.json", dir);
    write_text(path, "{\"name\":\"Upper\",\"created_at\":1,\"consent\":\"y\",\"mode\":\"xvector\"}");
    CHECK(voices_list(store, &list, &n, &e) == 0 && n == 1);
    for (size_t i = 0; i < n; i++) {
        voice_meta_clear(&list[i]);
    }
    free(list);
    unlink(path);
    snprintf(path, sizeof path, "%s/Upper.kzvoice", dir);
    unlink(path);
    CHECK(voices_delete(store, "ALICE", &e) == 0);
    CHECK(voices_get(store, "alice", &got, &e) == 404 && got == NULL);
    CHECK_EQ_INT(count_entries(dir), 0);
    voices_free(store);
}

/* Replicas with different models sharing a folder: get refuses the other's voice. */
static void test_other_model(const kz_model *m, const kz_model *other, const char *dir) {
    char err[256];
    voices *mine = voices_open(m, dir, err, sizeof err), *theirs = voices_open(other, dir, err, sizeof err);
    kz_voice *v = make_voice(other, false, 11);
    voice_meta meta = meta_for("theirs", false);
    http_error e;
    CHECK(voices_create(theirs, v, &meta, &e) == 0);
    kz_voice *got = (kz_voice *)&got;
    CHECK(voices_get(mine, "theirs", &got, &e) == 400 && got == NULL);
    const char *msg = e.message;
    CHECK_STR_CONTAINS(msg, "another model");
    CHECK(strcmp(e.param, "voice") == 0 && !strchr(msg, '\n'));
    CHECK(voices_get(theirs, "theirs", &got, &e) == 0 && got);
    kz_voice_free(got);
    CHECK(voices_delete(mine, "theirs", &e) == 0);
    kz_voice_free(v);
    voices_free(mine);
    voices_free(theirs);
}

/* Half-made voices are invisible; damaged files answer 500 or are skipped. */
static void test_partial(const kz_model *m, const kz_voice *v, const char *dir) {
    char err[256];
    voices *store = voices_open(m, dir, err, sizeof err);
    char path[1024];
    http_error e;
    kz_voice *got = NULL;
    voice_meta *list = NULL;
    size_t n = 0;
    // Only the voice file: a creation in progress. Invisible, the name taken, deletable.
    snprintf(path, sizeof path, "%s/half.kzvoice", dir);
    CHECK(kz_voice_save(v, path) == KZ_OK);
    CHECK(voices_get(store, "half", &got, &e) == 404 && got == NULL);
    CHECK(voices_list(store, &list, &n, &e) == 0 && n == 0);
    free(list);
    CHECK(voices_exists(store, "half"));
    voice_meta meta = meta_for("half", false);
    CHECK(voices_create(store, v, &meta, &e) == 409);
    CHECK(voices_delete(store, "half", &e) == 0 && !voices_exists(store, "half"));
    // Only the metadata (a deletion cut short): invisible, and a new voice replaces it.
    snprintf(path, sizeof path, "%s/meta.json", dir);
    write_text(path, "{\"name\":\"meta\",\"created_at\":1,\"consent\":\"old\",\"mode\":\"xvector\"}");
    CHECK(voices_get(store, "meta", &got, &e) == 404);
    CHECK(voices_list(store, &list, &n, &e) == 0 && n == 0);
    free(list);
    CHECK(voices_delete(store, "meta", &e) == 404);
    write_text(path, "{\"name\":\"meta\",\"created_at\":1,\"consent\":\"old\",\"mode\":\"xvector\"}");
    meta = meta_for("meta", false);
    CHECK(voices_create(store, v, &meta, &e) == 0);
    CHECK(voices_list(store, &list, &n, &e) == 0 && n == 1 && strcmp(list[0].consent, "yes") == 0);
    voice_meta_clear(&list[0]);
    free(list);
    // A damaged voice file: 500 naming it; damaged metadata: not listed, not served.
    snprintf(path, sizeof path, "%s/meta.kzvoice", dir);
    write_text(path, "not a voice");
    CHECK(voices_get(store, "meta", &got, &e) == 500 && got == NULL &&
          strstr(e.message, "cannot be read"));
    snprintf(path, sizeof path, "%s/meta.json", dir);
    write_text(path, "{\"name\":\"other\"");
    CHECK(voices_list(store, &list, &n, &e) == 0 && n == 0);
    free(list);
    CHECK(voices_delete(store, "meta", &e) == 0);
    // Files that are no voices: skipped by list.
    snprintf(path, sizeof path, "%s/.x.kzvoice", dir);
    write_text(path, "x");
    snprintf(path, sizeof path, "%s/notes.txt", dir);
    write_text(path, "x");
    CHECK(voices_list(store, &list, &n, &e) == 0 && n == 0);
    free(list);
    unlink(path);
    snprintf(path, sizeof path, "%s/.x.kzvoice", dir);
    unlink(path);
    voices_free(store);
}

/* Temporary files older than an hour go when the store opens; newer ones stay. */
static void test_stale_temps(const kz_model *m, const char *dir) {
    char old[1024], fresh[1024], other[1024], err[256];
    snprintf(old, sizeof old, "%s/.a.kzvoice.tmp-AbCdEf", dir);
    snprintf(fresh, sizeof fresh, "%s/.a.json.tmp-GhIjKl", dir);
    snprintf(other, sizeof other, "%s/.keep", dir);
    write_text(old, "x");
    write_text(fresh, "x");
    write_text(other, "x");
    struct timeval times[2];
    gettimeofday(&times[0], NULL);
    times[0].tv_sec -= 7200;
    times[1] = times[0];
    CHECK(utimes(old, times) == 0 && utimes(other, times) == 0);
    voices *store = voices_open(m, dir, err, sizeof err);
    struct stat st;
    CHECK(stat(old, &st) != 0 && stat(fresh, &st) == 0 && stat(other, &st) == 0);
    voices_free(store);
    unlink(fresh);
    unlink(other);
}

/* ---- concurrency ---- */

enum { ROUNDS = 12, MAX_READS = 200000 };

typedef struct shared {
    voices *store;
    const kz_voice *voice;
    int32_t n_ref_frames;
    atomic_bool writer_done;
    atomic_int torn;              /* reads that saw part of a voice */
    atomic_int seen_whole, seen_none;
    pthread_barrier_t barrier;
    atomic_int wins, conflicts, others;
} shared;

static void *writer(void *arg) {
    shared *sh = arg;
    http_error e;
    for (int i = 0; i < ROUNDS; i++) {
        voice_meta meta = meta_for("v", true);
        CHECK(voices_create(sh->store, sh->voice, &meta, &e) == 0);
        CHECK(voices_delete(sh->store, "v", &e) == 0);
    }
    atomic_store(&sh->writer_done, true);
    return NULL;
}

/* One get and one list: nothing, or the whole voice with its metadata. */
static void read_once(shared *sh) {
    http_error e;
    kz_voice *got = NULL;
    int rc = voices_get(sh->store, "v", &got, &e);
    kz_voice_info info;
    if (rc == 0 && got && kz_voice_get_info(got, &info) == KZ_OK && info.icl &&
        strcmp(info.ref_text, TEXT) == 0 && info.n_ref_frames == sh->n_ref_frames) {
        atomic_fetch_add(&sh->seen_whole, 1);
    } else if (rc == 404 && !got) {
        atomic_fetch_add(&sh->seen_none, 1);
    } else {
        atomic_fetch_add(&sh->torn, 1);
        fprintf(stderr, "get: %d %s\n", rc, e.message);
    }
    kz_voice_free(got);
    voice_meta *list = NULL;
    size_t n = 0;
    rc = voices_list(sh->store, &list, &n, &e);
    bool whole = rc == 0 && (n == 0 || (n == 1 && strcmp(list[0].name, "v") == 0 && list[0].icl &&
                                        strcmp(list[0].ref_text, TEXT) == 0 &&
                                        strcmp(list[0].consent, "yes") == 0));
    if (!whole) {
        atomic_fetch_add(&sh->torn, 1);
    }
    for (size_t i = 0; i < n; i++) {
        voice_meta_clear(&list[i]);
    }
    free(list);
}

static void *reader(void *arg) {
    shared *sh = arg;
    for (int i = 0; i < MAX_READS && !atomic_load(&sh->writer_done); i++) {
        read_once(sh);
    }
    return NULL;
}

static void *racer(void *arg) {
    shared *sh = arg;
    http_error e;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_barrier_wait(&sh->barrier);
        voice_meta meta = meta_for("race", false);
        int rc = voices_create(sh->store, sh->voice, &meta, &e);
        atomic_fetch_add(rc == 0 ? &sh->wins : rc == 409 ? &sh->conflicts : &sh->others, 1);
        pthread_barrier_wait(&sh->barrier); // both tried; one thread clears the name
        if (rc == 0) {
            CHECK(voices_delete(sh->store, "race", &e) == 0);
        }
        pthread_barrier_wait(&sh->barrier);
    }
    return NULL;
}

static void test_concurrency(const kz_model *m, const kz_voice *icl, const kz_voice *xvec,
                             const char *dir) {
    char err[256];
    shared sh = {.voice = icl};
    sh.store = voices_open(m, dir, err, sizeof err);
    kz_voice_info info;
    CHECK(kz_voice_get_info(icl, &info) == KZ_OK);
    sh.n_ref_frames = info.n_ref_frames;
    pthread_t w, r;
    pthread_create(&r, NULL, reader, &sh);
    pthread_create(&w, NULL, writer, &sh);
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    CHECK_MSG(atomic_load(&sh.torn) == 0, "%d reads saw part of a voice", atomic_load(&sh.torn));
    printf("reader: %d whole, %d absent\n", atomic_load(&sh.seen_whole),
           atomic_load(&sh.seen_none));
    sh.voice = xvec;
    pthread_barrier_init(&sh.barrier, NULL, 2);
    pthread_t a, b;
    pthread_create(&a, NULL, racer, &sh);
    pthread_create(&b, NULL, racer, &sh);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    pthread_barrier_destroy(&sh.barrier);
    CHECK_EQ_INT(atomic_load(&sh.wins), ROUNDS);
    CHECK_EQ_INT(atomic_load(&sh.conflicts), ROUNDS);
    CHECK_EQ_INT(atomic_load(&sh.others), 0);
    CHECK_EQ_INT(count_entries(dir), 0);
    voices_free(sh.store);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s TINY_BASE TINY_BASE_1B7 TINY_CUSTOM_VOICE\n", argv[0]);
        return 2;
    }
    if (!mkdtemp(work)) {
        perror("mkdtemp");
        return 1;
    }
    kz_model_params mp;
    kz_model_default_params(&mp);
    kz_model *base = NULL, *base17 = NULL, *custom = NULL;
    if (kz_model_load(argv[1], &mp, &base) != KZ_OK || kz_model_load(argv[2], &mp, &base17) != KZ_OK ||
        kz_model_load(argv[3], &mp, &custom) != KZ_OK) {
        fprintf(stderr, "model: %s\n", kz_last_error());
        return 1;
    }
    test_names();
    test_data_uris(base, custom);
    kz_voice *icl = make_voice(base, true, 5), *xvec = make_voice(base, false, 6);
    char *dir = path_in("voices");
    test_disabled(base, icl);
    test_open(base);
    test_life_cycle(base, icl, xvec, dir);
    test_case(base, xvec, dir);
    test_other_model(base, base17, dir);
    test_partial(base, xvec, dir);
    test_stale_temps(base, dir);
    test_concurrency(base, icl, xvec, dir);
    kz_voice_free(icl);
    kz_voice_free(xvec);
    kz_model_free(base);
    kz_model_free(base17);
    kz_model_free(custom);
    free(dir);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", work);
    run(cmd);
    return test_main_result("test_voices_store");
}
