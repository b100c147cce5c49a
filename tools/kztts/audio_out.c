/*
 * audio_out.c - PCM to wav/flac/ogg (libsndfile), mp3/opus/aac/pcm (audio_enc.h) or raw
 * f32/s16 on an out_file (see audio_out.h), optionally sped up or slowed down first.
 *
 * Data flow: float PCM -> speed_change (--speed other than 1) -> one of:
 *                      -> raw: s16/f32 bytes -> out_file_write
 *                      -> wav on a stream that cannot seek: 44-byte header with the first
 *                         samples, then s16 bytes -> out_file_write
 *                      -> mp3, opus, aac, pcm: audio_enc -> its sink -> out_file_write
 *                      -> else libsndfile encoder -> virtual IO callbacks -> out_file_write
 * 16-bit formats (s16, wav, flac, and what audio_enc encodes) all take their samples from
 * pcm16_from_float, so a WAV written to a file holds the bytes of one streamed to a pipe,
 * of the raw s16 output and of pcm (libsndfile's own float-to-short conversion rounds
 * differently).
 * Every byte passes out_file_write, so a failure (a full disk, /dev/full, a closed pipe)
 * is recorded with its errno once, whichever encoder hit it.
 */
#define _POSIX_C_SOURCE 200809L /* fseeko, ftello, fileno */

#include "audio_out.h"

#include <errno.h>
#include <math.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "audio_enc.h"
#include "pcm16.h"
#include "speed.h"

struct audio_out {
    char format[8];
    out_file *file;
    SNDFILE *snd;        /* wav/flac/ogg on a seekable output */
    audio_enc *enc;      /* mp3, opus, aac, pcm */
    speed_change *speed; /* --speed other than 1, else NULL */
    bool snd_s16;        /* snd is a 16-bit format: fed sf_write_short of pcm16_from_float */
    bool header_pending; /* wav on a stream: the header goes out with the first samples
                            (or with a successful end), so a failure first leaves it empty */
    bool drained;        /* the speed change gave its last samples (audio_out_drain) */
    int32_t rate;
    size_t total_samples;
    size_t n_encoded;    /* samples into the format, after the speed change */
};

static bool is_raw(const char *format) {
    return strcmp(format, "f32") == 0 || strcmp(format, "s16") == 0;
}

/* The formats only audio_enc writes (its wav and flac are libsndfile's here, whose files
 * stay as they were). */
static bool is_encoded(const char *format) {
    return audio_enc_known(format) && strcmp(format, "wav") != 0 && strcmp(format, "flac") != 0;
}

static void put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16); p[3] = (unsigned char)(v >> 24);
}

/* 44-byte header of a 16-bit mono PCM WAV of n_samples samples; n_samples 0
 * means "unknown" (streaming): the sizes are set to the maximum, which players
 * read as "until the end of the stream". */
static int write_wav_header(out_file *f, int32_t rate, size_t n_samples) {
    unsigned char h[44];
    uint32_t data = n_samples == 0 || n_samples * 2 > 0xFFFFFFD0u ? 0xFFFFFFFFu - 36
                                                                  : (uint32_t)(n_samples * 2);
    memcpy(h, "RIFF", 4); put_u32(h + 4, 36 + data); memcpy(h + 8, "WAVEfmt ", 8);
    put_u32(h + 16, 16); h[20] = 1; h[21] = 0; h[22] = 1; h[23] = 0;
    put_u32(h + 24, (uint32_t)rate); put_u32(h + 28, (uint32_t)rate * 2);
    h[32] = 2; h[33] = 0; h[34] = 16; h[35] = 0;
    memcpy(h + 36, "data", 4); put_u32(h + 40, data);
    return out_file_write(f, h, sizeof h);
}

/* --- libsndfile on the out_file's stream ---------------------------------------------- */

static sf_count_t vio_length(void *user) {
    FILE *s = out_file_stream(user);
    struct stat st;
    return fflush(s) == 0 && fstat(fileno(s), &st) == 0 ? (sf_count_t)st.st_size : -1;
}

