// kernels.hip - chipd's GPU kernels, written once in HIP: hipcc builds them for AMD,
// nvcc for NVIDIA through chipd_hip_cuda.h. Shapes were checked on the host
// (dev_kcall_check); the kernels re-check what only device data can break (a block
// id outside the pool, a token outside the vocabulary) and report it through the
// stream's error word instead of reading out of bounds. Every kernel returns at once
// while that word is set: later work on a failed stream is skipped (device.h). Algorithms and layouts are
// those of sim_kernels.c (see kcall.h).
#ifdef CHIPD_HIP_CUDA
#include "hip/chipd_hip_cuda.h"
#define chipd_wall_clock wall_clock64
#else
#include <hip/hip_runtime.h>
// The wall clock of CDNA2/CDNA3 GPUs runs at 100 MHz.
#define CHIPD_WALL_MHZ 100ull
// HIP 5.2 declares wall_clock64 for the device pass only; the host pass needs a name.
static __device__ unsigned long long chipd_wall_clock(void)
{
#ifdef __HIP_DEVICE_COMPILE__
	return (unsigned long long)wall_clock64();
#else
	return 0;
#endif
}
#endif

#include "hip/kernels_hip.h"
#include "chipd_kcall.h"

#include <math.h>

#define TILE 16 // gemm tile edge: TILE x TILE threads per block

static __device__ void fail(int *err, int code)
{
	atomicCAS(err, 0, code);
}

// Whether an earlier kernel on this stream failed, the same answer for every thread of
// the block (a block of this kernel may set the word meanwhile; the kernels below
// synchronize their blocks, so all threads must take the same way out).
static __device__ bool stream_failed(const int *err)
{
	return __syncthreads_or(*(const volatile int *)err != 0) != 0;
}

// The first statement of every kernel.
#define SKIP_IF_FAILED(err)                                                                        \
	do {                                                                                       \
		if (stream_failed(err))                                                            \
			return;                                                                    \
	} while (0)

__global__ void k_gemm(struct dev_k_gemm g, int *err)
{
	SKIP_IF_FAILED(err);
	__shared__ float as[TILE][TILE], bs[TILE][TILE];
	unsigned row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
	float acc = 0.0f;

	for (unsigned t0 = 0; t0 < g.k; t0 += TILE) {
		unsigned ka = t0 + threadIdx.x, kb = t0 + threadIdx.y;

		as[threadIdx.y][threadIdx.x] =
		    row < g.m && ka < g.k ? g.a[(size_t)row * g.k + ka] : 0.0f;
		bs[threadIdx.y][threadIdx.x] =
		    kb < g.k && col < g.n ? g.b[(size_t)kb * g.n + col] : 0.0f;
		__syncthreads();
		for (unsigned t = 0; t < TILE; t++)
			acc += as[threadIdx.y][t] * bs[t][threadIdx.x];
		__syncthreads();
	}
	if (row < g.m && col < g.n) {
		if (g.accumulate)
			acc += g.c[(size_t)row * g.n + col];
		g.c[(size_t)row * g.n + col] = acc;
	}
}

__global__ void k_embed(struct dev_k_embed e, int *err)
{
	SKIP_IF_FAILED(err);
	int tok = *e.token;

	if (tok < 0 || (unsigned)tok >= e.vocab) {
		fail(err, CHIPD_KERR_TOKEN);
		return;
	}
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < e.dim;
	     i += gridDim.x * blockDim.x)
		e.out[i] = e.table[(size_t)tok * e.dim + i];
}

// The cache row of position @pos, kv head @kvh, or NULL if the table leaves the pool.
static __device__ float *slot(const struct dev_k_cache &c, const int32_t *tab, unsigned pos,
			      unsigned kvh)
{
	unsigned b = pos / c.block_size;
	int id = b < c.table_len ? tab[b] : -1;

	if (id < 0 || (unsigned)id >= c.pool_blocks)
		return NULL;
	return c.pool + (size_t)id * c.block_stride +
	       ((size_t)(pos % c.block_size) * c.kv_heads + kvh) * c.head_dim;
}

