/*
 * cmd_info.c - `kztts info`: describe a model (configs, tensors, memory), what it can
 * do (speakers, instructions or cloning by type) and the CPU features, kernel level
 * and codec precision in use.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "progress.h"

int cmd_info(int argc, char **argv) {
    const char *model_path = NULL, *isa = "auto", *codec_precision = NULL;
    bool help = false, quiet = false;
    const arg_spec specs[] = {
        ARG_OPT_STRING("--model", "-m", &model_path, "MODEL checkpoint or codec directory, .gguf file or Hugging Face repo id"),
        ARG_OPT_CHOICE("--isa", NULL, &isa, CLI_ISA_NAMES, "LEVEL auto|scalar|avx2|avx512|neon kernel cap"),
        ARG_OPT_CHOICE("--codec-precision", NULL, &codec_precision, CLI_PRECISION_NAMES, "P     exact|fast|bf16|winograd|winograd-bf16 (default: the file's choice): load the codec so (the description names the precision in effect)"),
        ARG_OPT_FLAG("--quiet", "-q", &quiet, CLI_QUIET_HELP),
        ARG_OPT_FLAG("--help", "-h", &help, "show this help"),
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
    if (quiet) {
        progress_quiet();
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
    const char *type = kz_model_type(model);
    if (strcmp(type, "base") == 0) {
        printf("can do: voice cloning from 1-60 s of reference audio with its speaker encoder "
               "(x-vector) and codec encoder (reference codes): in-context (--ref-audio REF "
               "--ref-text T, the official default) or x-vector only (--xvector-only); saved "
               "voices with --voice (kztts voice create); no preset speakers, no instruction; "
               "default text layout streaming\n");
    } else if (strcmp(type, "custom_voice") == 0) {
        printf("can do: %d preset speakers (kztts speakers), instructions on 1.7B\n",
               (int)kz_model_speaker_count(model));
    } else if (strcmp(type, "voice_design") == 0) {
        printf("can do: voices described by an instruction (--instruct)\n");
    }
    kz_session_free(session);
    kz_model_free(model);
    return 0;
}
