/*
 * audio_enc.c - the streaming audio encoders of audio_enc.h: wav, pcm, flac (libFLAC),
 * mp3 (LAME), opus (libopusenc) and aac (vo-aacenc).
 *
 * Data flow: float PCM -> pcm16_from_float (one rounding for every format) -> int16 blocks
 *            -> wav/pcm: little-endian bytes (wav: a 44-byte header first)
 *            -> flac: FLAC__stream_encoder_process_interleaved -> write callback
 *            -> mp3: lame_encode_buffer -> the bytes it returns
 *            -> opus: ope_encoder_write -> page callback
 *            -> aac: 1024-sample frames -> vo-aacenc -> ADTS frames
 *            -> emit -> the caller's sink
 * Nothing reaches the sink before the first samples (or audio_enc_finish): bytes a codec
 * writes when it starts (FLAC's STREAMINFO) wait in `held` until then, so a caller whose
 * synthesis fails first can still answer with an error instead of a started stream.
 * When total_samples is given, the writes must add up to it (the wav and flac headers
 * state it); a different count is an error, not a file whose header lies.
 *
 * Streaming choices: LAME and libFLAC return whole frames as they complete; Ogg Opus
 * pages are closed after a few packets (OPE_SET_MUXING_DELAY) and packets are encoded
 * without look-ahead (OPE_SET_DECISION_DELAY 0), so a page leaves shortly after its
 * audio arrives instead of after libopusenc's default of seconds, at the cost of a page
 * header per few packets; the Opus header pages leave with the first samples (libopusenc
 * writes them then; ope_encoder_flush_header is not called, for the rule above);
 * vo-aacenc takes exact 1024-sample frames, the last one padded with silence, plus silent
 * frames at the end that push the encoder's delay out.
 */
#include "audio_enc.h"

#include <FLAC/stream_encoder.h>
#include <lame/lame.h>
#include <opus/opusenc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vo-aacenc/cmnMemory.h>
#include <vo-aacenc/voAAC.h>

#include "pcm16.h"

enum { BLOCK = 1024 };                       /* samples converted per step; an AAC frame */
enum { MP3_BUF = BLOCK + BLOCK / 4 + 7200 }; /* LAME's worst case for BLOCK samples */
enum { AAC_BITRATE = 64000, MP3_KBPS = 64 };
enum { AAC_FLUSH_FRAMES = 2 };      /* silent frames that carry the encoder's delay out */
enum { OPUS_PAGE_DELAY = 4 * 960 }; /* 48 kHz samples of packets before a page closes */

typedef enum { FMT_WAV, FMT_PCM, FMT_FLAC, FMT_MP3, FMT_OPUS, FMT_AAC } enc_format;

static const struct {
    const char *name, *content_type;
    int32_t min_rate, max_rate;
} FORMATS[] = {
    [FMT_WAV] = {"wav", "audio/wav", 1, 655350},
    [FMT_PCM] = {"pcm", "audio/pcm", 1, 655350},
    [FMT_FLAC] = {"flac", "audio/flac", 1, 655350},
    [FMT_MP3] = {"mp3", "audio/mpeg", 8000, 48000},
    [FMT_OPUS] = {"opus", "audio/ogg", 8000, 192000},
    [FMT_AAC] = {"aac", "audio/aac", 8000, 96000},
};
enum { N_FORMATS = sizeof FORMATS / sizeof FORMATS[0] };

/* The sampling frequencies AAC's ADTS header can name (vo-aacenc refuses others). */
static const int32_t AAC_RATES[] = {8000,  11025, 12000, 16000, 22050, 24000,
                                    32000, 44100, 48000, 64000, 88200, 96000};

struct audio_enc {
    enc_format format;
    int32_t rate;
    size_t total;   /* the promised length, 0 when unknown */
    size_t written; /* samples taken so far */
    audio_enc_sink sink;
    void *user;
    bool started;  /* samples came: bytes flow to the sink */
    bool failed;   /* every later call returns -1 */
    bool finished; /* audio_enc_finish ran */
    unsigned char *held; /* bytes from before the first samples */
    size_t n_held, cap_held;
    char err[200];

