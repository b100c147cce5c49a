// api_cxx.cpp - the public header from C++ (-pedantic-errors): every default function,
// value-initialised structs, destructors given NULL and one bad parameter, run as a test.
#include <cstdio>
#include <cstring>

#include "kztts.h"

static int failures;

static void expect(bool ok, const char *what) {
    if (!ok) {
        std::fprintf(stderr, "api_cxx: %s failed\n", what);
        failures++;
    }
}

int main() {
    expect(kz_abi_version() == KZ_ABI_VERSION, "abi version");
    kz_model_params mp{};
    kz_model_default_params(&mp);
    expect(mp.isa == KZ_ISA_CAP_AUTO && mp.codec_precision == KZ_PRECISION_DEFAULT,
           "model defaults");
    kz_session_params sp{};
    kz_session_default_params(&sp);
    expect(sp.n_threads == 0 && sp.schedule == KZ_SCHEDULE_AUTO, "session defaults");
    kz_decode_params dp{};
    kz_decode_default_params(&dp);
    expect(dp.mode == KZ_DECODE_STREAM && dp.chunk_frames == 4 && !dp.on_audio, "decode defaults");
    kz_request r{};
    kz_request_default_params(nullptr, &r);
    expect(r.chunk_frames == 0 && r.first_chunk_frames == 1 && r.top_k == 50 &&
               r.max_utterance_bytes == 600 && std::strcmp(r.language, "auto") == 0,
           "request defaults");
    kz_voice_params vp{};
    kz_voice_default_params(&vp);
    expect(!vp.ref_text && !vp.xvector_only && vp.max_seconds == 0 && vp.n_threads == 0,
           "voice defaults");
    kz_voice_info vi{};
    expect(kz_voice_get_info(nullptr, &vi) == KZ_STATUS_INVALID_ARGUMENT, "bad voice info");
    kz_voice_free(nullptr);
    kz_codes_free(nullptr);
    kz_model_free(nullptr);
    kz_session_free(nullptr);
    kz_audio_free(nullptr);
    kz_ids_free(nullptr);
    kz_model *m = nullptr;
    expect(kz_model_load(nullptr, nullptr, &m) == KZ_STATUS_INVALID_ARGUMENT && !m, "bad load");
    expect(kz_last_error()[0] != '\0', "message");
    return failures ? 1 : 0;
}
