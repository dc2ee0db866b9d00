/* Command lines written for a shell to read back: the `stop` event's resume command
 * (cmd/train.c) and the run directory's cmdline.txt (train/history.c). */
#ifndef DT_UTIL_SHELL_H
#define DT_UTIL_SHELL_H

#include <stdio.h>

/* Writes s to out as one shell word: as it is when every character is one a shell leaves
 * alone (letters, digits and %+,-./:=@_), else single-quoted, each ' as '\''. An empty s is
 * ''. */
void dt_shell_word(FILE *out, const char *s);

#endif
