/*
 * audio_read.c - an audio file into interleaved float samples (kz_audio_read_file):
 *
 *   path -> kz_regular_file_open (missing, unreadable, a directory or a FIFO: IO error)
 *   -> sf_open_fd (not audio libsndfile reads: BAD_INPUT) -> rate and channels checked
 *   -> sf_readf_float into a buffer that doubles up to KZ_AUDIO_MAX_SECONDS of audio
 *   -> decoding error or no frames: BAD_INPUT
 *
 * This is how the official pipeline reads a path: librosa.load(path, sr=None, mono=True)
 * (Qwen3TTSModel._load_audio_to_np, Qwen3TTSTokenizer.load_audio) opens it with
 * soundfile.SoundFile and reads every frame with dtype float32, which is libsndfile's
 * sf_readf_float with its default float normalisation (integer PCM / 2^(bits-1), no
 * clipping); URLs and base64 go through soundfile.read the same way. The downmix
 * happens later (kz_audio_prepare_reference), as librosa.load's to_mono does.
 *
 * The header's frame count only sizes the first allocation: compressed formats estimate
 * it, and a malformed file may claim anything, so reading stops at the file's real end
 * or at the limit, whichever comes first.
 *
 * Known wart: libmpg123, libsndfile's MP3 decoder, prints its own warnings about a
 * malformed MP3 stream to stderr; libsndfile (1.2) does not set MPG123_QUIET and offers
 * no way to, so the library's "never prints" holds for every input but broken MP3s.
 */
#include "audio/audio_in.h"

#include <stdlib.h>
#include <unistd.h>

#include <sndfile.h>

#include "io/regular_file.h"
#include "runtime/error.h"

/* What prepare accepts (audio_in.h); a file outside it is refused here by name. */
#define MIN_RATE 8000
#define MAX_RATE 384000
#define MAX_CHANNELS 64
/* The buffer never grows past this many samples (1 GiB of floats), whatever the limit
 * in seconds allows, so that a many-channel file cannot exhaust memory. */
#define MAX_SAMPLES ((size_t)1 << 28)
/* First allocation when the header gives no length, and at most, in samples. */
#define FIRST_SAMPLES ((size_t)1 << 20)

typedef struct audio_buffer {
    float *samples; /* [cap_frames, channels] */
    size_t n_frames, cap_frames, max_frames;
    int channels, rate;
} audio_buffer;

/* Grows b to twice its capacity, at most max_frames + 1 (the extra frame reveals that a
 * file is longer than allowed). */
static kz_status grow(audio_buffer *b, const char *path) {
    size_t cap = b->cap_frames > b->max_frames / 2 ? b->max_frames + 1 : b->cap_frames * 2;
    float *grown = realloc(b->samples, cap * (size_t)b->channels * sizeof(float));
    if (!grown) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: out of memory for %zu frames", path, cap);
    }
    b->samples = grown;
    b->cap_frames = cap;
    return KZ_OK;
}

static kz_status too_long(const audio_buffer *b, const char *path) {
    if (b->max_frames == (size_t)b->rate * KZ_AUDIO_MAX_SECONDS) {
        return kz_error_set(KZ_STATUS_BAD_INPUT,
                            "%s: longer than %d s (%zu frames at %d Hz), the most a reference "
                            "may last",
                            path, KZ_AUDIO_MAX_SECONDS, b->max_frames, b->rate);
    }
    return kz_error_set(KZ_STATUS_BAD_INPUT,
                        "%s: more than %zu frames of %d channels, too large for a reference", path,
                        b->max_frames, b->channels);
}

