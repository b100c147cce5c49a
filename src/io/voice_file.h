/*
 * voice_file.h - the .kzvoice file (docs/VOICE_FILE.md): a cloned voice (synth/voice.h)
 * as a small, versioned, little-endian binary with a CRC-32 over the whole.
 *
 *   write: struct kz_voice -> header (72 bytes) | x-vector f32 | codes i32 | transcript
 *          | CRC-32 -> io/atomic_file.h (the file is complete or not there)
 *   read:  path -> a regular file of at most KZ_VOICE_FILE_MAX_BYTES -> parse: magic,
 *          version, every header field against its range, the sizes against the file's
 *          length, the checksum, then the values (finite x-vector, codes in [0, 65535],
 *          the transcript valid UTF-8 without NUL) -> one allocation holding the voice
 *
 * Which model a voice fits (its type, sizes, fingerprint, codebook size) is not the file's
 * business: kz_voice_check does that against a loaded model.
 */
#ifndef KZ_VOICE_FILE_H
#define KZ_VOICE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "synth/voice.h"

#define KZ_VOICE_FILE_VERSION 1
#define KZ_VOICE_FILE_HEADER_BYTES 72
/* Hard caps of the reader (and of voices the library makes). */
#define KZ_VOICE_MAX_ENC_DIM 8192
#define KZ_VOICE_MAX_CODEBOOKS 64
#define KZ_VOICE_MAX_FRAMES 7500 /* 600 s at 12.5 frames a second */
#define KZ_VOICE_MAX_TEXT_BYTES (1 << 20)
#define KZ_VOICE_MAX_SECONDS 600.0
#define KZ_VOICE_FILE_MAX_BYTES                                                               \
    ((size_t)KZ_VOICE_FILE_HEADER_BYTES + 4 * (size_t)KZ_VOICE_MAX_ENC_DIM +                  \
     4 * (size_t)KZ_VOICE_MAX_FRAMES * KZ_VOICE_MAX_CODEBOOKS + KZ_VOICE_MAX_TEXT_BYTES + 4)

/* A voice in one allocation (free with kz_voice_free, i.e. free()): the struct, then
 * xvector [enc_dim], ref_codes [n_frames * n_codebooks] (NULL when 0) and ref_text
 * (text_bytes + NUL, zeroed). format_version is set to the current one, the rest zero.
 * NULL when out of memory or a count is out of the caps above. */
kz_voice *kz_voice_file_alloc(int32_t enc_dim, int32_t n_frames, int32_t n_codebooks,
                              size_t text_bytes);

/* The file's bytes for v: *bytes malloc'ed [*n_bytes] (caller frees). Checks v against
 * the same rules the reader applies, so whatever is written reads back. */
kz_status kz_voice_file_encode(const kz_voice *v, uint8_t **bytes, size_t *n_bytes);

/* Parses n_bytes of a voice file; name is the file for messages ("NAME: problem"). On
 * failure *out is NULL and the status is KZ_STATUS_BAD_INPUT (or OUT_OF_MEMORY). */
kz_status kz_voice_file_parse(const uint8_t *bytes, size_t n_bytes, const char *name,
                              kz_voice **out);

/* Reads and parses the file at path (KZ_STATUS_IO when it cannot be read). */
kz_status kz_voice_file_read(const char *path, kz_voice **out);

/* Writes v at path, complete or not at all. */
kz_status kz_voice_file_write(const kz_voice *v, const char *path);

/* CRC-32 (ISO-HDLC, as zlib's crc32) of n_bytes, continuing from crc (0 to start). */
uint32_t kz_voice_file_crc32(uint32_t crc, const void *bytes, size_t n_bytes);

#endif
