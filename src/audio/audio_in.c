/* audio_in.c - SCAFFOLD until reference audio input lands (issue 31). */
#include "audio/audio_in.h"

#include "runtime/error.h"

kz_status kz_audio_read_file(const char *path, float **samples, size_t *n_frames,
                             int32_t *sample_rate, int32_t *channels) {
    (void)path, (void)samples, (void)n_frames, (void)sample_rate, (void)channels;
    return kz_error_set(KZ_STATUS_UNSUPPORTED, "audio input: not built yet");
}

kz_status kz_audio_prepare_reference(const float *samples, size_t n_frames,
                                     int32_t sample_rate, int32_t channels, int32_t out_rate,
                                     double max_seconds, float **mono, size_t *n_out) {
    (void)samples, (void)n_frames, (void)sample_rate, (void)channels, (void)out_rate;
    (void)max_seconds, (void)mono, (void)n_out;
    return kz_error_set(KZ_STATUS_UNSUPPORTED, "audio input: not built yet");
}
