/* A 5x7 pixel font for util/raster.c: digits, lowercase letters (uppercase drawn as
 * lowercase) and the punctuation chart labels use; anything else is drawn as '?'. */
#ifndef DT_UTIL_FONT5X7_H
#define DT_UTIL_FONT5X7_H

/* 35 characters, row by row from the top, '#' for a set pixel; never NULL. */
const char *dt_font5x7_glyph(int c);

#endif