    lame_global_flags *lame;
    OggOpusEnc *opus;
    FLAC__StreamEncoder *flac;
    VO_AUDIO_CODECAPI aac_api;
    VO_HANDLE aac;
    VO_MEM_OPERATOR aac_mem;
    VO_CODEC_INIT_USERDATA aac_user;
    int16_t aac_frame[BLOCK]; /* the frame being filled */
    size_t n_aac_frame;
    unsigned char out[MP3_BUF]; /* a codec's output bytes (mp3 frames, AAC frames, pcm) */
};

static int fail(audio_enc *e, const char *fmt, ...) {
    if (!e->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->err, sizeof e->err, fmt, ap);
        va_end(ap);
        e->failed = true;
    }
    return -1;
}

static int hold(audio_enc *e, const void *bytes, size_t n) {
    if (e->n_held + n > e->cap_held) {
        size_t cap = e->cap_held ? e->cap_held : 256;
        while (cap < e->n_held + n) {
            cap *= 2;
        }
        unsigned char *p = realloc(e->held, cap);
        if (!p) {
            return fail(e, "%s: out of memory", FORMATS[e->format].name);
        }
        e->held = p;
        e->cap_held = cap;
    }
    memcpy(e->held + e->n_held, bytes, n);
    e->n_held += n;
    return 0;
}

/* Every encoded byte passes here. */
static int emit(audio_enc *e, const void *bytes, size_t n) {
    if (e->failed) {
        return -1;
    }
    if (n == 0) {
        return 0;
    }
    if (!e->started) {
        return hold(e, bytes, n);
    }
    if (e->sink(bytes, n, e->user) != 0) {
        return fail(e, "the receiver of the %s stream stopped", FORMATS[e->format].name);
    }
    return 0;
}

/* The held bytes go out: the stream has started. */
static int start(audio_enc *e) {
    if (e->started) {
        return 0;
    }
    e->started = true;
    const int rc = emit(e, e->held, e->n_held);
    free(e->held);
    e->held = NULL;
    e->n_held = e->cap_held = 0;
    return rc;
}

/* --- wav and pcm --------------------------------------------------------------------- */

static void put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16); p[3] = (unsigned char)(v >> 24);
}

/* The 44-byte header of a 16-bit mono WAV: exact sizes when `known`, else the maximal
 * sizes players read as "until the end of the stream". */
static int wav_header(audio_enc *e, bool known, size_t n_samples) {
    unsigned char h[44];
    const uint32_t data = !known || n_samples > (0xFFFFFFFFu - 36) / 2 ? 0xFFFFFFFFu - 36
                                                                      : (uint32_t)(n_samples * 2);
    memcpy(h, "RIFF", 4); put_u32(h + 4, 36 + data); memcpy(h + 8, "WAVEfmt ", 8);
    put_u32(h + 16, 16); h[20] = 1; h[21] = 0; h[22] = 1; h[23] = 0;
    put_u32(h + 24, (uint32_t)e->rate); put_u32(h + 28, (uint32_t)e->rate * 2);
    h[32] = 2; h[33] = 0; h[34] = 16; h[35] = 0;
    memcpy(h + 36, "data", 4); put_u32(h + 40, data);
    return emit(e, h, sizeof h);
}

static int pcm_encode(audio_enc *e, const int16_t *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        e->out[2 * i] = (unsigned char)((uint16_t)s[i] & 0xFF);
        e->out[2 * i + 1] = (unsigned char)((uint16_t)s[i] >> 8);
    }
    return emit(e, e->out, 2 * n);
}

/* --- flac ---------------------------------------------------------------------------- */

static FLAC__StreamEncoderWriteStatus flac_write(const FLAC__StreamEncoder *enc,
                                                 const FLAC__byte bytes[], size_t n,
                                                 uint32_t samples, uint32_t frame, void *user) {
    (void)enc; (void)samples; (void)frame;
    return emit(user, bytes, n) == 0 ? FLAC__STREAM_ENCODER_WRITE_STATUS_OK
                                     : FLAC__STREAM_ENCODER_WRITE_STATUS_FATAL_ERROR;
}

