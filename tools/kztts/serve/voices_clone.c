/*
 * voices_clone.c - voices cloned from audio that came with a request (see voices.h):
 *
 *   data:[<mediatype>][;params];base64,<data>  (voices_from_data_uri)
 *     -> base64_decode -> audio file bytes
 *   audio file bytes (voices_from_audio; also a multipart upload's audio_sample)
 *     -> libsndfile over the bytes in memory (sf_open_virtual: WAV, FLAC, Ogg Vorbis and
 *        Opus, MP3, ...) -> interleaved float frames, read the way the library reads a
 *        file (sf_readf_float, libsndfile's default normalisation), so a voice made here
 *        equals `kztts voice create` of the same file
 *     -> kz_voice_from_samples (downmix, resample, length and silence checks, encoders).
 * Every failure is a 400 whose message says what was wrong with the audio (the
 * library's own words for too short, too long or silent audio), except running out of
 * memory or an internal error (500).
 */
#include <sndfile.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base64.h"
#include "voices.h"

/* What the library accepts (kz_voice_from_samples): checked first so that the buffer
 * below can be sized. */
#define MIN_RATE 8000
#define MAX_RATE 384000
#define MAX_CHANNELS 64
/* The library's default limit (kz_voice_params.max_seconds 0), which the server keeps. */
#define MAX_SECONDS 60
/* Decoded samples kept at most (128 MiB of floats), whatever rate and channels say. */
#define MAX_SAMPLES ((size_t)1 << 25)

typedef struct memory_file {
    const unsigned char *bytes;
    sf_count_t n_bytes, pos;
} memory_file;

static sf_count_t mem_length(void *user) {
    return ((memory_file *)user)->n_bytes;
}

static sf_count_t mem_seek(sf_count_t offset, int whence, void *user) {
    memory_file *m = user;
    sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? m->pos : m->n_bytes;
    if (whence != SEEK_SET && whence != SEEK_CUR && whence != SEEK_END) {
        return -1;
    }
    if ((offset < 0 && -offset > base) || (offset > 0 && offset > m->n_bytes - base)) {
        return -1; // before the start or past the end: nothing to read there
    }
    m->pos = base + offset;
    return m->pos;
}

static sf_count_t mem_read(void *ptr, sf_count_t count, void *user) {
    memory_file *m = user;
    sf_count_t n = count < 0 ? 0 : m->n_bytes - m->pos < count ? m->n_bytes - m->pos : count;
    memcpy(ptr, m->bytes + m->pos, (size_t)n);
    m->pos += n;
    return n;
}

static sf_count_t mem_write(const void *ptr, sf_count_t count, void *user) {
    (void)ptr;
    (void)count;
    (void)user;
    return 0; // opened for reading only
}

static sf_count_t mem_tell(void *user) {
    return ((memory_file *)user)->pos;
}

/* Checks rate and channels, and the frames to keep at most. */
static int check_format(const SF_INFO *info, size_t *max_frames, http_error *e) {
    if (info->channels < 1 || info->channels > MAX_CHANNELS) {
        return http_error_set(e, 400, "invalid_request_error", "ref_audio", "invalid_audio",
                              "reference audio has %d channels; 1..%d are accepted",
                              info->channels, MAX_CHANNELS);
    }
    if (info->samplerate < MIN_RATE || info->samplerate > MAX_RATE) {
        return http_error_set(e, 400, "invalid_request_error", "ref_audio", "invalid_audio",
                              "reference audio sample rate %d Hz; %d..%d are accepted",
                              info->samplerate, MIN_RATE, MAX_RATE);
    }
    size_t most = (size_t)info->samplerate * MAX_SECONDS;
    size_t fit = MAX_SAMPLES / (size_t)info->channels;
    *max_frames = most < fit ? most : fit;
    return 0;
}

static int too_much(const SF_INFO *info, size_t n_frames, http_error *e) {
    if (n_frames >= (size_t)info->samplerate * MAX_SECONDS) {
        return http_error_set(e, 400, "invalid_request_error", "ref_audio", "invalid_audio",
                              "reference audio is longer than %d s: a request's reference "
                              "audio must be at most %d s", MAX_SECONDS, MAX_SECONDS);
    }
    return http_error_set(e, 400, "invalid_request_error", "ref_audio", "invalid_audio",
                          "reference audio has too many samples for its %d channels: send "
                          "mono or stereo audio", info->channels);
}

/* Every frame of sf into *samples (malloc'ed), at most max_frames of them. The header's
 * frame count only sizes the first allocation (compressed formats estimate it). */
static int read_frames(SNDFILE *sf, const SF_INFO *info, size_t max_frames, float **samples,
                       size_t *n_frames, http_error *e) {
    const size_t ch = (size_t)info->channels;
    size_t cap = info->frames > 0 && (uint64_t)info->frames < max_frames
                     ? (size_t)info->frames + 1
                     : (max_frames < 65536 ? max_frames + 1 : 65536);
    float *buf = malloc(cap * ch * sizeof *buf);
    size_t n = 0;
    while (buf) {
        if (n == cap) {
            if (cap > max_frames) {
                free(buf);
                return too_much(info, n, e);
            }
            cap = cap > max_frames / 2 ? max_frames + 1 : cap * 2;
            float *grown = realloc(buf, cap * ch * sizeof *buf);
            if (!grown) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = grown;
        }
        sf_count_t got = sf_readf_float(sf, buf + n * ch, (sf_count_t)(cap - n));
        if (got <= 0) {
            break;
        }
        n += (size_t)got;
    }
    if (!buf) {
        return http_error_set(e, 500, "server_error", NULL, NULL,
                              "out of memory for the reference audio");
    }
    if (sf_error(sf) != SF_ERR_NO_ERROR || n == 0) {
        free(buf);
        return http_error_set(e, 400, "invalid_request_error", "ref_audio", "invalid_audio",
                              n == 0 ? "reference audio holds no samples%s%s"
                                     : "reference audio cannot be decoded%s%s",
                              sf_error(sf) != SF_ERR_NO_ERROR ? ": " : "",
                              sf_error(sf) != SF_ERR_NO_ERROR ? sf_strerror(sf) : "");
    }
    *samples = buf;
    *n_frames = n;
    return 0;
}

