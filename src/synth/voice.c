/* voice.c - SCAFFOLD until voices land (issue 31). */
#include "synth/voice.h"

#include "runtime/error.h"

static kz_status not_yet(void) {
    return kz_error_set(KZ_STATUS_UNSUPPORTED, "voices: not built yet");
}

void kz_voice_default_params(kz_voice_params *params) {
    if (params) {
        *params = (kz_voice_params){0};
    }
}
kz_status kz_voice_from_samples(const kz_model *model, const float *samples, size_t n_frames,
                                int32_t sample_rate, int32_t channels,
                                const kz_voice_params *params, kz_voice **out) {
    (void)model, (void)samples, (void)n_frames, (void)sample_rate, (void)channels;
    (void)params, (void)out;
    return not_yet();
}
kz_status kz_voice_from_file(const kz_model *model, const char *audio_path,
                             const kz_voice_params *params, kz_voice **out) {
    (void)model, (void)audio_path, (void)params, (void)out;
    return not_yet();
}
kz_status kz_voice_save(const kz_voice *voice, const char *path) {
    (void)voice, (void)path;
    return not_yet();
}
kz_status kz_voice_load(const char *path, kz_voice **out) {
    (void)path, (void)out;
    return not_yet();
}
void kz_voice_free(kz_voice *voice) { (void)voice; }
kz_status kz_voice_check(const kz_model *model, const kz_voice *voice) {
    // SCAFFOLD: accepts every voice until the voices branch lands (synthesis with a voice
    // built in memory is tested before that; request.c checks the fields it reads).
    (void)model, (void)voice;
    return KZ_OK;
}
kz_status kz_voice_get_info(const kz_voice *voice, kz_voice_info *info) {
    (void)voice, (void)info;
    return not_yet();
}
kz_status kz_encode(const kz_model *model, const float *samples, size_t n_frames,
                    int32_t sample_rate, int32_t channels, const kz_voice_params *params,
                    int32_t **codes, size_t *n_codes_frames, int32_t *n_codebooks) {
    (void)model, (void)samples, (void)n_frames, (void)sample_rate, (void)channels;
    (void)params, (void)codes, (void)n_codes_frames, (void)n_codebooks;
    return not_yet();
}
kz_status kz_encode_file(const kz_model *model, const char *audio_path,
                         const kz_voice_params *params, int32_t **codes,
                         size_t *n_codes_frames, int32_t *n_codebooks) {
    (void)model, (void)audio_path, (void)params, (void)codes, (void)n_codes_frames;
    (void)n_codebooks;
    return not_yet();
}
void kz_codes_free(int32_t *codes) { (void)codes; }
uint64_t kz_model_voice_fingerprint(const kz_model *m) {
    (void)m;
    return 0;
}
