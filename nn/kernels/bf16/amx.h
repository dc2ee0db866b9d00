/* AMX set-up: Linux hands out the tile data state only to a process that asks for it
 * (arch_prctl ARCH_REQ_XCOMP_PERM, once per process, inherited by forked ranks), and each
 * thread must load a tile configuration before its first tile instruction. */
#ifndef DT_NN_KERNELS_AMX_H
#define DT_NN_KERNELS_AMX_H

#include <stdbool.h>
#include <stddef.h>

/* True when the CPU has AMX-BF16 and Linux granted this process the tile data (asked once;
 * later calls return the first answer). When it is false, *why (if not NULL) says why in a
 * short phrase: "the CPU has no AMX-BF16", "Linux refused the AMX tile data (...)". */
bool dt_amx_usable(const char **why);

/* Loads the one tile configuration every kernel uses (8 tiles of 16 rows x 64 bytes) into
 * this thread's tile state, once per thread. Only valid where dt_amx_usable(). */
void dt_amx_configure_thread(void);

#endif
