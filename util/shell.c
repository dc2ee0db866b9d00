#include "util/shell.h"

#include <ctype.h>
#include <stdbool.h>
#include <string.h>

void dt_shell_word(FILE *out, const char *s)
{
    bool plain = *s != '\0';
    for (const char *c = s; *c && plain; c++)
        plain = isalnum((unsigned char)*c) || strchr("%+,-./:=@_", *c);
    if (plain) {
        fputs(s, out);
        return;
    }
    fputc('\'', out);
    for (const char *c = s; *c; c++)
        fputs(*c == '\'' ? "'\\''" : (char[2]){*c, 0}, out);
    fputc('\'', out);
}
