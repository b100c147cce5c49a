/*
 * args.h - table-driven option parsing shared by all kztts subcommands.
 *
 *   argv -> each option looked up in the subcommand's table (name, value kind,
 *   destination, range or names, help) -> its value checked against the table
 *   (a number: whole, in range, no trailing characters; a name: one of the
 *   table's, in any case; a string: not empty) -> the destination, or one line
 *   "kztts CMD: --option problem" and -1 (the command then exits 2).
 *
 * Every value a user types goes through this one check, before any model is
 * loaded; what only the model can judge (a speaker's name, top-k against the
 * vocabulary) the library checks, and the commands exit 2 for those too.
 * args_usage prints the table as help text.
 */
#ifndef KZ_ARGS_H
#define KZ_ARGS_H

#include <stdbool.h>
#include <stdint.h>

typedef enum arg_kind {
    ARG_FLAG,   /* bool, no value */
    ARG_INT,    /* int64_t in [lo, hi], decimal */
    ARG_DOUBLE, /* double in [lo, hi], or (lo, hi] with ARG_ABOVE_LO; finite */
    ARG_STRING, /* const char *, never empty */
    ARG_CHOICE, /* const char *: one of choices' names, stored in the table's spelling;
                   with hi > 1 a comma-separated list of 1 to hi names, stored as typed */
} arg_kind;

/* ARG_DOUBLE: lo itself is out of range (top-p, repetition penalty: 0 means nothing). */
#define ARG_ABOVE_LO 1u

/* One accepted name of an ARG_CHOICE option; tables end with {NULL, 0}. */
typedef struct arg_choice {
    const char *name;
    int value;
} arg_choice;

typedef struct arg_spec {
    const char *name;  /* "--threads" */
    const char *alias; /* "-t" or NULL */
    arg_kind kind;
    void *dest;        /* bool *, int64_t *, double *, const char ** */
    double lo, hi;     /* range of numbers; ARG_CHOICE: most names in a list (0, 1: one) */
    unsigned flags;    /* ARG_ABOVE_LO */
    const arg_choice *choices; /* ARG_CHOICE */
    const char *help;  /* one line; the value name is its first word when kind != FLAG */
} arg_spec;

/* Table rows, one macro per kind. */
#define ARG_OPT_FLAG(name, alias, dest, help) {name, alias, ARG_FLAG, dest, 0, 0, 0, NULL, help}
#define ARG_OPT_INT(name, alias, dest, lo, hi, help)                                          \
    {name, alias, ARG_INT, dest, lo, hi, 0, NULL, help}
#define ARG_OPT_DOUBLE(name, alias, dest, lo, hi, help)                                       \
    {name, alias, ARG_DOUBLE, dest, lo, hi, 0, NULL, help}
#define ARG_OPT_ABOVE(name, alias, dest, lo, hi, help)                                        \
    {name, alias, ARG_DOUBLE, dest, lo, hi, ARG_ABOVE_LO, NULL, help}
#define ARG_OPT_STRING(name, alias, dest, help) {name, alias, ARG_STRING, dest, 0, 0, 0, NULL, help}
#define ARG_OPT_CHOICE(name, alias, dest, choices, help)                                      \
    {name, alias, ARG_CHOICE, dest, 0, 0, 0, choices, help}
#define ARG_OPT_CHOICES(name, alias, dest, choices, max, help)                                \
    {name, alias, ARG_CHOICE, dest, 0, max, 0, choices, help}

/* Parses argv[0..argc) (options and positionals in any order; "--" ends options).
 * Returns 0, or -1 after printing "kztts CMD: problem" to stderr. */
int args_parse(const char *cmd, const arg_spec *specs, int n_specs, int argc, char **argv,
               const char **positional, int max_positional, int *n_positional);

/* The value of name (any case) in choices, or -1 when it is none of them. */
int args_choice_value(const arg_choice *choices, const char *name);

/* Prints "kztts CMD: OPTION must be one of a, b, c, got 'value'" to stderr. */
void args_choice_error(const char *cmd, const char *option, const arg_choice *choices,
                       const char *value);

/* Prints "usage: kztts CMD SYNOPSIS" and the option table to stdout. */
void args_usage(const char *cmd, const char *synopsis, const arg_spec *specs, int n_specs);

#endif
