/* CRC-32C (Castagnoli), the checksum of TFRecord framing (train/tfevents.h), and its "masked"
 * form: TensorFlow stores ((crc >> 15) | (crc << 17)) + 0xa282ead8 so that a CRC computed over
 * data that itself holds CRCs does not come out trivially. */
#ifndef DT_UTIL_CRC32C_H
#define DT_UTIL_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t dt_crc32c(const void *data, size_t len);
uint32_t dt_crc32c_masked(const void *data, size_t len);

#endif
