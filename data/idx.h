/* IDX files (MNIST, Fashion-MNIST, KMNIST): one images file and one labels file per split.
 *
 * Images: big-endian magic 0x00000803, dims n, h, w (big-endian uint32), then n*h*w bytes.
 * Labels: magic 0x00000801, dim n, then n bytes. Everything is checked before it is trusted:
 * magic, dims, that the data length equals the product of the dims exactly, that images and
 * labels agree on n, that every label is below `classes`, that the split is not empty.
 */
#ifndef DT_DATA_IDX_H
#define DT_DATA_IDX_H

#include "data/dataset.h"

/* The class count assumed for IDX data when the caller passes 0. */
#define DT_IDX_DEFAULT_CLASSES 10

/* Loads one split from two files (gzip or uncompressed, detected by magic). */
int dt_idx_load_split(struct dt_dataset *d, const char *images_path, const char *labels_path,
                      int classes);

/* Loads train-* and t10k-* from dir. Each file is looked up as NAME.gz first, then as NAME
 * uncompressed. */
int dt_idx_load(struct dt_data *out, const char *dir, int classes);
/* The t10k-* split alone (what evaluation needs). */
int dt_idx_load_test(struct dt_dataset *test, const char *dir, int classes);

#endif