static const char *flac_state(const audio_enc *e) {
    return FLAC__StreamEncoderStateString[FLAC__stream_encoder_get_state(e->flac)];
}

/* No seek callback: libFLAC leaves the STREAMINFO it wrote first (the length when
 * known; its MD5 stays unset), which is what a stream can carry. */
static int flac_open(audio_enc *e) {
    if (!(e->flac = FLAC__stream_encoder_new())) {
        return fail(e, "flac: out of memory");
    }
    FLAC__stream_encoder_set_channels(e->flac, 1);
    FLAC__stream_encoder_set_bits_per_sample(e->flac, 16);
    FLAC__stream_encoder_set_sample_rate(e->flac, (uint32_t)e->rate);
    FLAC__stream_encoder_set_compression_level(e->flac, 5);
    FLAC__stream_encoder_set_total_samples_estimate(e->flac, e->total);
    if (FLAC__stream_encoder_init_stream(e->flac, flac_write, NULL, NULL, NULL, e) !=
        FLAC__STREAM_ENCODER_INIT_STATUS_OK) {
        return fail(e, "flac: cannot start the encoder: %s", flac_state(e));
    }
    return 0;
}

static int flac_encode(audio_enc *e, const int16_t *s, size_t n) {
    FLAC__int32 v[BLOCK];
    for (size_t i = 0; i < n; i++) {
        v[i] = s[i];
    }
    if (!FLAC__stream_encoder_process_interleaved(e->flac, v, (uint32_t)n)) {
        return fail(e, "flac: encoding failed: %s", flac_state(e));
    }
    return e->failed ? -1 : 0;
}

static int flac_finish(audio_enc *e) {
    if (!FLAC__stream_encoder_finish(e->flac)) {
        return fail(e, "flac: encoding failed: %s", flac_state(e));
    }
    return e->failed ? -1 : 0;
}

/* --- mp3 ----------------------------------------------------------------------------- */

/* Mono, constant bit rate, no Xing/Info frame (it would need a seek back to fill in).
 * LAME picks the MPEG version from the rate (24 kHz is MPEG-2) and resamples a rate MP3
 * cannot carry to the nearest one it can. */
static int mp3_setup(audio_enc *e) {
    if (!(e->lame = lame_init())) {
        return fail(e, "mp3: out of memory");
    }
    lame_set_in_samplerate(e->lame, e->rate);
    lame_set_num_channels(e->lame, 1);
    lame_set_mode(e->lame, MONO);
    lame_set_VBR(e->lame, vbr_off);
    lame_set_brate(e->lame, MP3_KBPS);
    lame_set_bWriteVbrTag(e->lame, 0);
    lame_set_quality(e->lame, 5);
    if (lame_init_params(e->lame) < 0) {
        return fail(e, "mp3: LAME refused a %d Hz mono stream", (int)e->rate);
    }
    return 0;
}

/* LAME fills global tables the first time an encoder is set up, unguarded: the server's
 * threads set theirs up one at a time. */
static int mp3_open(audio_enc *e) {
    static pthread_mutex_t setup = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&setup);
    const int rc = mp3_setup(e);
    pthread_mutex_unlock(&setup);
    return rc;
}

static int mp3_encode(audio_enc *e, const int16_t *s, size_t n) {
    // Mono: LAME reads the left channel only.
    const int got = lame_encode_buffer(e->lame, s, s, (int)n, e->out, (int)sizeof e->out);
    if (got < 0) {
        return fail(e, "mp3: LAME failed (%d)", got);
    }
    return emit(e, e->out, (size_t)got);
}

static int mp3_finish(audio_enc *e) {
    const int got = lame_encode_flush(e->lame, e->out, (int)sizeof e->out);
    if (got < 0) {
        return fail(e, "mp3: LAME failed (%d)", got);
    }
    return emit(e, e->out, (size_t)got);
}

/* --- opus ---------------------------------------------------------------------------- */

