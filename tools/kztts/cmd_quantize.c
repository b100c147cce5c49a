/*
 * cmd_quantize.c - `kztts quantize`: a checkpoint directory -> one GGUF file in a
 * weight-format recipe (src/model/quantize.h), with a summary of what was written.
 */
#include <stdbool.h>
#include <stdio.h>

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
static const arg_choice FORMS_NAMES[] = {
    {"none", KZ_PRECISION_F32}, {"fast", KZ_PRECISION_FAST}, {"bf16", KZ_PRECISION_BF16},
    {"winograd", KZ_PRECISION_WINOGRAD}, {"winograd-bf16", KZ_PRECISION_WINOGRAD_BF16},
    {NULL, 0}};

int cmd_quantize(int argc, char **argv) {
    const char *model_path = NULL, *out = NULL, *type = "q8_0", *forms_name = "none";
    bool help = false;
    const arg_spec specs[] = {
        ARG_OPT_STRING("--model", "-m", &model_path, "DIR   checkpoint directory (source)"),
        ARG_OPT_STRING("--output", "-o", &out, "FILE  the .gguf file to write"),
        ARG_OPT_STRING("--type", "-t", &type, "TYPE  q8_0 (default) | q4_0 | q4_mlp (4-bit MLPs) | bf16 | f16 | f32"),
        ARG_OPT_CHOICE("--codec-forms", NULL, &forms_name, FORMS_NAMES,
                       "P     also store the codec converted for precision P (none (default), "
                       "fast = this CPU's, bf16, winograd, winograd-bf16): loads in P map it"),
        ARG_OPT_FLAG("--help", "-h", &help, "show this help"),
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
    const kz_precision forms = (kz_precision)args_choice_value(FORMS_NAMES, forms_name);
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