// grid: kv_heads; block: head_dim
__global__ void k_kv_append(struct dev_k_kv_append a, int *err)
{
	SKIP_IF_FAILED(err);
	unsigned h = blockIdx.x, d = threadIdx.x;
	float *k = slot(a.cache, a.cache.ktab, a.pos, h),
	      *v = slot(a.cache, a.cache.vtab, a.pos, h);

	if (!k || !v) {
		fail(err, CHIPD_KERR_BLOCK);
		return;
	}
	k[d] = a.k[h * a.cache.head_dim + d];
	v[d] = a.v[h * a.cache.head_dim + d];
}

static __device__ float *arow(const struct dev_k_attn &a, float *base, unsigned h, unsigned part,
			      unsigned width)
{
	return base + ((size_t)h * a.nparts + part) * width;
}

// grid: (nparts, heads); block: DEV_ATTN_PART, one thread per position
__global__ void k_attn_qk(struct dev_k_attn a, int *err)
{
	SKIP_IF_FAILED(err);
	__shared__ float q[DEV_MAX_HEAD_DIM];
	unsigned part = blockIdx.x, h = blockIdx.y, t = threadIdx.x;
	unsigned p = part * DEV_ATTN_PART + t, dim = a.cache.head_dim;
	unsigned kvh = h / (a.heads / a.cache.kv_heads);
	float acc = 0.0f;

	for (unsigned d = t; d < dim; d += blockDim.x)
		q[d] = a.q[(size_t)h * dim + d];
	__syncthreads();
	if (p < a.ctx) {
		const float *k = slot(a.cache, a.cache.ktab, p, kvh);

		if (!k) {
			fail(err, CHIPD_KERR_BLOCK);
			return;
		}
		for (unsigned d = 0; d < dim; d++)
			acc += q[d] * k[d];
	}
	arow(a, a.scores, h, part, DEV_ATTN_PART)[t] = acc;
}

// grid: (nparts, heads); block: DEV_ATTN_PART
__global__ void k_attn_softmax(struct dev_k_attn a, int *err)
{
	SKIP_IF_FAILED(err);
	__shared__ float red[DEV_ATTN_PART];
	unsigned part = blockIdx.x, h = blockIdx.y, t = threadIdx.x;
	unsigned valid = min(a.ctx - part * DEV_ATTN_PART, DEV_ATTN_PART);
	float *s = arow(a, a.scores, h, part, DEV_ATTN_PART);
	float x = t < valid ? s[t] * a.scale : -INFINITY, mx, e;

	red[t] = x;
	__syncthreads();
	for (unsigned w = DEV_ATTN_PART / 2; w > 0; w /= 2) {
		if (t < w)
			red[t] = fmaxf(red[t], red[t + w]);
		__syncthreads();
	}
	mx = red[0];
	__syncthreads();
	e = t < valid ? expf(x - mx) : 0.0f;
	s[t] = e;
	red[t] = e;
	__syncthreads();
	for (unsigned w = DEV_ATTN_PART / 2; w > 0; w /= 2) {
		if (t < w)
			red[t] += red[t + w];
		__syncthreads();
	}
	if (t == 0) {
		*arow(a, a.m, h, part, 1) = mx;
		*arow(a, a.l, h, part, 1) = red[0];
	}
}

// grid: (nparts, heads); block: head_dim, one thread per output element
__global__ void k_attn_pv(struct dev_k_attn a, int *err)
{
	SKIP_IF_FAILED(err);
	__shared__ float pr[DEV_ATTN_PART];
	unsigned part = blockIdx.x, h = blockIdx.y, d = threadIdx.x, dim = a.cache.head_dim;
	unsigned kvh = h / (a.heads / a.cache.kv_heads);
	unsigned valid = min(a.ctx - part * DEV_ATTN_PART, DEV_ATTN_PART);
	const float *probs = arow(a, a.scores, h, part, DEV_ATTN_PART);
	float acc = 0.0f;

	for (unsigned t = d; t < DEV_ATTN_PART; t += blockDim.x)
		pr[t] = probs[t];
	__syncthreads();
	for (unsigned t = 0; t < valid; t++) {
		const float *v = slot(a.cache, a.cache.vtab, part * DEV_ATTN_PART + t, kvh);

		if (!v) {
			fail(err, CHIPD_KERR_BLOCK);
			return;
		}
		acc += pr[t] * v[d];
	}
	arow(a, a.po, h, part, dim)[d] = acc;
}