/* Reads frames until the end of the stream into b. */
static kz_status read_frames(SNDFILE *sf, audio_buffer *b, const char *path) {
    for (;;) {
        if (b->n_frames == b->cap_frames) {
            if (b->cap_frames > b->max_frames) {
                return too_long(b, path);
            }
            kz_status st = grow(b, path);
            if (st != KZ_OK) {
                return st;
            }
        }
        sf_count_t want = (sf_count_t)(b->cap_frames - b->n_frames);
        sf_count_t got = sf_readf_float(sf, b->samples + b->n_frames * (size_t)b->channels, want);
        if (got <= 0) {
            break;
        }
        b->n_frames += (size_t)got;
    }
    if (sf_error(sf) != SF_ERR_NO_ERROR) {
        return kz_error_set(KZ_STATUS_BAD_INPUT, "%s: cannot decode after %zu frames: %s", path,
                            b->n_frames, sf_strerror(sf));
    }
    if (b->n_frames == 0) {
        return kz_error_set(KZ_STATUS_BAD_INPUT, "%s: no audio in the file (0 frames)", path);
    }
    float *fit = realloc(b->samples, b->n_frames * (size_t)b->channels * sizeof(float));
    if (fit) {
        b->samples = fit;
    }
    return KZ_OK;
}

/* Checks what the header says and sizes the first allocation. */
static kz_status start_buffer(const SF_INFO *info, audio_buffer *b, const char *path) {
    if (info->channels < 1 || info->channels > MAX_CHANNELS) {
        return kz_error_set(KZ_STATUS_BAD_INPUT, "%s: %d channels; 1..%d are accepted", path,
                            info->channels, MAX_CHANNELS);
    }
    if (info->samplerate < MIN_RATE || info->samplerate > MAX_RATE) {
        return kz_error_set(KZ_STATUS_BAD_INPUT, "%s: sample rate %d Hz; %d..%d are accepted", path,
                            info->samplerate, MIN_RATE, MAX_RATE);
    }
    b->channels = info->channels;
    b->rate = info->samplerate;
    b->max_frames = (size_t)info->samplerate * KZ_AUDIO_MAX_SECONDS;
    if (b->max_frames > MAX_SAMPLES / (size_t)b->channels - 1) {
        b->max_frames = MAX_SAMPLES / (size_t)b->channels - 1;
    }
    /* One frame more than the header says, so that reading a file of the length it
     * claims ends without growing the buffer. */
    size_t first = FIRST_SAMPLES / (size_t)b->channels;
    if (info->frames >= 0 && (uint64_t)info->frames < first) {
        first = (size_t)info->frames + 1;
    }
    b->cap_frames = first;
    b->samples = malloc(first * (size_t)b->channels * sizeof(float));
    if (!b->samples) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    return KZ_OK;
}

kz_status kz_audio_read_file(const char *path, float **samples, size_t *n_frames,
                             int32_t *sample_rate, int32_t *channels) {
    if (!path || !samples || !n_frames || !sample_rate || !channels) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "audio file: NULL argument");
    }
    *samples = NULL;
    *n_frames = 0;
    *sample_rate = 0;
    *channels = 0;
    int fd;
    uint64_t n_bytes;
    kz_status st = kz_regular_file_open(path, &fd, &n_bytes);
    if (st != KZ_OK) {
        return st;
    }
    /* libsndfile leaves the descriptor open (close_desc false) whether or not it opens the
     * file, so it is closed once, here. */
    SF_INFO info = {0};
    SNDFILE *sf = sf_open_fd(fd, SFM_READ, &info, SF_FALSE);
    if (!sf) {
        int err = sf_error(NULL);
        st = kz_error_set(err == SF_ERR_SYSTEM ? KZ_STATUS_IO : KZ_STATUS_BAD_INPUT,
                          "%s: not audio libsndfile can read (%s)", path, sf_strerror(NULL));
        close(fd);
        return st;
    }
    audio_buffer b = {0};
    st = start_buffer(&info, &b, path);
    if (st == KZ_OK) {
        st = read_frames(sf, &b, path);
    }
    sf_close(sf);
    close(fd);
    if (st != KZ_OK) {
        free(b.samples);
        return st;
    }
    *samples = b.samples;
    *n_frames = b.n_frames;
    *sample_rate = info.samplerate;
    *channels = info.channels;
    return KZ_OK;
}
