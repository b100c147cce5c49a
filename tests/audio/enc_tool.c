/*
 * enc_tool.c - audio_enc.h and speed.h as a command for tests/audio/test_codecs.py:
 * raw float32 samples in, one encoded file out, read and fed in chunks as a synthesis
 * streams them.
 *
 *   enc_tool FORMAT RATE IN.f32 OUT [SPEED [CHUNK]]
 *
 * Data flow: IN -> CHUNK samples at a time -> speed_change_run -> audio_enc_write -> sink
 *            -> OUT. Prints one line: "in N out M first_byte_at K before_finish F bytes B":
 *            samples read and encoded, how many had been written when the first byte
 *            reached the sink (-1: none before audio_enc_finish), the bytes it had when
 *            audio_enc_finish was called, and all bytes. Exits 1 with the encoder's
 *            message on a failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio_enc.h"
#include "speed.h"

typedef struct {
    FILE *f;
    size_t bytes;
    long long first_byte_at;
    long long fed;
    size_t before_finish; /* bytes the sink had when audio_enc_finish was called */
} sink_state;

static int to_file(const void *bytes, size_t n, void *user) {
    sink_state *s = user;
    if (s->bytes == 0) {
        s->first_byte_at = s->fed;
    }
    s->bytes += n;
    return fwrite(bytes, 1, n, s->f) == n ? 0 : -1;
}

static float *read_f32(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    float *pcm = NULL;
    if (f && fseek(f, 0, SEEK_END) == 0) {
        const long size = ftell(f);
        *n = size > 0 ? (size_t)size / sizeof(float) : 0;
        pcm = malloc(*n * sizeof *pcm + 1);
        rewind(f);
        if (pcm && fread(pcm, sizeof *pcm, *n, f) != *n) {
            free(pcm);
            pcm = NULL;
        }
    }
    if (f) {
        fclose(f);
    }
    return pcm;
}

static int encode(audio_enc *e, speed_change *sp, const float *pcm, size_t n, size_t chunk,
                  sink_state *st, size_t *n_out) {
    for (size_t i = 0; i < n || i == 0; i += chunk) {
        const size_t m = n - i < chunk ? n - i : chunk;
        const float *out;
        size_t got;
        if (speed_change_run(sp, pcm + i, m, i + m >= n, &out, &got) != 0) {
            fprintf(stderr, "enc_tool: speed change failed\n");
            return -1;
        }
        st->fed = (long long)(i + m);
        if (audio_enc_write(e, out, got) != 0) {
            return -1;
        }
        *n_out += got;
        if (n == 0) {
            break;
        }
    }
    st->fed = -1;
    st->before_finish = st->bytes;
    return audio_enc_finish(e);
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: enc_tool FORMAT RATE IN.f32 OUT [SPEED [CHUNK]]\n");
        return 2;
    }
    const int rate = atoi(argv[2]);
    const float speed = argc > 5 ? strtof(argv[5], NULL) : 1.0f;
    const size_t chunk = argc > 6 ? strtoul(argv[6], NULL, 10) : 1920;
    size_t n = 0;
    float *pcm = read_f32(argv[3], &n);
    if (!pcm || chunk == 0) {
        fprintf(stderr, "enc_tool: cannot read %s\n", argv[3]);
        return 2;
    }
    sink_state st = {.f = fopen(argv[4], "wb"), .first_byte_at = -1};
    char err[256];
    audio_enc *e = st.f ? audio_enc_new(argv[1], rate, 0, to_file, &st, err, sizeof err) : NULL;
    speed_change *sp = speed_change_new(rate, speed);
    size_t n_out = 0;
    int rc = 1;
    if (!st.f) {
        fprintf(stderr, "enc_tool: cannot write %s\n", argv[4]);
    } else if (!e) {
        fprintf(stderr, "enc_tool: %s\n", err);
    } else if (!sp) {
        fprintf(stderr, "enc_tool: bad speed %s\n", argv[5]);
    } else if (encode(e, sp, pcm, n, chunk, &st, &n_out) != 0) {
        fprintf(stderr, "enc_tool: %s\n", audio_enc_error(e));
    } else {
        printf("in %zu out %zu first_byte_at %lld before_finish %zu bytes %zu\n", n, n_out,
               st.first_byte_at, st.before_finish, st.bytes);
        rc = 0;
    }
    audio_enc_free(e);
    speed_change_free(sp);
    if (st.f && fclose(st.f) != 0) {
        rc = 1;
    }
    free(pcm);
    return rc;
}
