#include "train/restart.h"

#include <ctype.h>
#include <string.h>

double dt_restart_delay(int n)
{
    double d = 1;
    for (int i = 1; i < n && d < DT_RESTART_MAX_DELAY; i++)
        d *= 2;
    return d < DT_RESTART_MAX_DELAY ? d : DT_RESTART_MAX_DELAY;
}

/* Past the digits of a "pid N" starting at s, or s when there is none. */
static const char *skip_pid(const char *s)
{
    if (strncmp(s, "pid ", 4) || !isdigit((unsigned char)s[4]))
        return s;
    s += 4;
    while (isdigit((unsigned char)*s))
        s++;
    return s;
}

bool dt_restart_same_failure(const char *a, const char *b)
{
    for (;;) {
        const char *na = skip_pid(a), *nb = skip_pid(b);
        if ((na != a) != (nb != b))
            return false;
        if (na != a) {
            a = na;
            b = nb;
            continue;
        }
        if (*a != *b)
            return false;
        if (!*a)
            return true;
        a++;
        b++;
    }
}
