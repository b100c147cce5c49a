/* speaker_encoder.c - SCAFFOLD until the speaker encoder lands (issue 31). */
#include "model/speaker_encoder.h"

#include "runtime/error.h"

kz_status kz_speaker_encoder_load(const kz_weights *w, const kz_tts_config *cfg,
                                  kz_speaker_encoder **out) {
    (void)w, (void)cfg;
    *out = NULL;
    return KZ_OK;
}

void kz_speaker_encoder_free(kz_speaker_encoder *se) { (void)se; }

kz_status kz_speaker_encoder_run(const kz_speaker_encoder *se, const float *pcm, size_t n,
                                 kz_exec *e, float *xvector) {
    (void)se, (void)pcm, (void)n, (void)e, (void)xvector;
    return kz_error_set(KZ_STATUS_UNSUPPORTED, "speaker encoder: not built yet");
}

int32_t kz_speaker_encoder_dim(const kz_speaker_encoder *se) { (void)se; return 0; }
