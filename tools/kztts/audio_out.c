/*
 * audio_out.c - PCM to wav/flac/ogg (libsndfile) or raw f32/s16, via a
 * temporary file renamed on success (see audio_out.h).
 */
#include "audio_out.h"

#include "interrupt.h"

#include <errno.h>
#include <math.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct audio_out {
    char format[8];
    char *path;     /* final name (NULL for stdout) */
    char *tmp_path; /* temporary name (NULL for stdout) */
    FILE *raw;      /* raw formats, and wav on stdout */
    SNDFILE *snd;   /* wav/flac/ogg to a file */
    bool to_stdout;
    /* wav on stdout: the header is written with the first samples (or by a successful
     * finish), so a request that fails before any audio leaves stdout empty */
    bool header_pending;
    int32_t rate;
    size_t total_samples;
};

int audio_format_check(const char *name) {
    static const char *known[] = {"wav", "f32", "s16", "flac", "ogg"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strcmp(name, known[i]) == 0) {
            return 0;
        }
    }
    return -1;
}

static bool is_raw(const char *format) {
    return strcmp(format, "f32") == 0 || strcmp(format, "s16") == 0;
}

static void put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16); p[3] = (unsigned char)(v >> 24);
}

/* 44-byte header of a 16-bit mono PCM WAV of n_samples samples; n_samples 0
 * means "unknown" (streaming): the sizes are set to the maximum, which players
 * read as "until the end of the stream". */
static int write_wav_header(FILE *f, int32_t rate, size_t n_samples) {
    unsigned char h[44];
    uint32_t data = n_samples == 0 || n_samples * 2 > 0xFFFFFFD0u ? 0xFFFFFFFFu - 36
                                                                  : (uint32_t)(n_samples * 2);
    memcpy(h, "RIFF", 4); put_u32(h + 4, 36 + data); memcpy(h + 8, "WAVEfmt ", 8);
    put_u32(h + 16, 16); h[20] = 1; h[21] = 0; h[22] = 1; h[23] = 0;
    put_u32(h + 24, (uint32_t)rate); put_u32(h + 28, (uint32_t)rate * 2);
    h[32] = 2; h[33] = 0; h[34] = 16; h[35] = 0;
    memcpy(h + 36, "data", 4); put_u32(h + 40, data);
    return fwrite(h, 1, 44, f) == 44 ? 0 : -1;
}

static int open_snd(audio_out *o, int32_t rate) {
    SF_INFO info = {.samplerate = rate, .channels = 1};
    if (strcmp(o->format, "wav") == 0) {
        info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
    } else if (strcmp(o->format, "flac") == 0) {
        info.format = SF_FORMAT_FLAC | SF_FORMAT_PCM_16;
    } else {
        info.format = SF_FORMAT_OGG | SF_FORMAT_VORBIS;
    }
    o->snd = sf_open(o->tmp_path, SFM_WRITE, &info);
    if (!o->snd) {
        fprintf(stderr, "kztts: %s: cannot write %s: %s\n", o->path, o->format, sf_strerror(NULL));
        return -1;
    }
    sf_command(o->snd, SFC_SET_CLIPPING, NULL, SF_TRUE);
    return 0;
}

static int open_file(audio_out *o, int32_t rate) {
    size_t n = strlen(o->path) + 32;
    o->tmp_path = malloc(n);
    if (!o->tmp_path) {
        return -1;
    }
    snprintf(o->tmp_path, n, "%s.partial-XXXXXX", o->path);
    interrupt_guard(o->path);
    int fd = mkstemp(o->tmp_path);
    if (fd < 0) {
        fprintf(stderr, "kztts: %s: cannot create: %s\n", o->path, strerror(errno));
        free(o->tmp_path);
        o->tmp_path = NULL;
        return -1;
    }
    // mkstemp creates 0600; give the file the mode a plain fopen would (0666 & ~umask).
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    if (is_raw(o->format)) {
        o->raw = fdopen(fd, "wb");
        return o->raw ? 0 : -1;
    }
    close(fd);
    return open_snd(o, rate);
}

audio_out *audio_out_open(const char *path, const char *format, int32_t sample_rate,
                          size_t total_samples) {
    audio_out *o = calloc(1, sizeof *o);
    if (!o) {
        return NULL;
    }
    snprintf(o->format, sizeof o->format, "%s", format);
    o->to_stdout = strcmp(path, "-") == 0;
    if (o->to_stdout) {
        o->raw = stdout;
        o->header_pending = strcmp(format, "wav") == 0;
        o->rate = sample_rate;
        o->total_samples = total_samples;
        if (!is_raw(format) && strcmp(format, "wav") != 0) {
            fprintf(stderr, "kztts: format %s cannot be written to stdout (use wav, f32, s16)\n",
                    format);
            free(o);
            return NULL;
        }
        return o;
    }
    o->path = strdup(path);
    if (!o->path || open_file(o, sample_rate) != 0) {
        audio_out_finish(o, false);
        return NULL;
    }
    return o;
}

static int16_t to_s16(float v) {
    float s = v * 32767.0f;
    s = s > 32767.0f ? 32767.0f : s < -32768.0f ? -32768.0f : s;
    return (int16_t)lrintf(s);
}

/* Writes the pending stdout wav header. Returns 0 or -1 after printing the problem. */
static int put_pending_header(audio_out *o) {
    if (!o->header_pending) {
        return 0;
    }
    o->header_pending = false;
    if (write_wav_header(o->raw, o->rate, o->total_samples) != 0) {
        fprintf(stderr, "kztts: write error: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

int audio_out_write(audio_out *o, const float *pcm, size_t n_samples) {
    if (put_pending_header(o) != 0) {
        return -1;
    }
    if (o->snd) {
        return sf_write_float(o->snd, pcm, (sf_count_t)n_samples) == (sf_count_t)n_samples ? 0 : -1;
    }
    bool f32 = strcmp(o->format, "f32") == 0;
    for (size_t i = 0; i < n_samples; i++) {
        int16_t s = to_s16(pcm[i]);
        size_t w = f32 ? fwrite(&pcm[i], 4, 1, o->raw) : fwrite(&s, 2, 1, o->raw);
        if (w != 1) {
            fprintf(stderr, "kztts: write error: %s\n", strerror(errno));
            return -1;
        }
    }
    return 0;
}

int audio_out_flush(audio_out *o) {
    if (o->snd) {
        sf_write_sync(o->snd);
        return 0;
    }
    return fflush(o->raw) == 0 ? 0 : -1;
}

int audio_out_finish(audio_out *o, bool success) {
    int rc = success ? put_pending_header(o) : -1;
    if (o->snd && sf_close(o->snd) != 0) {
        rc = -1;
    }
    if (o->raw && (o->to_stdout ? fflush(o->raw) : fclose(o->raw)) != 0) {
        rc = -1;
    }
    if (o->tmp_path) {
        if (rc == 0 && rename(o->tmp_path, o->path) != 0) {
            fprintf(stderr, "kztts: %s: %s\n", o->path, strerror(errno));
            rc = -1;
        }
        if (rc != 0) {
            unlink(o->tmp_path);
        }
    }
    if (o->path) {
        interrupt_unguard(o->path);
    }
    free(o->tmp_path);
    free(o->path);
    free(o);
    return rc;
}
