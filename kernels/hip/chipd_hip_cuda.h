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

/* Modules (a callable's own kernels): CUDA's driver API, whose entry points are
 * reached through the runtime (cudaGetDriverEntryPointByVersion), so that nothing
 * links libcuda and a program still starts where no driver is installed. A driver
 * error maps to the runtime's nearest code. */
#include <cuda.h>
#ifndef __cplusplus
#include <stdatomic.h>
#endif

typedef CUmodule hipModule_t;
typedef CUfunction hipFunction_t;

#define hipErrorFileNotFound		cudaErrorFileNotFound
#define HIP_LAUNCH_PARAM_BUFFER_POINTER CU_LAUNCH_PARAM_BUFFER_POINTER
#define HIP_LAUNCH_PARAM_BUFFER_SIZE	CU_LAUNCH_PARAM_BUFFER_SIZE
#define HIP_LAUNCH_PARAM_END		CU_LAUNCH_PARAM_END

#define hipModuleLoad	      chipd_cu_module_load
#define hipModuleUnload	      chipd_cu_module_unload
#define hipModuleGetFunction  chipd_cu_module_get_function
#define hipModuleLaunchKernel chipd_cu_launch_kernel

static inline cudaError_t chipd_cu_error(CUresult r)
{
	switch (r) {
	case CUDA_SUCCESS:
		return cudaSuccess;
	case CUDA_ERROR_FILE_NOT_FOUND:
		return cudaErrorFileNotFound;
	case CUDA_ERROR_NOT_FOUND:
		return cudaErrorSymbolNotFound;
	case CUDA_ERROR_INVALID_IMAGE:
		return cudaErrorInvalidKernelImage;
	case CUDA_ERROR_NO_BINARY_FOR_GPU:
		return cudaErrorNoKernelImageForDevice;
	case CUDA_ERROR_ILLEGAL_ADDRESS:
		return cudaErrorIllegalAddress;
	case CUDA_ERROR_LAUNCH_FAILED:
		return cudaErrorLaunchFailure;
	case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
		return cudaErrorLaunchOutOfResources;
	case CUDA_ERROR_INVALID_VALUE:
		return cudaErrorInvalidValue;
	case CUDA_ERROR_OUT_OF_MEMORY:
		return cudaErrorMemoryAllocation;
	default:
		return cudaErrorUnknown;
	}
}

/* The driver's @sym, or NULL. */
static inline void *chipd_cu_entry(const char *sym)
{
	enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
	void *fp = NULL;
#if CUDART_VERSION >= 12050
	cudaError_t e = cudaGetDriverEntryPointByVersion(sym, &fp, 12000, cudaEnableDefault, &q);
#else
	cudaError_t e = cudaGetDriverEntryPoint(sym, &fp, cudaEnableDefault, &q);
#endif
	return e == cudaSuccess && q == cudaDriverEntryPointSuccess ? fp : NULL;
}

static inline cudaError_t chipd_cu_module_load(CUmodule *m, const char *path)
{
	CUresult (*fn)(CUmodule *, const char *);

	*(void **)&fn = chipd_cu_entry("cuModuleLoad");
	return fn ? chipd_cu_error(fn(m, path)) : cudaErrorInsufficientDriver;
}

static inline cudaError_t chipd_cu_module_unload(CUmodule m)
{
	CUresult (*fn)(CUmodule);

	*(void **)&fn = chipd_cu_entry("cuModuleUnload");
	return fn ? chipd_cu_error(fn(m)) : cudaErrorInsufficientDriver;
}

static inline cudaError_t chipd_cu_module_get_function(CUfunction *f, CUmodule m,
							  const char *name)
{
	CUresult (*fn)(CUfunction *, CUmodule, const char *);

	*(void **)&fn = chipd_cu_entry("cuModuleGetFunction");
	return fn ? chipd_cu_error(fn(f, m, name)) : cudaErrorInsufficientDriver;
}

static inline cudaError_t chipd_cu_launch_kernel(CUfunction f, unsigned gx, unsigned gy,
						    unsigned gz, unsigned bx, unsigned by,
						    unsigned bz, unsigned shared, cudaStream_t s,
						    void **params, void **extra)
{
	CUresult (*fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
		       unsigned, CUstream, void **, void **);
#ifndef __cplusplus
	/* once per program (a launch is hot): acquire/release publish the pointer, and two
	 * threads that both look it up store the same one */
	static _Atomic(void *) cached;
	void *p = atomic_load_explicit(&cached, memory_order_acquire);

	if (!p) {
		p = chipd_cu_entry("cuLaunchKernel");
		atomic_store_explicit(&cached, p, memory_order_release);
	}
	*(void **)&fn = p;
#else
	*(void **)&fn = chipd_cu_entry("cuLaunchKernel");
#endif
	return fn ? chipd_cu_error(fn(f, gx, gy, gz, bx, by, bz, shared, (CUstream)s, params, extra))
		  : cudaErrorInsufficientDriver;
}

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
