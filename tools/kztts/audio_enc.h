/*
 * audio_enc.h - streaming audio encoders shared by `kztts synth` and `kztts serve`:
 * float PCM in, encoded bytes out through a sink callback as soon as the encoder has
 * them (an HTTP response, a file).
 *
 * Formats (OpenAI's response_format names):
 *   wav   16-bit PCM RIFF; a stream's header carries maximal sizes (0xFFFFFFFF) unless
 *         total_samples is known, the convention players accept for live WAV
 *   pcm   raw signed 16-bit little-endian samples, no header
 *   flac  FLAC, 16-bit (libFLAC stream encoder: no seeking back)
 *   mp3   MPEG audio layer III (LAME), mono, constant bit rate
 *   opus  Ogg Opus (libopusenc), 48 kHz inside as Opus requires, the input rate in the header
 *   aac   AAC-LC in ADTS frames (vo-aacenc)
 * Samples are clipped to [-1, 1] and rounded to 16 bits the same way for every format
 * (wav and pcm hold the bytes `kztts synth --format s16` writes).
 */
#ifndef KZ_AUDIO_ENC_H
#define KZ_AUDIO_ENC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Receives n_bytes of encoded audio (valid during the call). Returns 0 to go on, -1 to
 * stop: the encoder then fails every later call with -1. */
typedef int (*audio_enc_sink)(const void *bytes, size_t n_bytes, void *user);

typedef struct audio_enc audio_enc;

/* Whether format is one of the names above (exact, lower case). */
bool audio_enc_known(const char *format);

/* The HTTP Content-Type of a format: audio/wav, audio/pcm, audio/flac, audio/mpeg,
 * audio/ogg, audio/aac; NULL for an unknown format. */
const char *audio_enc_content_type(const char *format);

/* A new encoder of mono audio at sample_rate Hz into sink. total_samples is the final
 * length when known (wav header), else 0. On failure writes one line into err (e.g.
 * "mp3 needs a sample rate of 8000-48000 Hz") and returns NULL. */
audio_enc *audio_enc_new(const char *format, int32_t sample_rate, size_t total_samples,
                         audio_enc_sink sink, void *user, char *err, size_t n_err);

/* Encodes n samples in [-1, 1]; whatever bytes are complete reach the sink before it
 * returns (the codecs keep at most one frame of look-ahead). Returns 0 or -1 (the sink
 * stopped, or the codec failed: audio_enc_error says which). */
int audio_enc_write(audio_enc *e, const float *pcm, size_t n);

/* Flushes the codec and writes the trailer (the final Ogg page, the last MP3/AAC
 * frames). Call once, after the last write. Returns 0 or -1. */
int audio_enc_finish(audio_enc *e);

/* The last failure as one line ("" when none). */
const char *audio_enc_error(const audio_enc *e);

/* Frees e (NULL allowed); unfinished output is dropped. */
void audio_enc_free(audio_enc *e);

#endif
