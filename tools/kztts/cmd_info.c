/*
 * cmd_info.c - `kztts info`: describe a model (configs, tensors, memory) and
 * the CPU features, kernel level and codec precision in use.
 */
#include <stdbool.h>
#include <stdio.h>

#include "args.h"
#include "cli.h"

int cmd_info(int argc, char **argv) {
    const char *model_path = NULL, *isa = "auto", *codec_precision = NULL;
    bool help = false;
    const arg_spec specs[] = {
        {"--model", "-m", ARG_STRING, &model_path, 0, 0, "DIR   checkpoint or codec directory"},
        {"--isa", NULL, ARG_STRING, &isa, 0, 0, "LEVEL auto|scalar|avx2|avx512|neon kernel cap"},
        {"--codec-precision", NULL, ARG_STRING, &codec_precision, 0, 0, "P     f32|bf16|winograd|winograd-bf16|fast: load the codec so (the description names the precision in effect)"},
        {"--help", "-h", ARG_FLAG, &help, 0, 0, "show this help"},
    };
    int n_specs = (int)(sizeof specs / sizeof specs[0]);
    const char *pos[1];
    int n_pos;
    if (args_parse("info", specs, n_specs, argc, argv, pos, 0, &n_pos) != 0) {
        return 2;
    }
    if (help) {
        args_usage("info", "-m MODEL", specs, n_specs);
        return 0;
    }
    if (!model_path) {
        printf("kztts %s\n%s\n", kz_version(), kz_system_info());
        return 0;
    }
    kz_model *model;
    kz_session *session;
    const cli_engine e = {.isa = isa, .codec_precision = codec_precision, .threads = 1};
    if (cli_open_engine("info", model_path, &e, &model, &session) != 0) {
        return 1;
    }
    printf("kztts %s\n%s\n", kz_version(), kz_model_describe(model));
    kz_session_free(session);
    kz_model_free(model);
    return 0;
}
