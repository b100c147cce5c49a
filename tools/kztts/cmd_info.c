/*
 * cmd_info.c - `kztts info`: describe a model (configs, tensors, memory) and
 * the CPU features and kernel level in use.
 */
#include <stdbool.h>
#include <stdio.h>

#include "args.h"
#include "cli.h"

int cmd_info(int argc, char **argv) {
    const char *model_path = NULL, *isa = "auto";
    bool help = false;
    const arg_spec specs[] = {
        {"--model", "-m", ARG_STRING, &model_path, 0, 0, "DIR   checkpoint or codec directory"},
        {"--isa", NULL, ARG_STRING, &isa, 0, 0, "LEVEL auto|scalar|avx2|avx512|neon kernel cap"},
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
    if (cli_open("info", model_path, isa, 1, &model, &session) != 0) {
        return 1;
    }
    printf("kztts %s\n%s\n", kz_version(), kz_model_describe(model));
    kz_session_free(session);
    kz_model_free(model);
    return 0;
}