// grid: heads; block: head_dim
__global__ void k_attn_update(struct dev_k_attn a, int *err)
{
	SKIP_IF_FAILED(err);
	unsigned h = blockIdx.x, d = threadIdx.x, dim = a.cache.head_dim;
	float mx = -INFINITY, sum = 0.0f, acc = 0.0f;

	for (unsigned part = 0; part < a.nparts; part++) {
		float mc = *arow(a, a.m, h, part, 1), mn = fmaxf(mx, mc);
		float old = expf(mx - mn), cur = expf(mc - mn);

		sum = sum * old + *arow(a, a.l, h, part, 1) * cur;
		acc = acc * old + arow(a, a.po, h, part, dim)[d] * cur;
		mx = mn;
	}
	a.out[(size_t)h * dim + d] = acc / sum;
}

#define ARGMAX_TPB 256

// one block: strided scan, then a tree that keeps the lower index on ties. As the CPU
// version: the largest value that is not NaN (NaN never wins), index 0 if all are.
__global__ void k_argmax(struct dev_k_argmax a, int *err)
{
	SKIP_IF_FAILED(err);
	__shared__ float bv[ARGMAX_TPB];
	__shared__ unsigned bi[ARGMAX_TPB];
	// best == a.n: no non-NaN value seen yet
	unsigned t = threadIdx.x, best = a.n;
	float v = -INFINITY;

	for (unsigned i = t; i < a.n; i += ARGMAX_TPB) {
		float x = a.in[i];

		if (x > v || (best == a.n && !isnan(x))) {
			v = x;
			best = i;
		}
	}
	bv[t] = v;
	bi[t] = best;
	__syncthreads();
	for (unsigned w = ARGMAX_TPB / 2; w > 0; w /= 2) {
		unsigned o = t < w ? bi[t + w] : a.n;

		if (o < a.n &&
		    (bi[t] >= a.n || bv[t + w] > bv[t] || (bv[t + w] == bv[t] && o < bi[t]))) {
			bv[t] = bv[t + w];
			bi[t] = bi[t + w];
		}
		__syncthreads();
	}
	if (t == 0)
		*a.out = (int32_t)(bi[0] < a.n ? bi[0] : 0);
}

__global__ void k_spin(struct dev_k_spin s, int *err)
{
	SKIP_IF_FAILED(err);
	unsigned long long t0 = chipd_wall_clock(), ticks = s.ns * CHIPD_WALL_MHZ / 1000ull;

	while (chipd_wall_clock() - t0 < ticks)
		;
	*s.out = s.token;
}

extern "C" int chipd_hip_launch(const struct dev_kcall *c, hipStream_t s, int *err)
{
	const struct dev_k_attn &a = c->u.attn;
	dim3 parts(a.nparts, a.heads);

	// an error an earlier call of this thread left would read as this launch's
	(void)hipGetLastError();

	switch (c->kernel) {
	case DEV_K_GEMM: {
		dim3 grid((c->u.gemm.n + TILE - 1) / TILE, (c->u.gemm.m + TILE - 1) / TILE);

		k_gemm<<<grid, dim3(TILE, TILE), 0, s>>>(c->u.gemm, err);
		break;
	}
	case DEV_K_EMBED:
		k_embed<<<(c->u.embed.dim + 255) / 256, 256, 0, s>>>(c->u.embed, err);
		break;
	case DEV_K_KV_APPEND:
		k_kv_append<<<c->u.kv.cache.kv_heads, c->u.kv.cache.head_dim, 0, s>>>(c->u.kv, err);
		break;
	case DEV_K_ATTN_QK:
		k_attn_qk<<<parts, DEV_ATTN_PART, 0, s>>>(a, err);
		break;
	case DEV_K_ATTN_SOFTMAX:
		k_attn_softmax<<<parts, DEV_ATTN_PART, 0, s>>>(a, err);
		break;
	case DEV_K_ATTN_PV:
		k_attn_pv<<<parts, a.cache.head_dim, 0, s>>>(a, err);
		break;
	case DEV_K_ATTN_UPDATE:
		k_attn_update<<<a.heads, a.cache.head_dim, 0, s>>>(a, err);
		break;
	case DEV_K_ARGMAX:
		k_argmax<<<1, ARGMAX_TPB, 0, s>>>(c->u.argmax, err);
		break;
	case DEV_K_SPIN:
		k_spin<<<1, 1, 0, s>>>(c->u.spin, err);
		break;
	default:
		return (int)hipSuccess + 1; // unreachable: the host checked the id
	}
	return (int)hipGetLastError();
}
