/*
 * main.c - the kztts command-line tool: dispatches argv[1] to cmd_<name>, then makes
 * sure what the command printed on stdout reached it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "serve/serve.h"
#include "interrupt.h"

static void usage(FILE *f) {
    fprintf(f,
            "kztts %s - Qwen3-TTS inference on the CPU\n\n"
            "usage: kztts COMMAND [options]\n\n"
            "commands:\n"
            "  synth    text -> speech                  kztts synth -m MODEL -s SPEAKER \"Hello\" -o out.wav\n"
            "  speakers list speakers and languages     kztts speakers -m MODEL\n"
            "  tokenize text -> token ids               kztts tokenize -m MODEL \"Hello\"\n"
            "  decode   codec codes file -> audio       kztts decode -m MODEL --codes FILE -o OUT\n"
            "  encode   audio -> codec codes file       kztts encode -m MODEL --audio REF.wav -o CODES.txt\n"
            "  voice    clone a voice into a file       kztts voice create -m BASE --ref-audio REF.wav --ref-text T -o NAME.kzvoice\n"
            "           show a voice file               kztts voice info NAME.kzvoice\n"
            "  info     describe a model and this CPU   kztts info -m MODEL\n"
            "  bench    measure stage speed             kztts bench -m MODEL --decoder-only\n"
            "  quantize write a GGUF model              kztts quantize -m DIR -o OUT.gguf --type q8_0\n"
            "  quality  compare with a reference model  kztts quality -m MODEL --ref REF\n"
            "  serve    OpenAI-compatible HTTP server   kztts serve -m MODEL --port 8000\n\n"
            "'kztts COMMAND --help' lists a command's options.\n",
            kz_version());
}

/* rc, or 1 after one line when the text printed on stdout could not all be written (a
 * full disk, a closed stdout): ids, lists and reports are a command's product too. */
static int stdout_written(const char *cmd, int rc) {
    int err = fflush(stdout) == 0 ? 0 : errno;
    if (!err && ferror(stdout)) {
        err = EIO; // an earlier write failed; its errno is gone
    }
    if (!err || rc != 0) {
        return rc; // a failed command has said why already
    }
    fprintf(stderr, "kztts%s%s: stdout: cannot write: %s\n", cmd ? " " : "", cmd ? cmd : "",
            strerror(err));
    return 1;
}

int main(int argc, char **argv) {
    interrupt_init(); // before any thread: an interrupted command leaves no partial output
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return stdout_written(NULL, argc < 2 ? 2 : 0);
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("kztts %s\n", kz_version());
        return stdout_written(NULL, 0);
    }
    static const struct { const char *name; int (*fn)(int, char **); } cmds[] = {
        {"synth", cmd_synth}, {"decode", cmd_decode}, {"speakers", cmd_speakers},
        {"tokenize", cmd_tokenize}, {"info", cmd_info}, {"bench", cmd_bench},
        {"quality", cmd_quality}, {"quantize", cmd_quantize}, {"encode", cmd_encode},
        {"voice", cmd_voice}, {"serve", cmd_serve}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        if (strcmp(argv[1], cmds[i].name) == 0) {
            return stdout_written(cmds[i].name, cmds[i].fn(argc - 2, argv + 2));
        }
    }
    fprintf(stderr, "kztts: unknown command '%s' (see 'kztts --help')\n", argv[1]);
    return 2;
}
