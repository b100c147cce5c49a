/*
 * audio_out.h - PCM to an output (out_file.h: a file replaced only when complete, a
 * device or FIFO written through, or stdout) in one of the audio formats.
 *
 * Formats: wav (16-bit PCM), flac, ogg (Vorbis) through libsndfile; mp3, opus (Ogg Opus),
 * aac (ADTS) and pcm (= s16) through audio_enc.h; f32 (raw float32 LE) and s16 (raw int16
 * LE). An output that cannot seek back (stdout, a FIFO, a terminal) takes any of them but
 * flac and ogg; wav there carries the total length when known, else maximal sizes, the
 * streaming convention players accept. Nothing reaches such an output before the first
 * samples, so a request that fails first (bad text, no tokenizer, ...) leaves it empty.
 * A speed other than 1 changes the speaking rate, pitch kept (speed.h), before encoding.
 */
#ifndef KZ_AUDIO_OUT_H
#define KZ_AUDIO_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "out_file.h"

typedef struct audio_out audio_out;

/* Opens the destination in format ("wav", "f32", "s16", "flac", "ogg", "mp3", "opus", "aac"
 * or "pcm", checked by the command line). total_samples is the final length when known
 * (needed for an exact wav header on a stream), else 0. speed in [0.25, 4] (1: the samples
 * as they are). On failure prints one line and returns NULL. */
audio_out *audio_out_open(const char *path, const char *format, int32_t sample_rate,
                          size_t total_samples, float speed);

/* Appends samples in [-1, 1]. Returns 0, or -1 once writing failed (recorded in the
 * output; printed when it is committed). */
int audio_out_write(audio_out *o, const float *pcm, size_t n_samples);

/* Pushes buffered audio to the destination now (streaming). Returns 0 or -1. */
int audio_out_flush(audio_out *o);

/* Whether a write failed (the command then reports that, not the cancelled synthesis). */
bool audio_out_failed(const audio_out *o);

/* Samples given to the format so far: after the speed change, so what the output will
 * play (the progress line counts these). */
size_t audio_out_samples(const audio_out *o);

/* After the last audio_out_write of a success: the speed change's last samples into
 * the format (audio_out_end does it when not done yet). Returns 0, or -1 once writing
 * failed. */
int audio_out_drain(audio_out *o);

/* Ends the encoding (the speed change's last samples, trailer, final wav sizes; the
 * pending stream header when success)
 * and returns the output for out_file_commit. Frees o. */
out_file *audio_out_end(audio_out *o, bool success);

/* audio_out_end and out_file_commit of this one output. Returns 0 on success. */
int audio_out_finish(audio_out *o, bool success);

#endif