/* The audio file in bytes[0..n_bytes) as interleaved float frames. */
static int decode(const void *bytes, size_t n_bytes, float **samples, size_t *n_frames,
                  SF_INFO *info, http_error *e) {
    memory_file m = {bytes, (sf_count_t)n_bytes, 0};
    SF_VIRTUAL_IO io = {mem_length, mem_seek, mem_read, mem_write, mem_tell};
    memset(info, 0, sizeof *info);
    SNDFILE *sf = sf_open_virtual(&io, SFM_READ, info, &m);
    if (!sf) {
        return http_error_set(e, 400, "invalid_request_error", "ref_audio", "invalid_audio",
                              "reference audio is not in a format libsndfile reads (WAV, FLAC, "
                              "Ogg, MP3): %s", sf_strerror(NULL));
    }
    size_t max_frames = 0;
    int rc = check_format(info, &max_frames, e);
    if (rc == 0) {
        rc = read_frames(sf, info, max_frames, samples, n_frames, e);
    }
    sf_close(sf);
    return rc;
}

/* The status for a failed kz_voice_from_samples, with the library's message. */
static int clone_error(kz_status st, http_error *e) {
    if (st == KZ_STATUS_OUT_OF_MEMORY || st == KZ_STATUS_INTERNAL || st == KZ_STATUS_IO) {
        return http_error_set(e, 500, "server_error", NULL, NULL, "cloning failed: %s",
                              kz_last_error());
    }
    return http_error_set(e, 400, "invalid_request_error", "ref_audio", "invalid_audio", "%s",
                          kz_last_error());
}

int voices_from_audio(voices *v, const void *bytes, size_t n_bytes, const char *ref_text,
                      bool xvector_only, int n_threads, kz_voice **out, http_error *e) {
    *out = NULL;
    const kz_model *model = voices_model(v);
    if (strcmp(kz_model_type(model), "base") != 0) {
        return http_error_set(e, 400, "invalid_request_error", "ref_audio", "model_cannot_clone",
                              "voice cloning needs a Base model (Qwen3-TTS-12Hz-*-Base); this "
                              "server runs a %s model", kz_model_type(model));
    }
    if (!xvector_only && (!ref_text || !ref_text[0])) {
        return http_error_set(e, 400, "invalid_request_error", "ref_text", "missing_ref_text",
                              "an in-context voice needs ref_text, the transcript of the "
                              "reference audio (or set x_vector_only_mode for a voice of the "
                              "speaker embedding alone)");
    }
    if (n_bytes == 0) {
        return http_error_set(e, 400, "invalid_request_error", "ref_audio", "invalid_audio",
                              "reference audio is empty (0 bytes)");
    }
    float *samples = NULL;
    size_t n_frames = 0;
    SF_INFO info;
    int rc = decode(bytes, n_bytes, &samples, &n_frames, &info, e);
    if (rc != 0) {
        return rc;
    }
    kz_voice_params p;
    kz_voice_default_params(&p);
    p.ref_text = xvector_only ? NULL : ref_text;
    p.xvector_only = xvector_only;
    p.n_threads = n_threads;
    kz_status st = kz_voice_from_samples(model, samples, n_frames, info.samplerate,
                                         info.channels, &p, out);
    free(samples);
    return st == KZ_OK ? 0 : clone_error(st, e);
}

/* Whether s[0..n) ends with ";base64", case-insensitively. */
static bool ends_base64(const char *s, size_t n) {
    static const char TAG[] = ";base64";
    const size_t n_tag = sizeof TAG - 1;
    return n >= n_tag && strncasecmp(s + n - n_tag, TAG, n_tag) == 0;
}

int voices_from_data_uri(voices *v, const char *uri, const char *ref_text, bool xvector_only,
                         int n_threads, kz_voice **out, http_error *e) {
    *out = NULL;
    if (!uri || strncasecmp(uri, "data:", 5) != 0) {
        return http_error_set(e, 400, "invalid_request_error", "ref_audio", "invalid_value",
                              "reference audio must be a data: URI with base64 audio "
                              "(data:audio/wav;base64,...); URLs and files are not fetched");
    }
    const char *comma = strchr(uri + 5, ',');
    if (!comma || !ends_base64(uri + 5, (size_t)(comma - uri - 5))) {
        return http_error_set(e, 400, "invalid_request_error", "ref_audio", "invalid_value",
                              "the data: URI must be base64: data:[<media type>];base64,<data>");
    }
    uint8_t *bytes = NULL;
    size_t n_bytes = 0;
    int rc = base64_decode(comma + 1, strlen(comma + 1), &bytes, &n_bytes);
    if (rc == -2) {
        return http_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    }
    if (rc != 0) {
        return http_error_set(e, 400, "invalid_request_error", "ref_audio", "invalid_base64",
                              "the data: URI's base64 is malformed (a character outside the "
                              "base64 alphabet, misplaced '=' padding, or a length that is not "
                              "a multiple of 4)");
    }
    rc = voices_from_audio(v, bytes, n_bytes, ref_text, xvector_only, n_threads, out, e);
    free(bytes);
    return rc;
}
