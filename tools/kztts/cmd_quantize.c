/*
 * cmd_quantize.c - `kztts quantize`: a checkpoint directory -> one GGUF file, through
 * kz_quantize (kztts.h), with a progress line on a terminal and a summary of what was
 * written.
 *
 * The library owns the output's temporary file, so a signal is deferred around the call
 * (interrupt.h): the progress callback then cancels, the library removes its file, and
 * the process ends by the signal.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "interrupt.h"
#include "progress.h"

static void print_report(const char *out, const kz_quantize_report *r) {
    uint64_t total = 0;
    printf("wrote %s in %.1f s:\n", out, r->seconds);
    for (size_t i = 0; i < sizeof r->types / sizeof r->types[0]; i++) {
        const kz_quantize_count *c = &r->types[i];
        if (c->n_tensors) {
            printf("  %-5s %5zu tensors %9.1f MB\n", c->type, c->n_tensors, c->n_bytes / 1e6);
            total += c->n_bytes;
        }
    }
    if (r->tokenizer.n_tensors) {
        printf("  tokenizer tables %zu tensors %5.1f MB\n", r->tokenizer.n_tensors,
               r->tokenizer.n_bytes / 1e6);
        total += r->tokenizer.n_bytes;
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

static const arg_choice TYPE_NAMES[] = {
    {"q8_0", KZ_QUANTIZE_Q8_0}, {"q8", KZ_QUANTIZE_Q8_0}, {"q4_0", KZ_QUANTIZE_Q4_0},
    {"q4", KZ_QUANTIZE_Q4_0}, {"q4_mlp", KZ_QUANTIZE_Q4_MLP}, {"bf16", KZ_QUANTIZE_BF16},
    {"f16", KZ_QUANTIZE_F16}, {"f32", KZ_QUANTIZE_F32}, {NULL, 0}};

static const arg_choice FORMS_NAMES[] = {
    {"none", KZ_PRECISION_DEFAULT}, {"fast", KZ_PRECISION_FAST}, {"bf16", KZ_PRECISION_BF16},
    {"winograd", KZ_PRECISION_WINOGRAD}, {"winograd-bf16", KZ_PRECISION_WINOGRAD_BF16},
    {NULL, 0}};

/* kz_quantize's progress callback: the status line, and false once a signal came. */
static bool on_progress(size_t n_done, size_t n_total, void *user) {
    progress_show(user, n_done == n_total, "quantize: %zu/%zu tensors", n_done, n_total);
    return !interrupt_pending();
}

int cmd_quantize(int argc, char **argv) {
    const char *model_path = NULL, *out = NULL, *type = "q8_0", *forms_name = "none";
    bool help = false, quiet = false;
    const arg_spec specs[] = {
        ARG_OPT_STRING("--model", "-m", &model_path, "DIR   checkpoint directory (source)"),
        ARG_OPT_STRING("--output", "-o", &out, "FILE  the .gguf file to write"),
        ARG_OPT_CHOICE("--type", "-t", &type, TYPE_NAMES, "TYPE  q8_0 (default) | q4_0 | q4_mlp (4-bit MLPs) | bf16 | f16 | f32"),
        ARG_OPT_CHOICE("--codec-forms", NULL, &forms_name, FORMS_NAMES,
                       "P     also store the codec converted for precision P (none (default), "
                       "fast = this CPU's, bf16, winograd, winograd-bf16): the file then "
                       "runs its codec in P unless --codec-precision says otherwise"),
        ARG_OPT_FLAG("--quiet", "-q", &quiet, "no progress line (it is drawn only when stderr is a terminal)"),
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
    if (quiet) {
        progress_quiet();
    }
    if (!model_path || !out) {
        fprintf(stderr, "kztts quantize: -m DIR and -o OUT.gguf are required\n");
        return 2;
    }
    if (strcmp(out, "-") == 0) {
        // A GGUF is mapped in place by its readers: a file, not a stream.
        fprintf(stderr, "kztts quantize: -o -: a GGUF cannot be written to stdout; name a file\n");
        return 2;
    }
    kz_quantize_params params;
    kz_quantize_default_params(&params);
    params.type = (kz_quantize_type)args_choice_value(TYPE_NAMES, type);
    params.codec_forms = (kz_precision)args_choice_value(FORMS_NAMES, forms_name);
    kz_quantize_report report;
    progress bar;
    progress_begin(&bar, true);
    params.progress = on_progress;
    params.user = &bar;
    params.report = &report;
    interrupt_defer_begin();
    kz_status st = kz_quantize(model_path, out, &params);
    interrupt_defer_end(); // ends the process here if a signal came
    progress_end(&bar);
    if (st != KZ_OK) {
        cli_report("quantize", st);
        return 1;
    }
    print_report(out, &report);
    return 0;
}
