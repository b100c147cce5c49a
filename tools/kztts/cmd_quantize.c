/*
 * cmd_quantize.c - `kztts quantize`: a checkpoint directory -> one GGUF file in a
 * weight-format recipe (src/model/quantize.h), with a summary of what was written.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "interrupt.h"
#include "model/quantize.h"

static void print_report(const char *out, const kz_quantize_report *r) {
    static const char *const names[6] = {"F32", "F16", "BF16", "other", "Q8_0", "Q4_0"};
    double total = 0;
    printf("wrote %s in %.1f s:\n", out, r->seconds);
    for (int d = 0; d < 6; d++) {
        if (r->n_tensors[d]) {
            printf("  %-5s %5zu tensors %9.1f MB\n", names[d], r->n_tensors[d], r->bytes[d] / 1e6);
            total += r->bytes[d];
        }
    }
    printf("  total %9.1f MB; %zu codec weights pre-packed", total / 1e6, r->n_packed);
    if (r->n_forms) {
        printf(", %zu of them also in converted form", r->n_forms);
    }
    if (r->n_skipped) {
        printf("; %zu tensors of non-float types skipped (unused)", r->n_skipped);
    }
    printf("\n");
}

/* --codec-forms NAME: "none" (default), or a precision that converts the codec. */
static int parse_forms(const char *name, kz_precision *out) {
    static const struct { const char *name; kz_precision p; } names[] = {
        {"none", KZ_PRECISION_F32},
        {"fast", KZ_PRECISION_FAST},
        {"bf16", KZ_PRECISION_BF16},
        {"winograd", KZ_PRECISION_WINOGRAD},
        {"winograd-bf16", KZ_PRECISION_WINOGRAD_BF16}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(name, names[i].name) == 0) {
            *out = names[i].p;
            return 0;
        }
    }
    fprintf(stderr, "kztts quantize: --codec-forms must be none, fast, bf16, winograd or "
                    "winograd-bf16, got '%s'\n", name);
    return -1;
}

int cmd_quantize(int argc, char **argv) {
    const char *model_path = NULL, *out = NULL, *type = "q8_0", *forms_name = "none";
    bool help = false;
    const arg_spec specs[] = {
        {"--model", "-m", ARG_STRING, &model_path, 0, 0, "DIR   checkpoint directory (source)"},
        {"--output", "-o", ARG_STRING, &out, 0, 0, "FILE  the .gguf file to write"},
        {"--type", "-t", ARG_STRING, &type, 0, 0,
         "TYPE  q8_0 (default) | q4_0 | q4_mlp (4-bit MLPs) | bf16 | f16 | f32"},
        {"--codec-forms", NULL, ARG_STRING, &forms_name, 0, 0,
         "P     also store the codec converted for precision P (none (default), fast = "
         "this CPU's, bf16, winograd, winograd-bf16): loads in P map it"},
        {"--help", "-h", ARG_FLAG, &help, 0, 0, "show this help"},
    };
    int n_specs = (int)(sizeof specs / sizeof specs[0]);
    const char *pos[1];
    int n_pos;
    if (args_parse("quantize", specs, n_specs, argc, argv, pos, 0, &n_pos) != 0) {
        return 2;
    }
    if (help) {
        args_usage("quantize",
                   "-m DIR -o OUT.gguf [--type q8_0|q4_0|q4_mlp|bf16|f16|f32] [--codec-forms P]",
                   specs, n_specs);
        return 0;
    }
    kz_recipe recipe;
    if (!model_path || !out) {
        fprintf(stderr, "kztts quantize: -m DIR and -o OUT.gguf are required\n");
        return 2;
    }
    if (kz_recipe_parse(type, &recipe) != 0) {
        fprintf(stderr, "kztts quantize: unknown --type '%s' (q8_0, q4_0, q4_mlp, bf16, f16, f32)\n", type);
        return 2;
    }
    kz_precision forms;
    if (parse_forms(forms_name, &forms) != 0) {
        return 2;
    }
    kz_quantize_report report;
    interrupt_guard(out);
    kz_status st = kz_quantize(model_path, out, recipe, forms, &report);
    interrupt_unguard(out);
    if (st != KZ_OK) {
        cli_report("quantize", st);
        return 1;
    }
    print_report(out, &report);
    return 0;
}
