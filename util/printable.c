#include "util/printable.h"

#include <stdio.h>

const char *dt_printable(const char *s, char *buf, size_t size)
{
    size_t at = 0;
    for (const unsigned char *c = (const unsigned char *)s; c && *c; c++) {
        int control = *c < 0x20 || *c == 0x7f;
        size_t need = control ? 4 : 1;
        if (at + need >= size)
            break;
        if (control)
            snprintf(buf + at, 5, "\\x%02x", *c);
        else
            buf[at] = (char)*c;
        at += need;
    }
    buf[at] = 0;
    return buf;
}