static int oggopus_write(void *user, const unsigned char *bytes, opus_int32 n) {
    return emit(user, bytes, (size_t)n) == 0 ? 0 : 1;
}

static int oggopus_close(void *user) {
    (void)user;
    return 0;
}

/* The serial number is fixed, so the same audio gives the same bytes (libopusenc's
 * default draws it from rand()). The frame duration is set although it is libopusenc's
 * default: only setting it initializes what draining reads. */
static int oggopus_open(audio_enc *e) {
    static const OpusEncCallbacks callbacks = {oggopus_write, oggopus_close};
    OggOpusComments *comments = ope_comments_create();
    if (!comments) {
        return fail(e, "opus: out of memory");
    }
    int err = OPE_OK;
    e->opus = ope_encoder_create_callbacks(&callbacks, e, comments, e->rate, 1, 0, &err);
    ope_comments_destroy(comments);
    if (!e->opus) {
        return fail(e, "opus: cannot start the encoder: %s", ope_strerror(err));
    }
    if ((err = ope_encoder_ctl(e->opus, OPE_SET_DECISION_DELAY(0))) != OPE_OK ||
        (err = ope_encoder_ctl(e->opus, OPE_SET_MUXING_DELAY(OPUS_PAGE_DELAY))) != OPE_OK ||
        (err = ope_encoder_ctl(e->opus, OPE_SET_SERIALNO(0x6b7a7474))) != OPE_OK ||
        (err = ope_encoder_ctl(e->opus, OPUS_SET_EXPERT_FRAME_DURATION(OPUS_FRAMESIZE_20_MS))) !=
            OPE_OK) {
        return fail(e, "opus: cannot set up the encoder: %s", ope_strerror(err));
    }
    return 0;
}

static int oggopus_encode(audio_enc *e, const int16_t *s, size_t n) {
    const int err = ope_encoder_write(e->opus, s, (int)n);
    if (err != OPE_OK) {
        return fail(e, "opus: encoding failed: %s", ope_strerror(err));
    }
    return e->failed ? -1 : 0;
}

static int oggopus_finish(audio_enc *e) {
    // libopusenc sets a stream's end only when samples are written: an empty stream
    // gets an empty write first, else draining would read the end uninitialized.
    int16_t none[1] = {0};
    int err = e->written == 0 ? ope_encoder_write(e->opus, none, 0) : OPE_OK;
    if (err == OPE_OK) {
        err = ope_encoder_drain(e->opus);
    }
    if (err != OPE_OK) {
        return fail(e, "opus: encoding failed: %s", ope_strerror(err));
    }
    return e->failed ? -1 : 0;
}

/* --- aac ----------------------------------------------------------------------------- */

static bool aac_rate(int32_t rate) {
    for (size_t i = 0; i < sizeof AAC_RATES / sizeof AAC_RATES[0]; i++) {
        if (AAC_RATES[i] == rate) {
            return true;
        }
    }
    return false;
}

static int aac_open(audio_enc *e) {
    voGetAACEncAPI(&e->aac_api);
    e->aac_mem = (VO_MEM_OPERATOR){cmnMemAlloc, cmnMemFree, cmnMemSet, cmnMemCopy,
                                   cmnMemCheck, cmnMemCompare, cmnMemMove};
    e->aac_user = (VO_CODEC_INIT_USERDATA){.memflag = VO_IMF_USERMEMOPERATOR,
                                           .memData = &e->aac_mem};
    if (e->aac_api.Init(&e->aac, VO_AUDIO_CodingAAC, &e->aac_user) != VO_ERR_NONE) {
        e->aac = NULL;
        return fail(e, "aac: cannot start the encoder");
    }
    AACENC_PARAM param = {.sampleRate = e->rate, .nChannels = 1, .adtsUsed = 1};
    // An AAC frame cannot carry more than about six bits per sample.
    param.bitRate = AAC_BITRATE < 6 * e->rate ? AAC_BITRATE : 6 * e->rate;
    if (e->aac_api.SetParam(e->aac, VO_PID_AAC_ENCPARAM, &param) != VO_ERR_NONE) {
        return fail(e, "aac: the encoder refused a %d Hz mono stream", (int)e->rate);
    }
    return 0;
}

