/* Augmentations (see augment.h).
 *
 * Geometry is computed backwards, output pixel to source: the rotation asks for four
 * neighbours of the flipped, shifted image, each of which is a point of the resized crop, which
 * is a bilinear mix of the decoded image. Nothing is materialised between the stages, so a
 * sample needs no scratch memory and any thread can assemble any sample. Coordinates follow
 * PyTorch's align_corners=False convention: pixel centres at integer positions, a resized
 * pixel y maps to (y + 0.5) * box / size - 0.5 in the box, clamped at 0 like
 * upsample_bilinear2d.
 */
#include "data/augment.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/err.h"
#include "util/rng.h"

bool dt_augment_enabled(const struct dt_augment_opts *o)
{
    return o && (o->resized_crop || o->rotate > 0 || o->brightness > 0 || o->contrast > 0 ||
                 o->saturation > 0 || o->erase > 0);
}

static int check_range(const char *name, int n, const float v[2], const char **key, char *why,
                       size_t size)
{
    if (n != 2)
        snprintf(why, size, "expected [min, max], got %d value%s", n, n == 1 ? "" : "s");
    else if (v[0] > v[1])
        snprintf(why, size, "min %g is above max %g", (double)v[0], (double)v[1]);
    else
        return 0;
    *key = name;
    return -1;
}

int dt_augment_check(const struct dt_augment_opts *o, const char **key, char *why, size_t size)
{
    if (check_range("data.augment.crop_scale", o->ncrop_scale, o->crop_scale, key, why, size) ||
        check_range("data.augment.crop_ratio", o->ncrop_ratio, o->crop_ratio, key, why, size) ||
        check_range("data.augment.erase_scale", o->nerase_scale, o->erase_scale, key, why, size) ||
        check_range("data.augment.erase_ratio", o->nerase_ratio, o->erase_ratio, key, why, size))
        return -1;
    return 0;
}

int dt_augment_check_channels(const struct dt_augment_opts *o, int c)
{
    if (o && o->saturation > 0 && c != 3)
        return dt_fail(DT_EUSAGE,
                       "data.augment.saturation: %g needs RGB images (3 channels), the data has %d",
                       (double)o->saturation, c);
    return 0;
}

static double uniform_in(struct dt_rng *r, double lo, double hi)
{
    return lo + (hi - lo) * dt_rng_uniform_double(r);
}

/* Python's round(): halves to even, as torchvision's int(round(...)). */
static int round_half_even(double v)
{
    return (int)nearbyint(v);
}

void dt_augment_crop_box(struct dt_rng *r, int h, int w, const float scale[2], const float ratio[2],
                         int *y, int *x, int *bh, int *bw)
{
    double area = (double)h * w, lr0 = log(ratio[0]), lr1 = log(ratio[1]);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * uniform_in(r, scale[0], scale[1]);
        double aspect = exp(uniform_in(r, lr0, lr1));
        int cw = round_half_even(sqrt(target * aspect));
        int ch = round_half_even(sqrt(target / aspect));
        if (cw > 0 && cw <= w && ch > 0 && ch <= h) {
            *y = (int)dt_rng_below(r, (uint64_t)(h - ch + 1));
            *x = (int)dt_rng_below(r, (uint64_t)(w - cw + 1));
            *bh = ch;
            *bw = cw;
            return;
        }
    }
    /* The centre crop of the whole image, narrowed to the nearest allowed ratio. */
    double in_ratio = (double)w / h;
    int cw = w, ch = h;
    if (in_ratio < ratio[0])
        ch = round_half_even(w / (double)ratio[0]);
    else if (in_ratio > ratio[1])
        cw = round_half_even(h * (double)ratio[1]);
    ch = ch < 1 ? 1 : ch > h ? h : ch;
    cw = cw < 1 ? 1 : cw > w ? w : cw;
    *y = (h - ch) / 2;
    *x = (w - cw) / 2;
    *bh = ch;
    *bw = cw;
}

void dt_augment_erase_box(struct dt_rng *r, int h, int w, const float scale[2],
                          const float ratio[2], int *y, int *x, int *eh, int *ew)
{
    double area = (double)h * w, lr0 = log(ratio[0]), lr1 = log(ratio[1]);
    *y = *x = *eh = *ew = 0;
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * uniform_in(r, scale[0], scale[1]);
        double aspect = exp(uniform_in(r, lr0, lr1));
        int rh = round_half_even(sqrt(target * aspect));
        int rw = round_half_even(sqrt(target / aspect));
        if (!(rh < h && rw < w))
            continue;
        *y = (int)dt_rng_below(r, (uint64_t)(h - rh + 1));
        *x = (int)dt_rng_below(r, (uint64_t)(w - rw + 1));
        *eh = rw > 0 ? rh : 0; /* a zero-width box erases nothing */
        *ew = rh > 0 ? rw : 0;
        return;
    }
}