static sf_count_t vio_seek(sf_count_t offset, int whence, void *user) {
    FILE *s = out_file_stream(user);
    return fseeko(s, (off_t)offset, whence) == 0 ? (sf_count_t)ftello(s) : -1;
}

static sf_count_t vio_read(void *ptr, sf_count_t n_bytes, void *user) {
    return (sf_count_t)fread(ptr, 1, (size_t)n_bytes, out_file_stream(user));
}

static sf_count_t vio_write(const void *ptr, sf_count_t n_bytes, void *user) {
    return out_file_write(user, ptr, (size_t)n_bytes) == 0 ? n_bytes : 0;
}

static sf_count_t vio_tell(void *user) {
    return (sf_count_t)ftello(out_file_stream(user));
}

static int open_snd(audio_out *o) {
    static SF_VIRTUAL_IO io = {vio_length, vio_seek, vio_read, vio_write, vio_tell};
    SF_INFO info = {.samplerate = o->rate, .channels = 1};
    o->snd_s16 = strcmp(o->format, "ogg") != 0;
    if (strcmp(o->format, "wav") == 0) {
        info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
    } else if (strcmp(o->format, "flac") == 0) {
        info.format = SF_FORMAT_FLAC | SF_FORMAT_PCM_16;
    } else {
        info.format = SF_FORMAT_OGG | SF_FORMAT_VORBIS;
    }
    o->snd = sf_open_virtual(&io, SFM_WRITE, &info, o->file);
    if (!o->snd) {
        fprintf(stderr, "kztts: %s: cannot write %s: %s\n", out_file_name(o->file), o->format,
                out_file_failed(o->file) ? "write failed" : sf_strerror(NULL));
        return -1;
    }
    sf_command(o->snd, SFC_SET_CLIPPING, NULL, SF_TRUE);
    return 0;
}

static int enc_sink(const void *bytes, size_t n_bytes, void *user) {
    return out_file_write(user, bytes, n_bytes);
}

static int open_enc(audio_out *o) {
    char err[256];
    o->enc = audio_enc_new(o->format, o->rate, 0, enc_sink, o->file, err, sizeof err);
    if (!o->enc) {
        fprintf(stderr, "kztts: %s: cannot write %s\n", out_file_name(o->file), err);
        return -1;
    }
    return 0;
}

static void free_out(audio_out *o) {
    audio_enc_free(o->enc);
    speed_change_free(o->speed);
    free(o);
}

audio_out *audio_out_open(const char *path, const char *format, int32_t sample_rate,
                          size_t total_samples, float speed) {
    audio_out *o = calloc(1, sizeof *o);
    if (!o || (speed != 1.0f && !(o->speed = speed_change_new(sample_rate, speed)))) {
        fprintf(stderr, "kztts: %s: out of memory\n", path);
        free(o);
        return NULL;
    }
    snprintf(o->format, sizeof o->format, "%s", format);
    o->rate = sample_rate;
    // The sped-up length is sonic's to decide: a stream's wav header then says "unknown".
    o->total_samples = o->speed ? 0 : total_samples;
    const bool streamable = is_raw(format) || is_encoded(format) || strcmp(format, "wav") == 0;
    // Checked before opening too: opening a FIFO waits for its reader.
    if (!streamable && out_file_is_pipe(path)) {
        fprintf(stderr, "kztts: %s: format %s needs an output that can seek (use wav, f32, s16, "
                        "pcm, mp3, opus, aac)\n",
                strcmp(path, "-") == 0 ? "stdout" : path, format);
        free_out(o);
        return NULL;
    }
    if (!(o->file = out_file_open(path))) {
        free_out(o);
        return NULL;
    }
    int rc = 0;
    if (!out_file_seekable(o->file) && !streamable) {
        fprintf(stderr, "kztts: %s: format %s needs an output that can seek (use wav, f32, s16, "
                        "pcm, mp3, opus, aac)\n",
                out_file_name(o->file), format);
        rc = -1;
    } else if (is_encoded(format)) {
        rc = open_enc(o);
    } else if (!out_file_seekable(o->file)) {
        o->header_pending = strcmp(format, "wav") == 0;
    } else if (!is_raw(format)) {
        rc = open_snd(o);
    }
    if (rc != 0) {
        out_file_commit(&o->file, 1, false);
        free_out(o);
        return NULL;
    }
    return o;
}

