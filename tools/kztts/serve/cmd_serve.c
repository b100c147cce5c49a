/*
 * cmd_serve.c - SCAFFOLD: `kztts serve` entry point, replaced by the HTTP layer's branch.
 */
#include <stdio.h>

#include "serve.h"

int cmd_serve(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kztts serve: not built yet\n");
    return 1;
}
