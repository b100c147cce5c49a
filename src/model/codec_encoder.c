/* codec_encoder.c - SCAFFOLD until the codec encoder lands (issue 31). */
#include "model/codec_encoder.h"

#include "runtime/error.h"

kz_status kz_codec_encoder_load(const kz_weights *w, const kz_codec_config *cfg,
                                kz_codec_encoder **out) {
    (void)w, (void)cfg;
    *out = NULL;
    return KZ_OK;
}

void kz_codec_encoder_free(kz_codec_encoder *enc) { (void)enc; }

kz_status kz_codec_encoder_run(const kz_codec_encoder *enc, const float *pcm, size_t n,
                               kz_exec *e, int32_t **codes, size_t *n_frames) {
    (void)enc, (void)pcm, (void)n, (void)e, (void)codes, (void)n_frames;
    return kz_error_set(KZ_STATUS_UNSUPPORTED, "codec encoder: not built yet");
}

int32_t kz_codec_encoder_codebooks(const kz_codec_encoder *enc) { (void)enc; return 0; }