/* Encodes the full frame in aac_frame and emits the ADTS frames that come out. */
static int aac_frame_out(audio_enc *e) {
    VO_CODECBUFFER in = {.Buffer = (VO_PBYTE)e->aac_frame, .Length = sizeof e->aac_frame};
    if (e->aac_api.SetInputData(e->aac, &in) != VO_ERR_NONE) {
        return fail(e, "aac: the encoder refused its input");
    }
    e->n_aac_frame = 0;
    for (;;) {
        VO_CODECBUFFER out = {.Buffer = e->out, .Length = sizeof e->out};
        VO_AUDIO_OUTPUTINFO info;
        const VO_U32 rc = e->aac_api.GetOutputData(e->aac, &out, &info);
        if (rc == VO_ERR_INPUT_BUFFER_SMALL) {
            return 0;
        }
        if (rc != VO_ERR_NONE) {
            return fail(e, "aac: encoding failed (0x%x)", (unsigned)rc);
        }
        if (emit(e, out.Buffer, out.Length) != 0) {
            return -1;
        }
    }
}

static int aac_encode(audio_enc *e, const int16_t *s, size_t n) {
    while (n > 0) {
        const size_t take = BLOCK - e->n_aac_frame < n ? BLOCK - e->n_aac_frame : n;
        memcpy(e->aac_frame + e->n_aac_frame, s, take * sizeof *s);
        e->n_aac_frame += take;
        s += take;
        n -= take;
        if (e->n_aac_frame == BLOCK && aac_frame_out(e) != 0) {
            return -1;
        }
    }
    return 0;
}

static int aac_finish(audio_enc *e) {
    const int frames = (e->n_aac_frame > 0) + AAC_FLUSH_FRAMES;
    for (int i = 0; i < frames; i++) {
        memset(e->aac_frame + e->n_aac_frame, 0, (BLOCK - e->n_aac_frame) * sizeof(int16_t));
        e->n_aac_frame = BLOCK;
        if (aac_frame_out(e) != 0) {
            return -1;
        }
    }
    return 0;
}

/* --- the interface ------------------------------------------------------------------- */

static int find_format(const char *format) {
    for (int i = 0; format && i < N_FORMATS; i++) {
        if (strcmp(format, FORMATS[i].name) == 0) {
            return i;
        }
    }
    return -1;
}

bool audio_enc_known(const char *format) {
    return find_format(format) >= 0;
}

const char *audio_enc_content_type(const char *format) {
    const int f = find_format(format);
    return f < 0 ? NULL : FORMATS[f].content_type;
}

static int open_codec(audio_enc *e) {
    switch (e->format) {
    case FMT_FLAC: return flac_open(e);
    case FMT_MP3: return mp3_open(e);
    case FMT_OPUS: return oggopus_open(e);
    case FMT_AAC: return aac_open(e);
    default: return 0;
    }
}

audio_enc *audio_enc_new(const char *format, int32_t sample_rate, size_t total_samples,
                         audio_enc_sink sink, void *user, char *err, size_t n_err) {
    const int f = find_format(format);
    if (f < 0) {
        snprintf(err, n_err, "unknown audio format '%s' (wav, pcm, flac, mp3, opus, aac)",
                 format ? format : "");
        return NULL;
    }
    if (f == FMT_AAC && !aac_rate(sample_rate)) {
        snprintf(err, n_err,
                 "aac needs a sample rate of 8000, 11025, 12000, 16000, 22050, 24000, 32000, "
                 "44100, 48000, 64000, 88200 or 96000 Hz (not %d)",
                 (int)sample_rate);
        return NULL;
    }
    if (sample_rate < FORMATS[f].min_rate || sample_rate > FORMATS[f].max_rate) {
        snprintf(err, n_err, "%s needs a sample rate of %d-%d Hz (not %d)", FORMATS[f].name,
                 (int)FORMATS[f].min_rate, (int)FORMATS[f].max_rate, (int)sample_rate);
        return NULL;
    }
    if (!sink) {
        snprintf(err, n_err, "%s: no sink for the encoded bytes", FORMATS[f].name);
        return NULL;
    }
    audio_enc *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, n_err, "%s: out of memory", FORMATS[f].name);
        return NULL;
    }
    *e = (audio_enc){.format = (enc_format)f, .rate = sample_rate, .total = total_samples,
                     .sink = sink, .user = user};
    if (open_codec(e) != 0) {
        snprintf(err, n_err, "%s", e->err);
        audio_enc_free(e);
        return NULL;
    }
    return e;
}

