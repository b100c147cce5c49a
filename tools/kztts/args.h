/*
 * args.h - table-driven option parsing shared by all kztts subcommands.
 *
 * A subcommand declares a table of options (name, value kind, destination,
 * range, help); args_parse fills the destinations, collects positional
 * arguments and reports the first problem as one line ("kztts decode: unknown
 * option '--foo'"). args_usage prints the table as help text.
 */
#ifndef KZ_ARGS_H
#define KZ_ARGS_H

#include <stdbool.h>
#include <stdint.h>

typedef enum arg_kind {
    ARG_FLAG,   /* bool, no value */
    ARG_INT,    /* int64_t in [lo, hi] */
    ARG_DOUBLE, /* double in [lo, hi] */
    ARG_STRING, /* const char * */
} arg_kind;

typedef struct arg_spec {
    const char *name;  /* "--threads" */
    const char *alias; /* "-t" or NULL */
    arg_kind kind;
    void *dest;        /* bool *, int64_t *, double *, const char ** */
    double lo, hi;     /* range for numbers */
    const char *help;  /* one line; the value name is its first word when kind != FLAG */
} arg_spec;

/* Parses argv[0..argc) (options and positionals in any order; "--" ends options).
 * Returns 0, or -1 after printing "kztts CMD: problem" to stderr. */
int args_parse(const char *cmd, const arg_spec *specs, int n_specs, int argc, char **argv,
               const char **positional, int max_positional, int *n_positional);

/* Prints "usage: kztts CMD SYNOPSIS" and the option table to stdout. */
void args_usage(const char *cmd, const char *synopsis, const arg_spec *specs, int n_specs);

#endif