static int put_pending_header(audio_out *o) {
    if (!o->header_pending) {
        return 0;
    }
    o->header_pending = false;
    return write_wav_header(o->file, o->rate, o->total_samples);
}

/* Samples after the speed change into the format. */
static int encode(audio_out *o, const float *pcm, size_t n_samples) {
    if (out_file_failed(o->file) || put_pending_header(o) != 0) {
        return -1;
    }
    o->n_encoded += n_samples;
    if (o->enc) {
        // The sink records a failed write; otherwise the codec says what went wrong.
        return audio_enc_write(o->enc, pcm, n_samples) == 0
                   ? 0
                   : out_file_fail_msg(o->file, audio_enc_error(o->enc));
    }
    if (o->snd && !o->snd_s16) {
        if (sf_write_float(o->snd, pcm, (sf_count_t)n_samples) != (sf_count_t)n_samples) {
            return out_file_fail_msg(o->file, sf_strerror(o->snd)); // unless a write recorded why
        }
        return 0;
    }
    const bool f32 = strcmp(o->format, "f32") == 0;
    int16_t s16[512];
    for (size_t i = 0; i < n_samples && !f32; i += 512) {
        const size_t n = n_samples - i < 512 ? n_samples - i : 512;
        for (size_t j = 0; j < n; j++) {
            s16[j] = pcm16_from_float(pcm[i + j]);
        }
        if (o->snd) {
            if (sf_write_short(o->snd, s16, (sf_count_t)n) != (sf_count_t)n) {
                return out_file_fail_msg(o->file, sf_strerror(o->snd));
            }
        } else if (out_file_write(o->file, s16, n * sizeof *s16) != 0) {
            return -1;
        }
    }
    return f32 ? out_file_write(o->file, pcm, n_samples * sizeof *pcm) : 0;
}

/* The speed change's output for pcm (last: everything it still holds) into the format. */
static int write_sped(audio_out *o, const float *pcm, size_t n_samples, bool last) {
    const float *out;
    size_t n_out;
    if (speed_change_run(o->speed, pcm, n_samples, last, &out, &n_out) != 0) {
        return out_file_fail(o->file, ENOMEM);
    }
    return n_out > 0 ? encode(o, out, n_out) : 0;
}

int audio_out_write(audio_out *o, const float *pcm, size_t n_samples) {
    if (out_file_failed(o->file)) {
        return -1;
    }
    return o->speed ? write_sped(o, pcm, n_samples, false) : encode(o, pcm, n_samples);
}

int audio_out_flush(audio_out *o) {
    if (o->snd) {
        sf_write_sync(o->snd);
    }
    if (!out_file_failed(o->file) && fflush(out_file_stream(o->file)) != 0) {
        return out_file_fail(o->file, errno);
    }
    return out_file_failed(o->file) ? -1 : 0;
}

bool audio_out_failed(const audio_out *o) {
    return out_file_failed(o->file);
}

size_t audio_out_samples(const audio_out *o) {
    return o->n_encoded;
}

int audio_out_drain(audio_out *o) {
    if (o->speed && !o->drained && !out_file_failed(o->file)) {
        o->drained = true;
        return write_sped(o, NULL, 0, true);
    }
    return out_file_failed(o->file) ? -1 : 0;
}

out_file *audio_out_end(audio_out *o, bool success) {
    if (success) {
        audio_out_drain(o);
        put_pending_header(o);
    }
    if (success && o->enc && !out_file_failed(o->file) && audio_enc_finish(o->enc) != 0) {
        out_file_fail_msg(o->file, audio_enc_error(o->enc));
    }
    if (o->snd) {
        const int err = sf_close(o->snd);
        if (err != 0) {
            out_file_fail_msg(o->file, sf_error_number(err));
        }
    }
    out_file *f = o->file;
    free_out(o);
    return f;
}

int audio_out_finish(audio_out *o, bool success) {
    out_file *f = audio_out_end(o, success);
    return out_file_commit(&f, 1, success);
}
