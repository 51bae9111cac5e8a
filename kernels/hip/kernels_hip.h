/* kernels_hip.h - the boundary between the HIP backend (C) and the kernels (HIP C++).
 * Include <hip/hip_runtime_api.h> or chipd_hip_cuda.h first. */
#ifndef CHIPD_KERNELS_HIP_H
#define CHIPD_KERNELS_HIP_H

#include "chipd_kcall.h"

/* Codes a kernel leaves in the device's error word (first one wins). */
#define CHIPD_KERR_BLOCK 1 /* a block table entry outside the pool */
#define CHIPD_KERR_TOKEN 2 /* a token outside the vocabulary */

#ifdef __cplusplus
extern "C" {
#endif

/* Launches @c (already checked) on stream @s; kernels that validate device data
 * report into @err. Returns the runtime's error code (hipSuccess = 0). */
int chipd_hip_launch(const struct dev_kcall *c, hipStream_t s, int *err);

#ifdef __cplusplus
}
#endif

#endif
