/*
 * cmd_speakers.c - `kztts speakers`: the speakers and languages a model offers (a Base
 * model has no preset speakers: it clones, and the listing says how).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "progress.h"

int cmd_speakers(int argc, char **argv) {
    const char *model_path = NULL;
    bool help = false, quiet = false;
    const arg_spec specs[] = {
        ARG_OPT_STRING("--model", "-m", &model_path, "MODEL checkpoint directory, .gguf file or Hugging Face repo id"),
        ARG_OPT_FLAG("--quiet", "-q", &quiet, CLI_QUIET_HELP),
        ARG_OPT_FLAG("--help", "-h", &help, "show this help"),
    };
    int n_specs = (int)(sizeof specs / sizeof specs[0]);
    const char *pos[1];
    int n_pos;
    if (args_parse("speakers", specs, n_specs, argc, argv, pos, 0, &n_pos) != 0) {
        return 2;
    }
    if (help || !model_path) {
        args_usage("speakers", "-m MODEL", specs, n_specs);
        return help ? 0 : 2;
    }
    if (quiet) {
        progress_quiet();
    }
    kz_model *m;
    kz_session *s;
    if (cli_open("speakers", model_path, "auto", 1, &m, &s) != 0) {
        return 1;
    }
    printf("type: %s\nspeakers:", kz_model_type(m));
    for (int32_t i = 0; i < kz_model_speaker_count(m); i++) {
        printf(" %s", kz_model_speaker_name(m, i));
    }
    if (strcmp(kz_model_type(m), "base") == 0) {
        printf(" (none: a Base model clones the voice of a reference recording)\n"
               "  in-context:    kztts synth -m MODEL --ref-audio REF.wav --ref-text \"what REF says\" TEXT\n"
               "  x-vector only: kztts synth -m MODEL --ref-audio REF.wav --xvector-only TEXT\n"
               "  saved voice:   kztts voice create -m MODEL --ref-audio REF.wav --ref-text T -o NAME.kzvoice,\n"
               "                 then kztts synth -m MODEL --voice NAME.kzvoice TEXT");
    } else if (kz_model_speaker_count(m) == 0) {
        printf(" (none)");
    }
    printf("\nlanguages: auto");
    for (int32_t i = 0; i < kz_model_language_count(m); i++) {
        printf(" %s", kz_model_language_name(m, i));
    }
    printf("\n");
    kz_session_free(s);
    kz_model_free(m);
    return 0;
}