static float factor(struct dt_rng *r, float v)
{
    if (!(v > 0))
        return 1.0f;
    double lo = 1.0 - v < 0 ? 0 : 1.0 - v;
    return (float)uniform_in(r, lo, 1.0 + v);
}

void dt_augment_draw(const struct dt_augment_opts *o, struct dt_rng *r, int h, int w,
                     struct dt_augment_draw *d)
{
    d->crop_y = d->crop_x = 0;
    d->crop_h = h;
    d->crop_w = w;
    if (o->resized_crop)
        dt_augment_crop_box(r, h, w, o->crop_scale, o->crop_ratio, &d->crop_y, &d->crop_x,
                            &d->crop_h, &d->crop_w);
    d->angle = o->rotate > 0 ? (float)uniform_in(r, -o->rotate, o->rotate) : 0.0f;
    d->brightness = factor(r, o->brightness);
    d->contrast = factor(r, o->contrast);
    d->saturation = factor(r, o->saturation);
    d->erase_y = d->erase_x = d->erase_h = d->erase_w = 0;
    if (o->erase > 0 && dt_rng_uniform(r) < o->erase)
        dt_augment_erase_box(r, h, w, o->erase_scale, o->erase_ratio, &d->erase_y, &d->erase_x,
                             &d->erase_h, &d->erase_w);
}

/* ---- geometry ---- */

struct geometry {
    const uint8_t *plane; /* one channel of the decoded image */
    const struct dt_augment_draw *d;
    int h, w;
    bool resized;
    float sy, sx; /* crop box size / output size */
};

/* The resized crop at integer (y, x) of the output grid. */
static inline float at_crop(const struct geometry *g, int y, int x)
{
    if (!g->resized)
        return g->plane[(size_t)y * g->w + x];
    const struct dt_augment_draw *d = g->d;
    float fy = g->sy * ((float)y + 0.5f) - 0.5f, fx = g->sx * ((float)x + 0.5f) - 0.5f;
    fy = fy < 0 ? 0 : fy;
    fx = fx < 0 ? 0 : fx;
    int y0 = (int)fy, x0 = (int)fx;
    int y1 = y0 + (y0 < d->crop_h - 1), x1 = x0 + (x0 < d->crop_w - 1);
    float ly = fy - (float)y0, lx = fx - (float)x0;
    const uint8_t *r0 = g->plane + (size_t)(d->crop_y + y0) * g->w + d->crop_x;
    const uint8_t *r1 = g->plane + (size_t)(d->crop_y + y1) * g->w + d->crop_x;
    return (1.0f - ly) * ((1.0f - lx) * r0[x0] + lx * r0[x1]) +
           ly * ((1.0f - lx) * r1[x0] + lx * r1[x1]);
}

/* The padded crop and flip of the resized crop: zero (the padding) outside the image. */
static inline float at_shifted(const struct geometry *g, int y, int x)
{
    const struct dt_augment_draw *d = g->d;
    int sy = y + d->oy - d->pad;
    int sx = (d->flip ? g->w - 1 - x : x) + d->ox - d->pad;
    if (sy < 0 || sy >= g->h || sx < 0 || sx >= g->w)
        return 0.0f;
    return at_crop(g, sy, sx);
}

/* What the rotation reads: the shifted image materialised in `buf` (h x w floats), or, for
 * images too large for the stack buffer, computed on demand. The same floats either way. */
static inline float at_rotation_source(const struct geometry *g, const float *buf, int y, int x,
                                       float fill)
{
    if (y < 0 || y >= g->h || x < 0 || x >= g->w)
        return fill;
    return buf ? buf[(size_t)y * g->w + x] : at_shifted(g, y, x);
}

/* Output (i, j) rotated by the draw's angle about the image centre: the source point is the
 * output point turned back, read bilinearly; neighbours outside the image are `fill` (what
 * torchvision's rotate blends in through its mask). Zero-weight neighbours are not read. */
static void rotate_plane(const struct geometry *g, const float *buf, float cs, float sn, float fill,
                         float *out)
{
    float cy = 0.5f * (float)(g->h - 1), cx = 0.5f * (float)(g->w - 1);
    for (int i = 0; i < g->h; i++) {
        float dy = (float)i - cy;
        for (int j = 0; j < g->w; j++) {
            float dx = (float)j - cx;
            float u = cx + dx * cs - dy * sn, v = cy + dx * sn + dy * cs;
            float fu = floorf(u), fv = floorf(v);
            int x0 = (int)fu, y0 = (int)fv;
            float lx = u - fu, ly = v - fv;
            float acc = (1.0f - ly) * (1.0f - lx) * at_rotation_source(g, buf, y0, x0, fill);
            if (lx > 0)
                acc += (1.0f - ly) * lx * at_rotation_source(g, buf, y0, x0 + 1, fill);
            if (ly > 0)
                acc += ly * (1.0f - lx) * at_rotation_source(g, buf, y0 + 1, x0, fill);
            if (lx > 0 && ly > 0)
                acc += ly * lx * at_rotation_source(g, buf, y0 + 1, x0 + 1, fill);
            out[(size_t)i * g->w + j] = acc;
        }
    }
}

