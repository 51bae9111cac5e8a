/* chipd_hip_cuda.h - the hip* names chipd uses, mapped to CUDA for the NVIDIA build.
 *
 * Debian's HIP headers for NVIDIA (5.2) do not compile with CUDA 12/13, so the NVIDIA
 * build compiles the same HIP sources with nvcc through this header instead. Only the
 * names chipd uses are here; add one when the HIP code starts using it. Usable from C
 * (dev_hip.c, host API only) and from CUDA C++ (kernels.hip).
 */
#ifndef CHIPD_HIP_CUDA_H
#define CHIPD_HIP_CUDA_H

#include <cuda_runtime_api.h>

typedef cudaError_t hipError_t;
typedef cudaStream_t hipStream_t;
typedef cudaEvent_t hipEvent_t;
typedef struct cudaDeviceProp hipDeviceProp_t;

#define hipSuccess		   cudaSuccess
#define hipErrorNotReady	   cudaErrorNotReady
#define hipErrorNoDevice	   cudaErrorNoDevice
#define hipErrorInsufficientDriver cudaErrorInsufficientDriver
#define hipErrorIllegalAddress	   cudaErrorIllegalAddress
#define hipErrorLaunchFailure	   cudaErrorLaunchFailure
#define hipErrorECCNotCorrectable  cudaErrorECCUncorrectable
#define hipErrorAssert		   cudaErrorAssert
#define hipErrorLaunchTimeOut	   cudaErrorLaunchTimeout
#define hipGetErrorString	   cudaGetErrorString
#define hipGetLastError		   cudaGetLastError

#define hipGetDeviceCount      cudaGetDeviceCount
#define hipSetDevice	       cudaSetDevice
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipMemGetInfo	       cudaMemGetInfo
#define hipDeviceSynchronize   cudaDeviceSynchronize

#define hipMalloc		cudaMalloc
#define hipFree			cudaFree
#define hipMemcpy		cudaMemcpy
#define hipMemcpyAsync		cudaMemcpyAsync
#define hipMemset		cudaMemset
#define hipMemsetAsync		cudaMemsetAsync
#define hipHostMalloc		cudaHostAlloc
#define hipHostMallocDefault	cudaHostAllocDefault
#define hipHostFree		cudaFreeHost
#define hipMemcpyHostToDevice	cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost	cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipMemcpyKind		cudaMemcpyKind

#define hipStreamCreateWithFlags cudaStreamCreateWithFlags
#define hipStreamNonBlocking	 cudaStreamNonBlocking
#define hipStreamDestroy	 cudaStreamDestroy
#define hipStreamSynchronize	 cudaStreamSynchronize
#define hipStreamWaitEvent	 cudaStreamWaitEvent

#define hipEventCreateWithFlags cudaEventCreateWithFlags
#define hipEventDisableTiming	cudaEventDisableTiming
#define hipEventRecord		cudaEventRecord
#define hipEventQuery		cudaEventQuery
#define hipEventSynchronize	cudaEventSynchronize
#define hipEventDestroy		cudaEventDestroy

#ifdef __CUDACC__
/* HIP's wall clock; on NVIDIA the global timer, which counts nanoseconds. */
static __device__ __forceinline__ unsigned long long wall_clock64(void)
{
	unsigned long long t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}
#define CHIPD_WALL_MHZ 1000ull
#endif

#endif