static int encode_block(audio_enc *e, const int16_t *s, size_t n) {
    switch (e->format) {
    case FMT_WAV:
    case FMT_PCM: return pcm_encode(e, s, n);
    case FMT_FLAC: return flac_encode(e, s, n);
    case FMT_MP3: return mp3_encode(e, s, n);
    case FMT_OPUS: return oggopus_encode(e, s, n);
    case FMT_AAC: return aac_encode(e, s, n);
    }
    return -1;
}

/* The wav header goes out with the first samples: exact when the total is known. */
static int begin_stream(audio_enc *e) {
    if (start(e) != 0) {
        return -1;
    }
    return e->format == FMT_WAV ? wav_header(e, e->total > 0, e->total) : 0;
}

int audio_enc_write(audio_enc *e, const float *pcm, size_t n) {
    if (e->failed) {
        return -1;
    }
    if (e->finished) {
        return fail(e, "%s: audio written after the end", FORMATS[e->format].name);
    }
    if (n == 0) {
        return 0;
    }
    if (e->total > 0 && n > e->total - e->written) {
        return fail(e, "%s: more samples than the %zu announced", FORMATS[e->format].name,
                    e->total);
    }
    if (!e->started && begin_stream(e) != 0) {
        return -1;
    }
    int16_t s[BLOCK];
    for (size_t i = 0; i < n; i += BLOCK) {
        const size_t m = n - i < BLOCK ? n - i : BLOCK;
        for (size_t j = 0; j < m; j++) {
            s[j] = pcm16_from_float(pcm[i + j]);
        }
        if (encode_block(e, s, m) != 0) {
            return -1;
        }
    }
    e->written += n;
    return 0;
}

static int finish_codec(audio_enc *e) {
    switch (e->format) {
    case FMT_FLAC: return flac_finish(e);
    case FMT_MP3: return mp3_finish(e);
    case FMT_OPUS: return oggopus_finish(e);
    case FMT_AAC: return aac_finish(e);
    default: return 0;
    }
}

int audio_enc_finish(audio_enc *e) {
    if (e->failed) {
        return -1;
    }
    if (e->finished) {
        return fail(e, "%s: finished twice", FORMATS[e->format].name);
    }
    e->finished = true;
    if (e->total > 0 && e->written != e->total) {
        return fail(e, "%s: %zu samples written, %zu announced", FORMATS[e->format].name,
                    e->written, e->total);
    }
    if (!e->started) {
        // No samples: an empty stream, whose wav header then knows its length.
        if (start(e) != 0 || (e->format == FMT_WAV && wav_header(e, true, 0) != 0)) {
            return -1;
        }
    }
    return finish_codec(e);
}

const char *audio_enc_error(const audio_enc *e) {
    return e && e->failed ? e->err : "";
}

void audio_enc_free(audio_enc *e) {
    if (!e) {
        return;
    }
    // Unfinished output is dropped: libFLAC's delete finishes the stream, and those
    // bytes must not reach a sink whose owner has moved on.
    e->failed = true;
    if (e->lame) {
        lame_close(e->lame);
    }
    if (e->opus) {
        ope_encoder_destroy(e->opus);
    }
    if (e->flac) {
        FLAC__stream_encoder_delete(e->flac);
    }
    if (e->aac) {
        e->aac_api.Uninit(e->aac);
    }
    free(e->held);
    free(e);
}