/* Planes up to this many values (128 x 128) are materialised before a rotation reads each
 * value four times; the buffer lives on the assembling thread's stack (64 KiB). */
enum { ROTATE_BUFFER = 128 * 128 };

static void geometry(const struct dt_augment_opts *o, const struct dt_augment_draw *d,
                     const struct dt_augment_image *im, const uint8_t *src, float *dst)
{
    size_t plane = (size_t)im->h * im->w;
    struct geometry g = {
        .d = d,
        .h = im->h,
        .w = im->w,
        .resized = d->crop_h != im->h || d->crop_w != im->w,
        .sy = (float)d->crop_h / (float)im->h,
        .sx = (float)d->crop_w / (float)im->w,
    };
    double rad = (double)d->angle * (M_PI / 180.0);
    float cs = (float)cos(rad), sn = (float)sin(rad);
    float buf[d->angle != 0 && plane <= ROTATE_BUFFER ? plane : 1];
    for (int ch = 0; ch < im->c; ch++) {
        g.plane = src + ch * plane;
        float *out = dst + ch * plane;
        bool rotate = d->angle != 0, buffered = rotate && plane <= ROTATE_BUFFER;
        float *shifted = buffered ? buf : out;
        if (!rotate || buffered)
            for (int i = 0; i < im->h; i++)
                for (int j = 0; j < im->w; j++)
                    shifted[(size_t)i * im->w + j] = at_shifted(&g, i, j);
        if (rotate)
            rotate_plane(&g, buffered ? buf : NULL, cs, sn, (float)(o ? o->rotate_fill : 0), out);
    }
}

/* ---- colour ---- */

static inline float clamp255(float v)
{
    return v < 0 ? 0 : v > 255.0f ? 255.0f : v;
}

/* torchvision's rgb_to_grayscale weights (ITU-R 601-2 luma). */
static inline float luma(const float *px, size_t plane, size_t i)
{
    return 0.2989f * px[i] + 0.587f * px[plane + i] + 0.114f * px[2 * plane + i];
}

/* torchvision adjust_brightness, adjust_contrast, adjust_saturation, in that order, on pixel
 * values: each blends the image with black, its mean grey, its own grey. Contrast's mean is
 * that of the grey image (all values for other than 3 channels). */
static void colour(const struct dt_augment_draw *d, const struct dt_augment_image *im, float *px)
{
    size_t plane = (size_t)im->h * im->w, n = plane * (size_t)im->c;
    if (d->brightness != 1.0f)
        for (size_t i = 0; i < n; i++)
            px[i] = clamp255(px[i] * d->brightness);
    if (d->contrast != 1.0f) {
        double sum = 0;
        if (im->c == 3)
            for (size_t i = 0; i < plane; i++)
                sum += luma(px, plane, i);
        else
            for (size_t i = 0; i < n; i++)
                sum += px[i];
        float mean = (float)(sum / (double)(im->c == 3 ? plane : n));
        float keep = d->contrast, mix = (1.0f - d->contrast) * mean;
        for (size_t i = 0; i < n; i++)
            px[i] = clamp255(keep * px[i] + mix);
    }
    if (d->saturation != 1.0f && im->c == 3)
        for (size_t i = 0; i < plane; i++) {
            float grey = (1.0f - d->saturation) * luma(px, plane, i);
            for (int ch = 0; ch < 3; ch++)
                px[ch * plane + i] = clamp255(d->saturation * px[ch * plane + i] + grey);
        }
}

void dt_augment_apply(const struct dt_augment_opts *o, const struct dt_augment_draw *d,
                      const struct dt_augment_image *im, const uint8_t *src, float *dst)
{
    size_t plane = (size_t)im->h * im->w;
    geometry(o, d, im, src, dst);
    colour(d, im, dst);
    for (int ch = 0; ch < im->c; ch++) {
        float mean = im->mean[ch], std = im->std[ch];
        float *p = dst + ch * plane;
        for (size_t i = 0; i < plane; i++)
            p[i] = (p[i] / 255.0f - mean) / std; /* the expression of batch.c's table */
    }
    float value = o ? o->erase_value : 0.0f;
    for (int ch = 0; ch < im->c && d->erase_h > 0; ch++)
        for (int i = d->erase_y; i < d->erase_y + d->erase_h; i++)
            for (int j = d->erase_x; j < d->erase_x + d->erase_w; j++)
                dst[ch * plane + (size_t)i * im->w + j] = value;
}
