/*
 * cmd_tokenize.c - `kztts tokenize`: text -> the model's text token ids.
 *
 *   TEXT (the positional argument; standard input, read verbatim, when it is
 *   absent or "-") -> kz_tokenize(model, text, --split) -> the ids on one
 *   line, separated by spaces (an empty line for empty text).
 *
 * No tokens are added (no ChatML wrapper, no BOS/EOS). A trailing newline
 * read from standard input is text like any other (id 198 in the released models).
 * Invalid UTF-8 prints "kztts tokenize: bad input: invalid UTF-8 at byte N"
 * and exits 1; a NUL byte in standard input is refused the same way, since
 * the text crosses the API as a C string.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "progress.h"

/* Reads all of standard input into a NUL-terminated buffer; NULL on failure. */
static char *read_stdin(size_t *n_bytes) {
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, stdin);
        if (n < cap) {
            break;
        }
        cap *= 2;
        char *grown = realloc(buf, cap + 1);
        if (!grown) {
            free(buf);
            return NULL;
        }
        buf = grown;
    }
    if (!buf || ferror(stdin)) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *n_bytes = n;
    return buf;
}

int cmd_tokenize(int argc, char **argv) {
    const char *model_path = NULL, *split_name = "qwen2";
    bool help = false, quiet = false;
    const arg_spec specs[] = {
        ARG_OPT_STRING("--model", "-m", &model_path, "MODEL checkpoint directory, .gguf file or Hugging Face repo id"),
        ARG_OPT_CHOICE("--split", NULL, &split_name, CLI_SPLIT_NAMES, "MODE  pre-tokenizer pattern: qwen2 (default) or mistral"),
        ARG_OPT_FLAG("--quiet", "-q", &quiet, CLI_QUIET_HELP),
        ARG_OPT_FLAG("--help", "-h", &help, "show this help"),
    };
    int n_specs = (int)(sizeof specs / sizeof specs[0]);
    const char *pos[1];
    int n_pos;
    if (args_parse("tokenize", specs, n_specs, argc, argv, pos, 1, &n_pos) != 0) {
        return 2;
    }
    if (help || !model_path) {
        args_usage("tokenize", "-m MODEL [--split qwen2|mistral] [TEXT | -]", specs, n_specs);
        return help ? 0 : 2;
    }
    if (quiet) {
        progress_quiet();
    }
    const kz_text_split split = (kz_text_split)args_choice_value(CLI_SPLIT_NAMES, split_name);
    char *owned = NULL;
    const char *text = n_pos == 1 ? pos[0] : "-";
    if (strcmp(text, "-") == 0) {
        size_t n_bytes;
        owned = read_stdin(&n_bytes);
        if (!owned) {
            fprintf(stderr, "kztts tokenize: cannot read standard input\n");
            return 1;
        }
        if (strlen(owned) != n_bytes) {
            fprintf(stderr, "kztts tokenize: bad input: NUL byte at byte %zu\n", strlen(owned));
            free(owned);
            return 1;
        }
        text = owned;
    }
    kz_model *model;
    kz_session *session;
    if (cli_open("tokenize", model_path, "auto", 1, &model, &session) != 0) {
        free(owned);
        return 1;
    }
    int32_t *ids;
    size_t n_ids;
    kz_status st = kz_tokenize(model, text, split, &ids, &n_ids);
    if (st == KZ_OK) {
        for (size_t i = 0; i < n_ids; i++) {
            printf(i ? " %d" : "%d", (int)ids[i]);
        }
        printf("\n");
        kz_ids_free(ids);
    } else {
        cli_report("tokenize", st);
    }
    kz_session_free(session);
    kz_model_free(model);
    free(owned);
    return st == KZ_OK ? 0 : 1;
}
